//! Values between JS and the cores: numbers checked before they become a
//! pid, a signal, an id or a duration (napi's own `u32` conversion would
//! wrap), identities checked before they are compared, and exit statuses
//! as JS sees them.

use napi::bindgen_prelude::FnArgs;
use napi_derive::napi;

use super::errors::{JsErr, Res};
use crate::duration::Millis;
use crate::exit_watch::ExitStatus;
use crate::pid::{self, Pid, Signal};
use crate::proc_info::{self, InfoError};

pub fn to_pid(value: f64) -> Res<Pid> {
    // The JS face already threw TypeError/RangeError; this is the last line
    // before a number could become a pid.
    Pid::from_f64(value).map_err(|e| JsErr::coded("ERR_OUT_OF_RANGE", e))
}

pub fn to_signal(num: i32) -> Res<Signal> {
    Signal::from_raw(num)
        .ok_or_else(|| JsErr::coded("ERR_OUT_OF_RANGE", format!("bad signal number {num}")))
}

/// A uid or gid from JS: an integer in 0..=2^32-2 (2^32-1 is the "no
/// change" id of setresuid, never a real one).
pub fn to_id(value: Option<f64>, what: &str) -> Res<Option<u32>> {
    match value {
        None => Ok(None),
        Some(v) if v.fract() == 0.0 && (0.0..=f64::from(u32::MAX - 1)).contains(&v) => {
            Ok(Some(v as u32))
        }
        Some(v) => Err(JsErr::coded(
            "ERR_OUT_OF_RANGE",
            format!("{what} must be an integer in 0..=4294967294, got {v}"),
        )),
    }
}

pub fn duration_ms(ms: f64, what: &str) -> Res<Millis> {
    Millis::from_f64(ms)
        .map_err(|e| JsErr::coded("ERR_OUT_OF_RANGE", format!("{what} {e}, got {ms}")))
}

/// An identity must be one `getProcessInfo` could have produced. A stored
/// one that is empty or garbled (a truncated pidfile, a field mix-up) is the
/// caller's bug: answering "not running" or "already exited" would hide it
/// and leave the process it meant running, so it is refused instead.
pub fn check_identity(identity: Option<&str>) -> Res<()> {
    match identity {
        Some(id) if proc_info::Identity::decode(id).is_none() => Err(JsErr::coded(
            "ERR_INVALID_ARG_VALUE",
            format!(
                "identity {:?} is not a process identity (take it from getProcessInfo(pid).identity)",
                id.chars().take(60).collect::<String>()
            ),
        )),
        _ => Ok(()),
    }
}

/// A liveness or info read that failed.
pub fn info_err(err: InfoError) -> JsErr {
    match err {
        InfoError::Hidden => JsErr::coded("EACCES", proc_info::HIDDEN_REASON),
        InfoError::Io(e) => JsErr::os(&e, proc_info::INFO_CALL),
    }
}

#[napi(object)]
#[derive(Clone)]
pub struct NativeExitInfo {
    pub code: Option<i32>,
    pub signal: Option<String>,
}

/// The `'exit'` callback's arguments: (code, signal name), the other one
/// null. Two primitives, not a [`NativeExitInfo`]: napi-rs took about 7 µs
/// to build that object, a sixth of an exit's time on the JS thread, and
/// the JS side makes its own anyway.
pub type ExitArgs = FnArgs<(Option<i32>, Option<String>)>;

pub fn exit_args(status: ExitStatus) -> ExitArgs {
    let info = exit_info(status);
    FnArgs::from((info.code, info.signal))
}

pub fn exit_info(status: ExitStatus) -> NativeExitInfo {
    match status {
        ExitStatus::Code(c) => NativeExitInfo {
            code: Some(c),
            signal: None,
        },
        ExitStatus::Signal(s) => NativeExitInfo {
            code: None,
            signal: Some(signal_label(s)),
        },
        ExitStatus::Unknown => NativeExitInfo {
            code: None,
            signal: None,
        },
    }
}

pub fn signal_label(num: i32) -> String {
    pid::signal_name(num).map_or_else(|| format!("SIG{num}"), str::to_owned)
}
