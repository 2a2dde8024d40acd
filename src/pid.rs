//! Validated process ids and signal names.
//!
//! Everything that can end up in `kill(2)` passes through [`Pid`]: its only
//! constructor rejects 0, negatives and anything above the kernel's hard
//! limit, so `kill(0, ..)` (our own group) and `kill(-1, ..)` (every process
//! we may signal) cannot be reached from user input.

use std::fmt;

/// `PID_MAX_LIMIT` on 64-bit Linux (2^22). No kernel hands out a larger pid.
pub const PID_MAX: i64 = 4_194_304;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Pid(i32);

#[derive(Debug, PartialEq, Eq)]
pub enum PidError {
    /// Not an integer (fraction, NaN, ±Infinity).
    NotInteger,
    /// An integer outside 1..=PID_MAX.
    OutOfRange,
}

impl fmt::Display for PidError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PidError::NotInteger => write!(f, "pid must be an integer"),
            PidError::OutOfRange => write!(f, "pid must be an integer in 1..={PID_MAX}"),
        }
    }
}

impl Pid {
    /// From a JS number. JS numbers are doubles; napi's `u32` conversion would
    /// wrap `-1` to 4294967295 and truncate `1.7` to 1, so take the double and
    /// judge it whole.
    pub fn from_f64(value: f64) -> Result<Pid, PidError> {
        if !value.is_finite() || value.fract() != 0.0 {
            return Err(PidError::NotInteger);
        }
        if value < 1.0 || value > PID_MAX as f64 {
            return Err(PidError::OutOfRange);
        }
        Ok(Pid(value as i32))
    }

    pub fn from_raw(value: i32) -> Result<Pid, PidError> {
        Pid::from_f64(f64::from(value))
    }

    pub fn current() -> Pid {
        Pid(std::process::id() as i32)
    }

    /// Always positive: a `Pid` can never address a group or "everyone".
    pub fn as_raw(self) -> i32 {
        self.0
    }
}

impl fmt::Display for Pid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// This OS's signal numbers by name, as Node spells them (`os.constants.signals`).
#[cfg(unix)]
const SIGNALS: &[(&str, i32)] = &[
    ("SIGHUP", libc::SIGHUP),
    ("SIGINT", libc::SIGINT),
    ("SIGQUIT", libc::SIGQUIT),
    ("SIGILL", libc::SIGILL),
    ("SIGTRAP", libc::SIGTRAP),
    ("SIGABRT", libc::SIGABRT),
    ("SIGIOT", libc::SIGIOT),
    ("SIGBUS", libc::SIGBUS),
    ("SIGFPE", libc::SIGFPE),
    ("SIGKILL", libc::SIGKILL),
    ("SIGUSR1", libc::SIGUSR1),
    ("SIGSEGV", libc::SIGSEGV),
    ("SIGUSR2", libc::SIGUSR2),
    ("SIGPIPE", libc::SIGPIPE),
    ("SIGALRM", libc::SIGALRM),
    ("SIGTERM", libc::SIGTERM),
    ("SIGCHLD", libc::SIGCHLD),
    ("SIGCONT", libc::SIGCONT),
    ("SIGSTOP", libc::SIGSTOP),
    ("SIGTSTP", libc::SIGTSTP),
    ("SIGTTIN", libc::SIGTTIN),
    ("SIGTTOU", libc::SIGTTOU),
    ("SIGURG", libc::SIGURG),
    ("SIGXCPU", libc::SIGXCPU),
    ("SIGXFSZ", libc::SIGXFSZ),
    ("SIGVTALRM", libc::SIGVTALRM),
    ("SIGPROF", libc::SIGPROF),
    ("SIGWINCH", libc::SIGWINCH),
    ("SIGIO", libc::SIGIO),
    #[cfg(any(target_os = "linux", target_os = "android"))]
    ("SIGPOLL", libc::SIGPOLL),
    #[cfg(any(target_os = "linux", target_os = "android"))]
    ("SIGPWR", libc::SIGPWR),
    #[cfg(target_os = "macos")]
    ("SIGINFO", libc::SIGINFO),
    ("SIGSYS", libc::SIGSYS),
];

