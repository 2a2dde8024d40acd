//! pidfd back-end: the child's pidfd turns readable when it exits; the
//! reaper (`reaper`: one thread, one epoll, for every child) is told, then
//! peeks the status through the same pidfd with `waitid(P_PIDFD, WNOWAIT |
//! WNOHANG)`, sweeps and reaps (`Watched::look`, the one settle path).
//!
//! The same reaper serves a child whose exit the JS loop delivers (started
//! with [`watch_beside_loop`]: it only steps in once the loop's grace is
//! over) and one whose exit it delivers itself ([`watch`]: the `pidfd-tokio`
//! back-end, named for the runtime task it once was). Where the reaper
//! cannot take the child (no pidfd: ENOSYS, EMFILE; no epoll or thread for
//! the reaper; the epoll refused the fd), a waiter thread does (`fallback`).

use std::sync::Arc;

use super::{fallback, reaper, Watched};
use crate::exit_watch::{forced_fallback, Backend, OnExit};

/// The native reaper beside the JS loop (`js_loop`): settles
/// the child itself only if the loop has not within `reaper::LOOP_GRACE` of
/// the exit — a blocked loop never leaves a zombie.
pub fn watch_beside_loop(watched: &Arc<Watched>) -> std::io::Result<()> {
    if reaper::add(watched, None).is_err() {
        fallback::start(watched.clone(), Box::new(|_| {}))?;
    }
    watched.set_native();
    Ok(())
}

/// Starts watching a freshly spawned child on a back-end of this module.
/// `on_exit` runs (on the reaper, the runtime or a waiter thread) after the
/// reap.
pub fn watch(watched: &Arc<Watched>, on_exit: OnExit) -> std::io::Result<Backend> {
    let on_exit = if forced_fallback() {
        on_exit
    } else {
        match reaper::add(watched, Some(on_exit)) {
            Ok(()) => {
                watched.set_native();
                return Ok(Backend::PidfdTokio);
            }
            Err(back) => back.unwrap_or_else(|| Box::new(|_| {})),
        }
    };
    fallback::start(watched.clone(), on_exit)?;
    watched.set_native();
    Ok(Backend::Fallback)
}
