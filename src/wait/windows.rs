//! Windows: a registered wait on the process handle. The handle pins the
//! process (its pid is not reused while we hold it), and Windows gives any
//! handle holder the exit code, so the status is known here.

use std::io;

use tokio::sync::watch;

use super::{same_process, Exited};
use crate::exit_watch::{ExitStatus, HandleWait};
use crate::pid::Pid;
use crate::proc_info;
use crate::sys;

/// The call whose failure a wait error names.
pub const OPEN_CALL: &str = "OpenProcess";

pub async fn wait_for_exit(
    pid: Pid,
    identity: Option<&str>,
    mut cancel: watch::Receiver<bool>,
) -> io::Result<Option<Exited>> {
    let access = sys::PROCESS_SYNCHRONIZE | sys::PROCESS_QUERY_LIMITED_INFORMATION;
    let Some(handle) = sys::open_process(pid.as_raw() as u32, access)? else {
        return Ok(Some(Exited::GONE));
    };
    if sys::has_exited(&handle)? {
        return Ok(Some(Exited::GONE));
    }
    if let Some(wanted) = identity {
        // After opening: the handle pins the process, so the answer holds.
        if !same_process(&proc_info::identity_of_handle(&handle)?, wanted) {
            return Ok(Some(Exited::REUSED));
        }
    }
    let mut wait = HandleWait::new(handle)?;
    tokio::select! {
        _ = wait.exited() => {}
        _ = cancel.wait_for(|c| *c) => return Ok(None),
    }
    Ok(Some(Exited {
        pid_reused: false,
        exit: sys::exit_code(wait.handle())
            .ok()
            .map(|c| ExitStatus::Code(c as i32)),
    }))
}
