//! The napi surface of procward: validate, call into the core modules, map
//! results to plain JS values. Nothing below this file sees a napi type.
#![deny(clippy::all)]
#![deny(unsafe_op_in_unsafe_fn)]

pub mod errors;
pub mod pid;
pub mod proc_info;
#[cfg(target_os = "linux")]
pub mod sys;

use napi::Result;
use napi_derive::napi;

use errors::{coded, io_err};
use pid::Pid;
use proc_info::InfoError;

fn to_pid(value: f64) -> Result<Pid> {
    // The JS face already threw TypeError/RangeError; this is the last line
    // before a number could become a pid.
    Pid::from_f64(value).map_err(|e| coded("ERR_OUT_OF_RANGE", e))
}

fn info_err(err: InfoError) -> napi::Error {
    match err {
        InfoError::Hidden => coded(
            "EACCES",
            "the process exists but /proc (hidepid) does not show it to this user",
        ),
        InfoError::Io(e) => io_err(&e, "read /proc"),
    }
}

/// Exists and has not exited; a zombie is not running.
#[napi]
pub fn is_process_running(pid: f64, identity: Option<String>) -> Result<bool> {
    let pid = to_pid(pid)?;
    match identity {
        None => proc_info::is_running(pid).map_err(|e| io_err(&e, "read /proc")),
        Some(id) => proc_info::is_running_as(pid, &id).map_err(info_err),
    }
}

#[napi(object)]
pub struct ProcessInfo {
    pub pid: i32,
    pub ppid: i32,
    pub pgid: i32,
    pub state: String,
    pub identity: String,
    pub name: String,
}

#[napi]
pub fn get_process_info(pid: f64) -> Result<Option<ProcessInfo>> {
    let pid = to_pid(pid)?;
    let info = proc_info::process_info(pid).map_err(info_err)?;
    Ok(info.map(|i| ProcessInfo {
        pid: i.pid,
        ppid: i.ppid,
        pgid: i.pgid,
        state: i.state.as_str().to_owned(),
        identity: i.identity.encode(),
        name: i.name,
    }))
}
