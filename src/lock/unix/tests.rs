use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::PathBuf;
use std::sync::mpsc;
use std::sync::{Arc, Barrier};

use super::*;
use crate::lock::{wait, Cancel, Waiter};

/// A fresh scratch directory, removed with everything in it when dropped.
pub(super) struct Scratch(PathBuf);

impl std::ops::Deref for Scratch {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for Scratch {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub(super) fn scratch(name: &str) -> Scratch {
    let dir = std::env::temp_dir().join(format!("procward-lock-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    Scratch(dir)
}

/// The lock file `l` in a fresh scratch directory (removed when the
/// first half is dropped).
fn lock_path(name: &str) -> (Scratch, PathBuf) {
    let dir = scratch(name);
    let path = dir.join("l");
    (dir, path)
}

fn open(path: &Path) -> LockFile {
    LockFile::open(path, 0o600, false).unwrap_or_else(|e| panic!("open {path:?}: {e:?}"))
}

fn acquire(path: &Path) -> Option<Acquired> {
    match try_acquire(open(path), Some("test")).unwrap() {
        Try::Acquired(a) => Some(a),
        Try::Held => None,
        Try::SharedOnly => panic!("only a shared lock in the way"),
    }
}

fn errno(e: OpenError) -> i32 {
    match e {
        OpenError::Os { err, .. } => err.raw_os_error().unwrap(),
        other => panic!("not an OS error: {other:?}"),
    }
}

#[test]
fn iso_dates_match_to_iso_string() {
    assert_eq!(iso8601(0), "1970-01-01T00:00:00.000Z");
    assert_eq!(iso8601(951_782_400_000), "2000-02-29T00:00:00.000Z");
    assert_eq!(iso8601(1_700_000_000_123), "2023-11-14T22:13:20.123Z");
    assert_eq!(iso8601(4_102_444_799_999), "2099-12-31T23:59:59.999Z");
    assert_eq!(iso8601(1_709_251_200_000), "2024-03-01T00:00:00.000Z");
}

#[test]
fn records_escape_their_strings() {
    let r = record_json(&Record {
        pid: 42,
        identity: "p1:abc:7:9",
        hostname: "h",
        acquired_at_ms: 0,
        purpose: Some("say \"hi\"\\\n\u{1}\u{2028}é"),
    });
    assert_eq!(
        r,
        "{\"pid\":42,\"identity\":\"p1:abc:7:9\",\"hostname\":\"h\",\"acquiredAt\":\"1970-01-01T00:00:00.000Z\",\
         \"purpose\":\"say \\\"hi\\\"\\\\\\n\\u0001\\u2028é\"}\n"
    );
    let none = record_json(&Record {
        pid: 1,
        identity: "",
        hostname: "",
        acquired_at_ms: 0,
        purpose: None,
    });
    assert!(none.ends_with("\"purpose\":null}\n"));
}

#[test]
fn one_holder_at_a_time_even_within_a_process() {
    let (_dir, path) = lock_path("exclusive");
    let mut first = acquire(&path).expect("free lock");
    assert!(first.previous.is_empty());
    assert_eq!(std::fs::read_to_string(&path).unwrap(), first.record);
    // Another open file description of the same file, in the same process.
    assert!(acquire(&path).is_none());
    first.lock.release();
    assert!(first.lock.is_released());
    assert_eq!(std::fs::read(&path).unwrap().len(), 0, "release truncates");
    let second = acquire(&path).expect("released lock");
    assert!(
        second.previous.is_empty(),
        "a clean release leaves no record"
    );
}

#[test]
fn a_holder_that_dies_leaves_its_record() {
    let (_dir, path) = lock_path("abandon");
    let first = acquire(&path).unwrap();
    let record = first.record.clone();
    first.lock.abandon();
    let second = acquire(&path).unwrap();
    assert_eq!(String::from_utf8(second.previous.clone()).unwrap(), record);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), second.record);
}

#[test]
fn created_0600_and_checked() {
    let dir = scratch("checks");
    let path = dir.join("l");
    drop(open(&path));
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);

    let target = dir.join("target");
    let link = dir.join("link");
    symlink(&target, &link).unwrap();
    assert_eq!(
        errno(LockFile::open(&link, 0o600, false).err().unwrap()),
        libc::ELOOP
    );
    assert!(
        !target.exists(),
        "a dangling symlink's target is not created"
    );

