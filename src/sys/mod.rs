//! Thin, safe wrappers over the system calls procward makes, one file per
//! OS (`linux`, `macos`, `windows`; what Linux and macOS share in `unix`).
//! Each wrapper holds exactly one `unsafe` call; callers never see a raw
//! pointer. The OS is chosen here, once: the core modules use `crate::sys`
//! and name only the calls their own OS part makes.

#[cfg(unix)]
mod unix;
#[cfg(unix)]
pub use unix::*;

#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
pub use linux::*;

#[cfg(target_os = "macos")]
mod macos;
#[cfg(target_os = "macos")]
pub use macos::*;

#[cfg(windows)]
mod windows;
#[cfg(windows)]
pub use windows::*;
