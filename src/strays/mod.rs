//! Strays: members of a dead supervisor's daemon group that outlived their
//! leader (a daemon's workers whose master died with the supervisor).
//!
//! A process group id is only a number: once every member of a group has
//! gone, the number can name a new group (its leader got that pid). So a
//! process that has the recorded pgid now is not proof of membership. What
//! is: the recorded group existed at `aliveAt` (its leader was seen alive
//! then), so a process with that pgid and session that had already started
//! by then, in the same boot, was in that group — a group cannot be joined
//! from outside its session, and a process cannot have joined a group that
//! did not exist yet before it started. Such a process is a member; any
//! other process with the pgid is only a suspect, reported and never
//! signalled. Never by name.
//!
//! The limit: start times have the resolution of a clock tick, so a process
//! counts as started by `aliveAt` only if the whole tick it started in lies
//! at or before it; and `aliveAt` is wall-clock time, converted to the boot
//! clock now — a wall clock stepped back since the record was written makes
//! the rule reach later-started processes by as much as the step.

#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
pub use linux::{boot_clock_ms, sweep};

use crate::proc_info::stat::Stat;

/// What the predecessor recorded about its daemon's group.
#[derive(Clone, Debug)]
pub struct GroupRecord {
    pub pgid: i32,
    pub session: i32,
    /// The boot the record is from (from the leader's identity).
    pub boot: String,
    /// `aliveAt` on the boot clock (CLOCK_BOOTTIME), in milliseconds.
    pub alive_at_boot_ms: f64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Proven a member of the recorded group: to be killed.
    Member,
    /// Has the pgid, but membership is not proven: reported only.
    Suspect,
    /// Not in the group, or already exited.
    Unrelated,
}

/// Judges one process against the record. `boot` is the current boot id,
/// `tick_ms` the length of a clock tick.
pub fn classify(st: &Stat, rec: &GroupRecord, boot: &str, tick_ms: f64) -> Verdict {
    if st.pgid != rec.pgid || !st.state.is_running() {
        return Verdict::Unrelated;
    }
    if boot != rec.boot || st.session != rec.session {
        return Verdict::Suspect;
    }
    // It started somewhere within tick `start_time`: by the end of it at
    // the latest.
    let started_by_ms = (st.start_time as f64 + 1.0) * tick_ms;
    if started_by_ms <= rec.alive_at_boot_ms {
        Verdict::Member
    } else {
        Verdict::Suspect
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proc_info::ProcState;

    fn stat(pgid: i32, session: i32, start_time: u64, state: ProcState) -> Stat {
        Stat {
            pid: 501,
            name: "worker".into(),
            state,
            ppid: 1,
            pgid,
            session,
            flags: 0,
            num_threads: 1,
            start_time,
            exit_code: Some(0),
        }
    }

    /// Group 500 in session 400 on boot "b"; tick 100 ends at 1010 ms with
    /// 10 ms ticks.
    fn record(session: i32) -> GroupRecord {
        GroupRecord {
            pgid: 500,
            session,
            boot: "b".into(),
            alive_at_boot_ms: 1010.0,
        }
    }

    #[test]
    fn processes_are_classified_by_group_session_boot_and_start() {
        use ProcState::{Dead, Running, Sleeping, Zombie};
        use Verdict::{Member, Suspect, Unrelated};
        // Why; the process's group, session, start tick and state; the
        // recorded session; the boot now; the verdict.
        #[rustfmt::skip]
        let cases = [
            ("started before aliveAt", 500, 400, 100, Sleeping, 400, "b", Member),
            // Tick 101 may have begun before aliveAt, but also may not: unproven.
            ("started within the aliveAt tick", 500, 400, 101, Running, 400, "b", Suspect),
            ("started later", 500, 400, 5000, Running, 400, "b", Suspect),
            ("another session", 500, 399, 10, Sleeping, 400, "b", Suspect),
            ("another boot", 500, 400, 10, Sleeping, 400, "other", Suspect),
            // Under a container's init that never called setsid, every
            // process is in session 0: a session like any other.
            ("in session 0", 500, 0, 100, Sleeping, 0, "b", Member),
            ("out of session 0", 500, 400, 100, Sleeping, 0, "b", Suspect),
            ("another group", 501, 400, 10, Sleeping, 400, "b", Unrelated),
            ("a zombie", 500, 400, 10, Zombie, 400, "b", Unrelated),
            ("dead", 500, 400, 10, Dead, 400, "b", Unrelated),
        ];
        for (why, pgid, session, start, state, recorded, boot, verdict) in cases {
            let s = stat(pgid, session, start, state);
            assert_eq!(
                classify(&s, &record(recorded), boot, 10.0),
                verdict,
                "{why}"
            );
        }
    }
}