    let sub = dir.join("sub");
    std::fs::create_dir(&sub).unwrap();
    assert!(matches!(
        LockFile::open(&sub, 0o600, false).err().unwrap(),
        OpenError::NotRegular { directory: true }
    ));

    let fifo = dir.join("fifo");
    let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    // Would block forever if the FIFO were opened for reading without a writer.
    assert!(matches!(
        LockFile::open(&fifo, 0o600, false).err().unwrap(),
        OpenError::NotRegular { directory: false }
    ));
    assert!(matches!(
        read(&fifo).err().unwrap(),
        OpenError::NotRegular { directory: false }
    ));

    let missing = dir.join("no/such/dir/l");
    assert_eq!(
        errno(LockFile::open(&missing, 0o600, false).err().unwrap()),
        libc::ENOENT
    );
    assert!(read(&missing).unwrap().is_none());
}

#[test]
fn read_does_not_take_or_create() {
    let (_dir, path) = lock_path("read");
    assert!(read(&path).unwrap().is_none());
    assert!(!path.exists());
    let mut held = acquire(&path).unwrap();
    let seen = read(&path).unwrap().unwrap();
    assert!(seen.held);
    assert_eq!(String::from_utf8(seen.record).unwrap(), held.record);
    held.lock.release();
    let seen = read(&path).unwrap().unwrap();
    assert!(!seen.held);
    assert!(seen.record.is_empty());
    // A reader never blocks an acquirer for good.
    assert!(acquire(&path).is_some());
}

#[test]
fn only_an_exclusive_lock_counts_as_held() {
    let (_dir, path) = lock_path("shared");
    drop(open(&path));
    let other = std::fs::File::open(&path).unwrap();
    // SAFETY: a valid fd.
    assert_eq!(
        unsafe { libc::flock(std::os::fd::AsRawFd::as_raw_fd(&other), libc::LOCK_SH) },
        0
    );
    assert!(!read(&path).unwrap().unwrap().held);
    // An acquirer cannot take it past a shared holder, and says why.
    assert!(matches!(
        try_acquire(open(&path), None).unwrap(),
        Try::SharedOnly
    ));
    drop(other);
    assert!(acquire(&path).is_some());
}

fn start_wait(path: &Path) -> (Waiter, mpsc::Receiver<WaitEnd>) {
    let (tx, rx) = mpsc::channel();
    let waiter = wait(
        open(path),
        Some("waiter".into()),
        Box::new(move |end| {
            let _ = tx.send(end);
        }),
    )
    .unwrap();
    (waiter, rx)
}

const LONG: Duration = Duration::from_secs(10);

#[test]
fn a_waiter_gets_the_lock_when_it_is_released() {
    let (_dir, path) = lock_path("wait");
    let mut holder = acquire(&path).unwrap();
    let (mut waiter, rx) = start_wait(&path);
    assert!(
        rx.recv_timeout(Duration::from_millis(50)).is_err(),
        "still held"
    );
    holder.lock.release();
    let WaitEnd::Acquired(got) = rx.recv_timeout(LONG).unwrap() else {
        panic!("expected the lock")
    };
    waiter.join();
    assert!(got.previous.is_empty());
    assert_eq!(waiter.cancel(), Cancel::TooLate);
    assert!(acquire(&path).is_none());
}

#[test]
fn a_cancelled_waiter_ends_and_never_takes_the_lock() {
    let (_dir, path) = lock_path("cancel");
    let mut holder = acquire(&path).unwrap();
    let (mut waiter, rx) = start_wait(&path);
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(waiter.cancel(), Cancel::Cancelled);
    assert!(matches!(rx.recv_timeout(LONG).unwrap(), WaitEnd::Cancelled));
    waiter.join();
    holder.lock.release();
    assert!(
        acquire(&path).is_some(),
        "the cancelled waiter holds nothing"
    );
}

#[test]
fn cancel_before_the_thread_runs() {
    let (_dir, path) = lock_path("early");
    let _holder = acquire(&path).unwrap();
    let (mut waiter, rx) = start_wait(&path);
    assert_eq!(waiter.cancel(), Cancel::Cancelled);
    assert!(matches!(rx.recv_timeout(LONG).unwrap(), WaitEnd::Cancelled));
    waiter.join();
}

/// The grant and the cancel race; whichever wins, the books balance: a
/// `Cancelled` answer means the lock ends up free, `TooLate` means the
/// waiter holds it.
#[test]
fn cancel_racing_the_grant() {
    let (_dir, path) = lock_path("race");
    let (mut cancelled, mut late) = (0, 0);
    for i in 0..300 {
        let mut holder = acquire(&path).unwrap();
        let (mut waiter, rx) = start_wait(&path);
        // Let the waiter block in flock most of the time.
        if i % 3 != 0 {
            std::thread::sleep(Duration::from_micros(200));
        }
        let go = Arc::new(Barrier::new(2));
        let go2 = go.clone();
        let releaser = std::thread::spawn(move || {
            go2.wait();
            holder.lock.release();
        });
        go.wait();
        if i % 2 == 0 {
            std::thread::yield_now();
        }
        let answer = waiter.cancel();
        releaser.join().unwrap();
        let end = rx.recv_timeout(LONG).unwrap();
        waiter.join();
        match (answer, end) {
            (Cancel::Cancelled, WaitEnd::Cancelled) => {
                cancelled += 1;
                let mut again = acquire(&path).expect("a cancelled waiter must not hold the lock");
                again.lock.release();
            }
            (Cancel::TooLate, WaitEnd::Acquired(mut got)) => {
                late += 1;
                assert!(acquire(&path).is_none());
                got.lock.release();
            }
            (a, _) => panic!("cancel said {a:?} but the wait ended otherwise"),
        }
    }
    assert!(cancelled > 0, "the race was never lost by the waiter");
    eprintln!("cancel race: {cancelled} cancelled, {late} too late");
}

#[test]
fn many_waiters_one_at_a_time() {
    let (_dir, path) = lock_path("many");
    let mut holder = acquire(&path).unwrap();
    let (tx, rx) = mpsc::channel();
    let mut waiters: Vec<Waiter> = (0..12)
        .map(|_| {
            let tx = tx.clone();
            wait(open(&path), None, Box::new(move |end| drop(tx.send(end)))).unwrap()
        })
        .collect();
    std::thread::sleep(Duration::from_millis(20));
    holder.lock.release();
    for _ in 0..12 {
        // Each holder releases as soon as we hear of it, so the next proceeds.
        match rx.recv_timeout(LONG).unwrap() {
            WaitEnd::Acquired(mut got) => {
                assert!(read(&path).unwrap().unwrap().held);
                got.lock.release();
            }
            _ => panic!("every waiter gets its turn"),
        }
    }
    for w in &mut waiters {
        w.join();
    }
}

/// Cancels land at every point of the waiter's way into `flock` (before it
/// registers, between its last check and the call, inside the call): each
/// wait must end, promptly, without the lock.
#[test]
fn cancel_at_any_moment_ends_the_wait() {
    let (_dir, path) = lock_path("anytime");
    let _holder = acquire(&path).unwrap();
    for i in 0..1000u32 {
        let (mut waiter, rx) = start_wait(&path);
        let spin = Instant::now() + Duration::from_nanos(u64::from(i % 50) * 1000);
        while Instant::now() < spin {
            std::hint::spin_loop();
        }
        assert_eq!(waiter.cancel(), Cancel::Cancelled);
        match rx.recv_timeout(LONG) {
            Ok(WaitEnd::Cancelled) => {}
            Ok(_) => panic!("iteration {i}: not cancelled"),
            Err(_) => panic!("iteration {i}: the cancelled wait never ended"),
        }
        waiter.join();
    }
}

#[test]
fn records_of_any_size_are_read_up_to_the_cap() {
    let (_dir, path) = lock_path("sizes");
    for len in [0, 1, 4095, 4096, 4097, RECORD_MAX, RECORD_MAX + 10] {
        std::fs::write(&path, vec![b'x'; len]).unwrap();
        let seen = read(&path).unwrap().unwrap();
        assert_eq!(seen.record.len(), len.min(RECORD_MAX), "{len}");
    }
}

#[test]
fn a_longer_old_record_is_cut_to_ours() {
    let (_dir, path) = lock_path("longer");
    let mut old = b"{\"pid\":1,\"purpose\":\"".to_vec();
    old.resize(700, b'y');
    std::fs::write(&path, &old).unwrap();
    let got = acquire(&path).unwrap();
    assert_eq!(got.previous.len(), 700);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), got.record);
}

