//! `waitForExit`: validate, wait in the core (`crate::wait`), plain JS values.

use napi::bindgen_prelude::PromiseRaw;
use napi::{Env, Result};
use napi_derive::napi;
use tokio::sync::watch;

use super::convert::{check_identity, exit_info, to_pid, NativeExitInfo};
use super::errors::{promise, JsErr};
use crate::pid::Pid;

#[napi(object)]
pub struct NativeWaitResult {
    pub pid_reused: bool,
    pub exit: Option<NativeExitInfo>,
}

/// One wait for a process that need not be our child. `cancel()` ends it:
/// `wait` then resolves null, and its pidfd (kqueue, process handle) is
/// closed.
#[napi]
pub struct NativeExitWait {
    cancel: watch::Sender<bool>,
}

impl Default for NativeExitWait {
    fn default() -> Self {
        NativeExitWait {
            cancel: watch::channel(false).0,
        }
    }
}

#[napi]
impl NativeExitWait {
    #[napi(constructor)]
    pub fn new() -> Self {
        Self::default()
    }

    /// Ends the wait (before or after it began); idempotent.
    #[napi]
    pub fn cancel(&self) {
        self.cancel.send_replace(true);
    }

    /// Resolves once `pid` has exited (a zombie counts), or at once when it
    /// is not running or is not `identity`; null when cancelled. Bad
    /// arguments reject.
    #[napi(ts_return_type = "Promise<NativeWaitResult | null>")]
    pub fn wait<'env>(
        &self,
        env: &'env Env,
        pid: f64,
        identity: Option<String>,
    ) -> Result<PromiseRaw<'env, Option<NativeWaitResult>>> {
        let cancel = self.cancel.subscribe();
        promise(env, async move {
            let pid = to_pid(pid)?;
            check_identity(identity.as_deref())?;
            if pid == Pid::current() {
                return Err(JsErr::coded(
                    "ERR_OUT_OF_RANGE",
                    "waiting for this process's own exit would never end",
                ));
            }
            let done = crate::wait::wait_for_exit(pid, identity.as_deref(), cancel)
                .await
                .map_err(|e| JsErr::os(&e, crate::wait::OPEN_CALL))?;
            Ok(done.map(|d| NativeWaitResult {
                pid_reused: d.pid_reused,
                exit: d.exit.map(exit_info),
            }))
        })
    }
}
