use std::sync::mpsc::{channel, Receiver};
use std::sync::Mutex;
use std::time::Duration;

use super::*;
use crate::lock::unix::tests::scratch;
use crate::lock::unix::{try_acquire, HeldLock, LockFile};
use crate::lock::Try;

/// A hang guard, not a deadline: a watch fires within microseconds.
const HANG: Duration = Duration::from_secs(20);

/// These tests look at the process-wide registry: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn held(path: &Path) -> HeldLock {
    let file = LockFile::open(path, 0o600, false).unwrap();
    match try_acquire(file, None) {
        Ok(Try::Acquired(a)) => a.lock,
        _ => panic!("not acquired: {path:?}"),
    }
}

/// A lock on `path`, watched; its `on_gone` reports on the channel.
fn watched(path: &Path) -> (HeldLock, Receiver<Gone>) {
    let mut lock = held(path);
    let (tx, rx) = channel();
    let on_gone: OnGone = Box::new(move |how| {
        let _ = tx.send(how);
    });
    assert!(matches!(lock.watch(on_gone), Watching::Started));
    (lock, rx)
}

fn watches() -> usize {
    registry().entries.len()
}

fn open_instance() -> bool {
    registry().instance.is_some()
}

#[test]
fn a_removed_file_is_reported_removed() {
    let _one = serial();
    let dir = scratch("removed");
    let path = dir.join("l");
    let (_lock, gone) = watched(&path);
    std::fs::remove_file(&path).unwrap();
    assert_eq!(gone.recv_timeout(HANG), Ok(Gone::Removed));
}

#[test]
fn a_file_renamed_over_it_is_reported_replaced() {
    let _one = serial();
    let dir = scratch("over");
    let path = dir.join("l");
    let (_lock, gone) = watched(&path);
    std::fs::write(dir.join("new"), b"").unwrap();
    std::fs::rename(dir.join("new"), &path).unwrap();
    assert_eq!(gone.recv_timeout(HANG), Ok(Gone::Replaced));
}

#[test]
fn a_file_renamed_away_or_its_directory_removed_is_reported_removed() {
    let _one = serial();
    let dir = scratch("away");
    let path = dir.join("l");
    let (_lock, gone) = watched(&path);
    std::fs::rename(&path, dir.join("elsewhere")).unwrap();
    assert_eq!(gone.recv_timeout(HANG), Ok(Gone::Removed));

    let dir = scratch("rundir");
    let path = dir.join("l");
    let (_lock, gone) = watched(&path);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(gone.recv_timeout(HANG), Ok(Gone::Removed));
}

/// Linux only: the directory's own watch (macOS does not watch it).
#[cfg(target_os = "linux")]
#[test]
fn its_directory_renamed_is_reported_removed() {
    let _one = serial();
    let dir = scratch("dir-moved");
    let path = dir.join("l");
    let (_lock, gone) = watched(&path);
    let moved = dir.with_extension("moved");
    let _ = std::fs::remove_dir_all(&moved);
    std::fs::rename(&dir, &moved).unwrap();
    assert_eq!(gone.recv_timeout(HANG), Ok(Gone::Removed));
    std::fs::remove_dir_all(&moved).unwrap();
}

#[test]
fn the_same_file_changed_is_not_gone() {
    let _one = serial();
    let dir = scratch("same");
    let (a, a_gone) = watched(&dir.join("a"));
    let (_b, b_gone) = watched(&dir.join("b"));
    // Hints for `a` (its mode changed, another name of its directory came
    // and went), none of which makes it gone...
    std::fs::set_permissions(
        dir.join("a"),
        std::os::unix::fs::PermissionsExt::from_mode(0o640),
    )
    .unwrap();
    std::fs::write(dir.join("c"), b"").unwrap();
    std::fs::remove_file(dir.join("c")).unwrap();
    // ...then `b` removed: one reader, in order, so `a`'s hints were
    // judged before `b` is reported.
    std::fs::remove_file(dir.join("b")).unwrap();
    assert_eq!(b_gone.recv_timeout(HANG), Ok(Gone::Removed));
    assert!(a_gone.try_recv().is_err());
    drop(a);
}

#[test]
fn a_released_lock_is_never_reported_and_the_last_closes_the_instance() {
    let _one = serial();
    let dir = scratch("released");
    let before = watches();
    let (mut a, a_gone) = watched(&dir.join("a"));
    let (b, b_gone) = watched(&dir.join("b"));
    assert_eq!(watches(), before + 2);
    a.release();
    assert_eq!(watches(), before + 1);
    // The directory's watch is shared: `b` is still watched through it.
    std::fs::remove_file(dir.join("a")).unwrap();
    std::fs::rename(dir.join("b"), dir.join("b2")).unwrap();
    assert_eq!(b_gone.recv_timeout(HANG), Ok(Gone::Removed));
    assert!(a_gone.try_recv().is_err());
    drop(b);
    assert_eq!(watches(), before);
    if before == 0 {
        assert!(!open_instance());
    }
}

#[test]
fn a_file_gone_before_the_watch_is_told_at_once() {
    let _one = serial();
    let dir = scratch("before");
    let path = dir.join("l");
    let mut lock = held(&path);
    std::fs::remove_file(&path).unwrap();
    let before = watches();
    let (tx, rx) = channel::<Gone>();
    let on_gone: OnGone = Box::new(move |how| {
        let _ = tx.send(how);
    });
    assert!(matches!(lock.watch(on_gone), Watching::Gone(Gone::Removed)));
    assert_eq!(watches(), before);
    // Not called: its sender is dropped.
    assert_eq!(
        rx.recv_timeout(HANG),
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected)
    );
}

#[cfg(target_os = "linux")]
#[test]
fn locks_in_one_directory_share_its_watch() {
    let _one = serial();
    let dir = scratch("shared");
    let locks: Vec<_> = (0..20)
        .map(|i| watched(&dir.join(format!("l{i}"))))
        .collect();
    let in_use = registry().instance.as_ref().map(|i| i.marks.in_use());
    // 20 files and, once, their directory (more if other tests' watches
    // are in place, which `serial` rules out).
    assert_eq!(in_use, Some(21));
    drop(locks);
    assert_eq!(registry().instance.as_ref().map(|i| i.marks.in_use()), None);
}