fn open_err(r: Result<LockFile, OpenError>) -> OpenError {
    match r {
        Ok(_) => panic!("opened"),
        Err(e) => e,
    }
}

/// Replaces the file `path` names with a new empty one (an editor's atomic
/// save), or removes it.
fn replace_or_remove(path: &Path, how: &str) {
    if how == "rename" {
        let new = path.with_extension("new");
        std::fs::write(&new, b"").unwrap();
        std::fs::rename(&new, path).unwrap();
    } else {
        std::fs::remove_file(path).unwrap();
    }
}

/// `got` was taken on the file `path` names now, and holds it.
fn holds_what_the_path_names(path: &Path, got: &Acquired, how: &str) {
    assert!(
        acquire(path).is_none(),
        "{how}: the lock is not on the file the path names"
    );
    assert_eq!(std::fs::read_to_string(path).unwrap(), got.record);
}

/// A waiter blocked on a file that is then replaced or removed must not
/// take the lock on the orphan when its holder lets go: it would hold a
/// lock nobody else can see.
#[test]
fn a_waiter_never_ends_on_a_replaced_or_removed_file() {
    for how in ["rename", "unlink"] {
        let dir = scratch(&format!("replaced-{how}"));
        let path = dir.join("l");
        let mut holder = acquire(&path).unwrap();
        let (mut waiter, rx) = start_wait(&path);
        std::thread::sleep(Duration::from_millis(20));
        replace_or_remove(&path, how);
        holder.lock.release();
        let WaitEnd::Acquired(got) = rx.recv_timeout(LONG).unwrap() else {
            panic!("{how}: expected the lock")
        };
        waiter.join();
        holds_what_the_path_names(&path, &got, how);
    }
}

