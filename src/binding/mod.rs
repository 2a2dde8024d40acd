//! The binding layer, one file per public concept: like `lib.rs`, the only
//! place a napi type appears; each file validates, calls into its core
//! module and returns plain JS values.

pub mod cgroup;
#[cfg(any(target_os = "linux", target_os = "macos"))]
pub mod lock;
#[cfg(windows)]
pub mod lock_windows;
#[cfg(target_os = "linux")]
pub mod supervisor;
pub mod wait;
#[cfg(windows)]
pub mod windows;
