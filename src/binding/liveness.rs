//! `isProcessRunning` and `getProcessInfo`: any process, not only ours.

use napi::{Env, Result};
use napi_derive::napi;

use super::convert::{check_identity, info_err, to_pid};
use super::errors::{throw, JsErr};
use crate::proc_info;

/// Exists and has not exited; a zombie is not running.
#[napi]
pub fn is_process_running(env: Env, pid: f64, identity: Option<String>) -> Result<bool> {
    throw(
        &env,
        (|| {
            let pid = to_pid(pid)?;
            check_identity(identity.as_deref())?;
            match identity {
                None => proc_info::is_running(pid).map_err(|e| JsErr::os(&e, proc_info::INFO_CALL)),
                Some(id) => proc_info::is_running_as(pid, &id).map_err(info_err),
            }
        })(),
    )
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
pub fn get_process_info(env: Env, pid: f64) -> Result<Option<ProcessInfo>> {
    let pid = throw(&env, to_pid(pid))?;
    let info = throw(&env, proc_info::process_info(pid).map_err(info_err))?;
    Ok(info.map(|i| ProcessInfo {
        pid: i.pid,
        ppid: i.ppid,
        pgid: i.pgid,
        state: i.state.as_str().to_owned(),
        identity: i.identity.encode(),
        name: i.name,
    }))
}
