//! Windows: a registered wait on the process handle. The handle pins the
//! process (its pid is not reused while we hold it), and Windows gives any
//! handle holder the exit code, so the status is known here.

use std::io;

use super::{Exited, Opened};
use crate::exit_watch::{ExitStatus, HandleWait};
use crate::pid::Pid;
use crate::proc_info::{self, Identity, InfoError};
use crate::sys;

/// The call whose failure a wait error names.
pub const OPEN_CALL: &str = "OpenProcess";

/// The process's handle, with a wait registered on it.
pub struct Held(HandleWait);

impl Held {
    pub fn open(pid: Pid) -> io::Result<Opened<Held>> {
        let access = sys::PROCESS_SYNCHRONIZE | sys::PROCESS_QUERY_LIMITED_INFORMATION;
        let Some(handle) = sys::open_process(pid.as_raw() as u32, access)? else {
            return Ok(Opened::Ended(Exited::GONE));
        };
        if sys::has_exited(&handle)? {
            return Ok(Opened::Ended(Exited::GONE));
        }
        Ok(Opened::Held(Held(HandleWait::new(handle)?)))
    }

    /// The handle pins the process, so the answer holds.
    pub fn holder(&self, _pid: Pid) -> Result<Option<Identity>, InfoError> {
        proc_info::identity_of_handle(self.0.handle())
            .map(Some)
            .map_err(InfoError::Io)
    }

    pub async fn exited(&mut self) -> io::Result<()> {
        self.0.exited().await;
        Ok(())
    }

    pub fn status(self, _pid: Pid) -> Option<ExitStatus> {
        let code = sys::exit_code(self.0.handle()).ok()?;
        Some(ExitStatus::Code(code as i32))
    }
}