/// Windows has no signals between processes; these are the numbers Node
/// gives the names it accepts there (`os.constants.signals` on win32), which
/// procward maps to console control events or termination (`stop`).
#[cfg(windows)]
const SIGNALS: &[(&str, i32)] = &[
    ("SIGHUP", 1),
    ("SIGINT", 2),
    ("SIGQUIT", 3),
    ("SIGILL", 4),
    ("SIGFPE", 8),
    ("SIGKILL", 9),
    ("SIGSEGV", 11),
    ("SIGTERM", 15),
    ("SIGBREAK", 21),
    ("SIGABRT", 22),
    ("SIGWINCH", 28),
];

/// A signal number that is safe to send: 1..=64, never 0 (0 only probes, and
/// the probing APIs do that themselves).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Signal(i32);

impl Signal {
    pub const TERM: Signal = Signal(libc::SIGTERM);
    /// 9 on every OS procward runs on (Windows: Node's number for it).
    pub const KILL: Signal = Signal(9);
    /// Windows: Node's number for SIGBREAK, what a CTRL_BREAK_EVENT is to
    /// the child.
    #[cfg(windows)]
    pub const BREAK: Signal = Signal(21);

    pub fn from_name(name: &str) -> Option<Signal> {
        SIGNALS
            .iter()
            .find(|(n, _)| *n == name)
            .map(|&(_, num)| Signal(num))
    }

    pub fn from_number(num: f64) -> Option<Signal> {
        if num.fract() != 0.0 || !(1.0..=64.0).contains(&num) {
            return None;
        }
        Signal::from_raw(num as i32)
    }

    pub fn from_raw(num: i32) -> Option<Signal> {
        if (1..=64).contains(&num) {
            Some(Signal(num))
        } else {
            None
        }
    }

    pub fn as_raw(self) -> i32 {
        self.0
    }

    /// Node's name for a signal number; real-time signals have none.
    pub fn name(self) -> Option<&'static str> {
        signal_name(self.0)
    }
}

pub fn signal_name(num: i32) -> Option<&'static str> {
    // SIGIOT and SIGPOLL are aliases; the first entry for a number wins, as in Node.
    SIGNALS
        .iter()
        .find(|&&(_, n)| n == num)
        .map(|&(name, _)| name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pid_bounds() {
        assert_eq!(Pid::from_f64(1.0).unwrap().as_raw(), 1);
        assert_eq!(
            Pid::from_f64(PID_MAX as f64).unwrap().as_raw(),
            PID_MAX as i32
        );
        assert_eq!(Pid::from_f64(0.0), Err(PidError::OutOfRange));
        assert_eq!(Pid::from_f64(-1.0), Err(PidError::OutOfRange));
        assert_eq!(Pid::from_f64(-0.0), Err(PidError::OutOfRange));
        assert_eq!(
            Pid::from_f64(PID_MAX as f64 + 1.0),
            Err(PidError::OutOfRange)
        );
        assert_eq!(Pid::from_f64(2f64.powi(31)), Err(PidError::OutOfRange));
        assert_eq!(Pid::from_f64(1.5), Err(PidError::NotInteger));
        assert_eq!(Pid::from_f64(f64::NAN), Err(PidError::NotInteger));
        assert_eq!(Pid::from_f64(f64::INFINITY), Err(PidError::NotInteger));
        assert_eq!(Pid::from_f64(f64::NEG_INFINITY), Err(PidError::NotInteger));
    }

    #[test]
    fn signal_names_round_trip() {
        for &(name, num) in SIGNALS {
            assert_eq!(Signal::from_name(name).unwrap().as_raw(), num);
        }
        assert_eq!(
            Signal::from_raw(libc::SIGTERM).unwrap().name(),
            Some("SIGTERM")
        );
        assert_eq!(
            Signal::from_raw(libc::SIGABRT).unwrap().name(),
            Some("SIGABRT")
        );
        assert!(Signal::from_name("SIGNOPE").is_none());
        assert!(Signal::from_name("sigterm").is_none());
        assert!(Signal::from_number(0.0).is_none());
        assert!(Signal::from_number(-9.0).is_none());
        assert!(Signal::from_number(65.0).is_none());
        assert!(Signal::from_number(9.5).is_none());
        assert_eq!(Signal::from_number(9.0), Some(Signal::KILL));
    }
}