/// The same for an acquire that opened the file just before it was
/// replaced or removed.
#[test]
fn an_acquire_never_ends_on_a_replaced_or_removed_file() {
    for how in ["rename", "unlink"] {
        let dir = scratch(&format!("replaced-try-{how}"));
        let path = dir.join("l");
        let file = open(&path);
        replace_or_remove(&path, how);
        let Try::Acquired(got) = try_acquire(file, None).unwrap() else {
            panic!("{how}: expected the lock")
        };
        holds_what_the_path_names(&path, &got, how);
    }
}

#[test]
fn a_hard_linked_file_is_refused_and_untouched() {
    let dir = scratch("hardlink");
    let data = dir.join("data");
    std::fs::write(&data, b"precious").unwrap();
    let path = dir.join("l");
    std::fs::hard_link(&data, &path).unwrap();
    assert!(matches!(
        open_err(LockFile::open(&path, 0o600, false)),
        OpenError::HardLinked { links: 2 }
    ));
    // An empty file with a second name too: the other name may be written later.
    let empty = dir.join("empty");
    std::fs::write(&empty, b"").unwrap();
    std::fs::hard_link(&empty, dir.join("empty2")).unwrap();
    assert!(matches!(
        open_err(LockFile::open(&empty, 0o600, false)),
        OpenError::HardLinked { .. }
    ));
    assert_eq!(std::fs::read(&data).unwrap(), b"precious");
}

#[test]
fn foreign_content_is_refused_and_untouched() {
    let (_dir, path) = lock_path("foreign");
    std::fs::write(&path, b"SQLite format 3\0...").unwrap();
    assert!(matches!(
        try_acquire(open(&path), None),
        Err(OpenError::Foreign)
    ));
    assert_eq!(std::fs::read(&path).unwrap(), b"SQLite format 3\0...");
    // ...and the flock taken to look was let go.
    assert!(!read(&path).unwrap().unwrap().held);
    let (mut waiter, rx) = start_wait(&path);
    assert!(matches!(
        rx.recv_timeout(LONG).unwrap(),
        WaitEnd::Failed(OpenError::Foreign)
    ));
    waiter.join();
    assert_eq!(std::fs::read(&path).unwrap(), b"SQLite format 3\0...");
}

#[test]
fn torn_records_are_ours() {
    let dir = scratch("torn");
    for torn in [
        &b"{"[..],
        b"{\"pi",
        b"{\"pid\":",
        b"{\"pid\":12",
        b"{\"pid\":1,\"ident",
    ] {
        let path = dir.join("l");
        std::fs::write(&path, torn).unwrap();
        let got = acquire(&path).expect("a torn record is reclaimed");
        assert_eq!(got.previous, torn);
    }
}
