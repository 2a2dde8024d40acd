//! Validated durations in milliseconds.
//!
//! Every duration option enters through [`Millis`]: its only checked
//! constructor rejects NaN, ±Infinity, negatives and anything above
//! 2^31−1 ms (about 24.8 days, the ceiling of `setTimeout`), so no later
//! code can forget the check. `Duration::from_secs_f64` panics on a huge
//! value, and `Instant + Duration` overflows on one; a `Millis` can do
//! neither.

use std::fmt;
use std::time::Duration;

/// 0..=2^31−1 whole milliseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Millis(u32);

#[derive(Debug, PartialEq, Eq)]
pub enum MillisError {
    /// NaN or ±Infinity.
    NotFinite,
    /// Negative, or above [`Millis::MAX`].
    OutOfRange,
}

impl fmt::Display for MillisError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MillisError::NotFinite => write!(f, "must be a finite number of milliseconds"),
            MillisError::OutOfRange => {
                write!(f, "must be in 0..={} milliseconds", Millis::MAX.0)
            }
        }
    }
}

impl Millis {
    pub const ZERO: Millis = Millis(0);
    /// 2^31−1 ms, as for `setTimeout`.
    pub const MAX: Millis = Millis(i32::MAX as u32);

    /// From a JS number. A fraction is rounded *up* to the next whole
    /// millisecond: a duration here is a minimum wait, and the timers that
    /// serve it count whole milliseconds anyway. The bound is checked before
    /// rounding, so 2^31−1 + 0.5 is out of range.
    pub fn from_f64(ms: f64) -> Result<Millis, MillisError> {
        if !ms.is_finite() {
            return Err(MillisError::NotFinite);
        }
        // -0.0 passes (it is 0); any other negative does not.
        if ms < 0.0 || ms > f64::from(Millis::MAX.0) {
            return Err(MillisError::OutOfRange);
        }
        // In range and finite: the cast is exact after ceil.
        Ok(Millis(ms.ceil() as u32))
    }

    /// From whole milliseconds; `None` above [`Millis::MAX`].
    pub const fn new(ms: u32) -> Option<Millis> {
        if ms <= Millis::MAX.0 {
            Some(Millis(ms))
        } else {
            None
        }
    }

    pub fn as_u32(self) -> u32 {
        self.0
    }

    pub fn as_duration(self) -> Duration {
        Duration::from_millis(u64::from(self.0))
    }
}

impl From<Millis> for Duration {
    fn from(m: Millis) -> Duration {
        m.as_duration()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds() {
        assert_eq!(Millis::from_f64(0.0), Ok(Millis::ZERO));
        assert_eq!(Millis::from_f64(-0.0), Ok(Millis::ZERO));
        assert_eq!(Millis::from_f64(5000.0).unwrap().as_u32(), 5000);
        assert_eq!(Millis::from_f64(2147483647.0), Ok(Millis::MAX));
        assert_eq!(Millis::from_f64(2147483648.0), Err(MillisError::OutOfRange));
        assert_eq!(Millis::from_f64(2147483647.5), Err(MillisError::OutOfRange));
        assert_eq!(Millis::from_f64(1e23), Err(MillisError::OutOfRange));
        assert_eq!(Millis::from_f64(f64::MAX), Err(MillisError::OutOfRange));
        assert_eq!(Millis::from_f64(-1.0), Err(MillisError::OutOfRange));
        assert_eq!(Millis::from_f64(-1e-300), Err(MillisError::OutOfRange));
        assert_eq!(Millis::from_f64(f64::NAN), Err(MillisError::NotFinite));
        assert_eq!(Millis::from_f64(f64::INFINITY), Err(MillisError::NotFinite));
        assert_eq!(
            Millis::from_f64(f64::NEG_INFINITY),
            Err(MillisError::NotFinite)
        );
    }

    #[test]
    fn fractions_round_up() {
        assert_eq!(Millis::from_f64(0.5).unwrap().as_u32(), 1);
        assert_eq!(Millis::from_f64(1e-300).unwrap().as_u32(), 1);
        assert_eq!(Millis::from_f64(99.01).unwrap().as_u32(), 100);
        assert_eq!(Millis::from_f64(2147483646.5), Ok(Millis::MAX));
    }

    #[test]
    fn new_and_duration() {
        assert_eq!(Millis::new(i32::MAX as u32), Some(Millis::MAX));
        assert_eq!(Millis::new(i32::MAX as u32 + 1), None);
        assert_eq!(Millis::MAX.as_duration(), Duration::from_millis(2147483647));
        // The largest Millis added to an Instant is fine: 24.8 days.
        let _ = std::time::Instant::now() + Millis::MAX.as_duration();
    }

    proptest::proptest! {
        #[test]
        fn never_panics_and_stays_in_range(ms in proptest::num::f64::ANY) {
            if let Ok(m) = Millis::from_f64(ms) {
                proptest::prop_assert!(m <= Millis::MAX);
                proptest::prop_assert!(ms >= 0.0);
                proptest::prop_assert!(f64::from(m.as_u32()) >= ms);
                proptest::prop_assert!(f64::from(m.as_u32()) - ms <= 1.0);
            }
        }
    }
}
