//! An init's duty: reaping the orphans that the kernel hands us.
//!
//! As PID 1 of a pid namespace (a container's entrypoint), or as a child
//! subreaper (`PR_SET_CHILD_SUBREAPER`, `procward run --init`), every process
//! of the tree whose parent dies is re-parented to this process. Nobody else
//! will ever wait for them: unreaped, each exits into a zombie that holds its
//! pid for as long as we run. tini and dumb-init reap with `waitpid(-1)`;
//! that would take the statuses of our own supervised children, whose
//! reaping is the exit event itself. So the orphans are found one by one
//! (this process's children, less the pids the caller owns) and each is
//! reaped by its own pid, never with a wait for "any child".
//!
//! The caller's list must be complete at the time of the call: every live
//! child it spawned and has not seen exit. Both the spawn and this call run
//! on the JS thread, so no spawn can fall between the list and the reap.

#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
pub use linux::{become_subreaper, reap};
