//! Where a spawn failed: the step (`Stage`) and what it tells the caller
//! (the error's `at` and `syscall`), shared by the preparation, the stdio
//! openers and the child of each OS.

use std::io;

use super::super::{At, SpawnError};

/// Where a spawn failed, for the error's `syscall` and message. The steps
/// between clone and exec are reported by the Linux child alone (macOS's
/// `posix_spawn` does them itself, and says only whether it worked).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(i32)]
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
pub enum Stage {
    Resolve = 1,
    Cwd,
    Stdio,
    Clone,
    Setpgid,
    Prctl,
    Dup2,
    Chdir,
    Execve,
    Spawner,
    Setgid,
    Setuid,
    /// Entering the child's cgroup (`cgroup.procs`, or `clone3`).
    Cgroup,
    Setsid,
    /// Refused where the child cannot be given a umask (macOS).
    Umask,
    /// Copying a listening socket of `Command::listen`.
    Listen,
}

impl Stage {
    #[cfg(target_os = "linux")]
    pub(super) fn from_i32(v: i32) -> Stage {
        match v {
            1 => Stage::Resolve,
            2 => Stage::Cwd,
            3 => Stage::Stdio,
            4 => Stage::Clone,
            5 => Stage::Setpgid,
            6 => Stage::Prctl,
            7 => Stage::Dup2,
            8 => Stage::Chdir,
            9 => Stage::Execve,
            11 => Stage::Setgid,
            12 => Stage::Setuid,
            13 => Stage::Cgroup,
            14 => Stage::Setsid,
            15 => Stage::Umask,
            16 => Stage::Listen,
            _ => Stage::Spawner,
        }
    }

    /// What the caller was doing when this stage failed.
    fn at(self) -> At {
        match self {
            Stage::Cwd | Stage::Chdir => At::Chdir,
            Stage::Setpgid
            | Stage::Prctl
            | Stage::Dup2
            | Stage::Setgid
            | Stage::Setuid
            | Stage::Cgroup
            | Stage::Setsid
            | Stage::Umask => At::Setup,
            Stage::Resolve
            | Stage::Stdio
            | Stage::Clone
            | Stage::Execve
            | Stage::Spawner
            | Stage::Listen => At::Spawn,
        }
    }

    /// The system call that failed, as far as there is one.
    pub fn syscall(self) -> &'static str {
        match self {
            Stage::Resolve => "spawn",
            Stage::Cwd => "chdir",
            Stage::Stdio => "open",
            Stage::Clone => "clone",
            Stage::Setpgid => "setpgid",
            Stage::Prctl => "prctl",
            Stage::Dup2 => "dup2",
            Stage::Chdir => "chdir",
            Stage::Execve => "execve",
            Stage::Spawner => "spawn",
            Stage::Setgid => "setgid",
            Stage::Setuid => "setuid",
            Stage::Cgroup => "cgroup.procs",
            Stage::Setsid => "setsid",
            Stage::Umask => "umask",
            Stage::Listen => "dup",
        }
    }
}

impl SpawnError {
    pub(super) fn os(err: io::Error, stage: Stage) -> SpawnError {
        SpawnError::Os {
            err,
            at: stage.at(),
            syscall: stage.syscall(),
        }
    }
}
