//! The settle path against real children (Linux): once per child, the
//! identity kept across the reap, the pidfd closed only when no one polls it.

use std::os::fd::{AsFd, OwnedFd};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::{register, watch, watch_beside_loop, Watched};
use crate::exit_watch::{Backend, ExitStatus, OnExit, Wake};
use crate::pid::{Pid, Signal};
use crate::proc_info::{self, IdentitySeed, InfoError};
use crate::sys;

/// Reaped through `Watched` (the point of these tests), not std's Child.
#[allow(clippy::zombie_processes)]
fn spawn(program: &str, args: &[&str]) -> Pid {
    let child = Command::new(program).args(args).spawn().expect("spawn");
    Pid::from_raw(child.id() as i32).expect("pid")
}

fn wait_exited(pidfd: &OwnedFd) {
    while !sys::is_readable_now(pidfd.as_fd()).expect("poll") {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

#[test]
fn settles_once_keeps_the_identity_and_wakes_each_waiter_once() {
    let pid = spawn("sleep", &["30"]);
    let pidfd = sys::pidfd_open(pid).expect("pidfd");
    let own = Some(sys::pidfd_open(pid).expect("its own pidfd"));
    let w = register(pid, None, false, IdentitySeed::default(), own);
    let identity = w.identity().expect("identity");
    let woken = Arc::new(AtomicUsize::new(0));
    let count = woken.clone();
    let wake: Wake = Box::new(move || {
        count.fetch_add(1, Ordering::SeqCst);
    });
    assert!(w.on_settle(wake).is_ok());
    assert_eq!(w.try_settle(), None);
    sys::kill(pid, Signal::KILL).expect("kill");
    wait_exited(&pidfd);
    let killed = Some(ExitStatus::Signal(libc::SIGKILL));
    assert_eq!(w.try_settle(), killed);
    // Reaped: the pid is no child of ours any more.
    let gone = sys::waitid_pid(pid, libc::WEXITED | libc::WNOHANG);
    assert_eq!(gone.map_err(|e| e.raw_os_error()), Err(Some(libc::ECHILD)));
    assert_eq!(woken.load(Ordering::SeqCst), 1);
    // Another driver finds it settled, and a late waiter is refused.
    assert_eq!(w.try_settle(), killed);
    assert_eq!(w.try_settle(), killed);
    assert!(w.on_settle(Box::new(|| {})).is_err());
    assert_eq!(woken.load(Ordering::SeqCst), 1);
    assert_eq!(w.identity().expect("identity after the reap"), identity);
}

#[test]
fn an_unread_identity_is_read_from_the_zombie_before_the_reap() {
    let before = sys::boottime_ns();
    let pid = spawn("true", &[]);
    let tick = proc_info::start_tick_between(before, sys::boottime_ns());
    let pidfd = sys::pidfd_open(pid).expect("pidfd");
    let own = Some(sys::pidfd_open(pid).expect("its own pidfd"));
    let w = register(pid, None, false, IdentitySeed::default(), own);
    wait_exited(&pidfd);
    assert_eq!(w.try_settle(), Some(ExitStatus::Code(0)));
    let id = w.identity().expect("identity after the reap");
    if let Some(tick) = tick {
        assert_eq!(id.start_time, tick);
    }
    assert_eq!(id.inode, proc_info::pidfd_inode(pidfd.as_fd()));
}

#[test]
fn a_child_reaped_behind_its_back_settles_as_unknown() {
    let pid = spawn("true", &[]);
    let pidfd = sys::pidfd_open(pid).expect("pidfd");
    let own = Some(sys::pidfd_open(pid).expect("its own pidfd"));
    let w = register(pid, None, false, IdentitySeed::default(), own);
    wait_exited(&pidfd);
    sys::waitid_pid(pid, libc::WEXITED).expect("reap");
    // The pidfd wait names the reaped process: ECHILD, whoever has the
    // pid now.
    assert_eq!(w.try_settle(), Some(ExitStatus::Unknown));
    let lost = w.identity().map_err(|e| match e {
        InfoError::Io(e) => e.raw_os_error(),
        InfoError::Hidden => None,
    });
    assert_eq!(lost, Err(Some(libc::ECHILD)));
}

fn pidfd_closed(w: &Watched) -> bool {
    w.lock().pidfd.is_none()
}

#[test]
fn the_reaper_settles_each_child_once_and_closes_its_pidfd() {
    let n = 50;
    let (tx, rx) = std::sync::mpsc::channel();
    let mut kids = Vec::new();
    for _ in 0..n {
        let pid = spawn("sleep", &["30"]);
        let own = Some(sys::pidfd_open(pid).expect("its own pidfd"));
        let w = register(pid, None, false, IdentitySeed::default(), own);
        let tx = tx.clone();
        let on_exit: OnExit = Box::new(move |s| tx.send((pid, s)).expect("send"));
        assert_eq!(watch(&w, on_exit).expect("watch"), Backend::PidfdTokio);
        kids.push(w);
    }
    for w in &kids {
        sys::kill(w.pid(), Signal::KILL).expect("kill");
    }
    let mut seen = std::collections::HashSet::new();
    for _ in 0..n {
        let (pid, status) = rx.recv_timeout(Duration::from_secs(20)).expect("an exit");
        assert_eq!(status, ExitStatus::Signal(libc::SIGKILL));
        assert!(seen.insert(pid), "{pid} delivered twice");
    }
    assert!(rx.recv_timeout(Duration::from_millis(100)).is_err());
    for w in &kids {
        assert!(pidfd_closed(w));
        let gone = sys::waitid_pid(w.pid(), libc::WEXITED | libc::WNOHANG);
        assert_eq!(gone.map_err(|e| e.raw_os_error()), Err(Some(libc::ECHILD)));
    }
}

#[test]
fn a_polled_pidfd_outlives_the_settle_until_the_loop_lets_go() {
    let pid = spawn("sleep", &["30"]);
    let own = Some(sys::pidfd_open(pid).expect("its own pidfd"));
    let w = register(pid, None, false, IdentitySeed::default(), own);
    let fd = w.attach_loop().expect("a pidfd to poll");
    // The loop never runs: the reaper settles the child after its grace.
    watch_beside_loop(&w).expect("reaper");
    let mut rx = w.subscribe();
    sys::kill(pid, Signal::KILL).expect("kill");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("runtime");
    let settled = rt.block_on(async {
        tokio::time::timeout(Duration::from_secs(20), rx.wait_for(|s| s.is_some()))
            .await
            .map(|r| r.map(|s| *s))
    });
    assert_eq!(
        settled.ok().and_then(|r| r.ok()).flatten(),
        Some(ExitStatus::Signal(libc::SIGKILL))
    );
    // Still polled: the fd stays open (libuv would hold a stale entry).
    assert!(!pidfd_closed(&w));
    assert_eq!(w.attach_loop(), Some(fd));
    w.detach_loop();
    assert!(pidfd_closed(&w));
    assert_eq!(w.try_settle(), Some(ExitStatus::Signal(libc::SIGKILL)));
}

#[test]
fn a_released_pidfd_kept_open_elsewhere_leaves_a_later_child_on_its_number_its_own_exit() {
    use std::os::fd::AsRawFd;
    let (tx, rx) = std::sync::mpsc::channel();
    let watched = |pid: Pid, own: OwnedFd| {
        let w = register(pid, None, false, IdentitySeed::default(), Some(own));
        let tx = tx.clone();
        let on_exit: OnExit = Box::new(move |s| tx.send((pid, s)).expect("send"));
        assert_eq!(watch(&w, on_exit).expect("watch"), Backend::PidfdTokio);
        w
    };
    let a = spawn("sleep", &["30"]);
    let wa = watched(a, sys::pidfd_open(a).expect("a's pidfd"));
    let number = wa.lock().pidfd.as_ref().expect("open").as_raw_fd();
    // As a child forked meanwhile would: the open file outlives our fd, and
    // with it the reaper's registration of it (not taken out before the close).
    let copy = wa
        .lock()
        .pidfd
        .as_ref()
        .expect("open")
        .try_clone()
        .expect("dup");
    sys::kill(a, Signal::KILL).expect("kill a");
    let (pid, status) = rx.recv_timeout(Duration::from_secs(20)).expect("a's exit");
    assert_eq!((pid, status), (a, ExitStatus::Signal(libc::SIGKILL)));
    assert!(pidfd_closed(&wa));
    // The next child's pidfd on that number: fds are handed out lowest
    // first, so hold the lower free ones (another test's thread may take it).
    let b = spawn("sleep", &["30"]);
    let mut lower = Vec::new();
    let mut own = sys::pidfd_open(b).expect("b's pidfd");
    while own.as_raw_fd() < number && lower.len() < 256 {
        lower.push(own);
        own = sys::pidfd_open(b).expect("b's pidfd");
    }
    let same_number = own.as_raw_fd() == number;
    let wb = watched(b, own);
    sys::kill(b, Signal::KILL).expect("kill b");
    let (pid, status) = rx.recv_timeout(Duration::from_secs(20)).expect("b's exit");
    assert_eq!((pid, status), (b, ExitStatus::Signal(libc::SIGKILL)));
    assert!(pidfd_closed(&wb));
    // Once each: the stale registration (a's, keyed apart) gave nothing more.
    assert!(rx.recv_timeout(Duration::from_millis(100)).is_err());
    drop((copy, lower));
    eprintln!("b's pidfd on a's number {number}: {same_number}");
}
