//! Parser for `/proc/<pid>/stat`.
//!
//! The second field is the process name in parentheses, and a process may
//! name itself anything up to 15 bytes, including `)`, spaces and a lone
//! `Z` (`prctl(PR_SET_NAME, "a) Z 1 (b")`). Splitting on whitespace, or on
//! the first `)`, then reads the name as the state. The kernel never puts a
//! `)` after the name, so everything after the LAST `)` is the numeric
//! fields, and the name is everything between the first `(` and that `)`.

use super::ProcState;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stat {
    pub pid: i32,
    pub name: String,
    pub state: ProcState,
    pub ppid: i32,
    pub pgid: i32,
    /// Session id (field 6).
    pub session: i32,
    /// The kernel's per-task flags (field 9): `PF_EXITING` among them.
    pub flags: u64,
    /// Threads not yet released (field 20): an exiting thread counts until
    /// it is reaped, a leader that is a zombie until the last one is.
    pub num_threads: u64,
    /// Clock ticks since boot at which the process started (field 22).
    pub start_time: u64,
    /// A zombie's wait status as `waitpid` would report it (field 52,
    /// Linux 3.5); 0 while it runs, and 0 unless we may ptrace it. `None`
    /// where the kernel has no such field.
    pub exit_code: Option<i32>,
}

#[derive(Debug, PartialEq, Eq)]
pub struct ParseError(pub &'static str);

pub fn parse(buf: &[u8]) -> Result<Stat, ParseError> {
    let open = buf
        .iter()
        .position(|&b| b == b'(')
        .ok_or(ParseError("no '('"))?;
    let close = name_end(buf)?;
    if close < open {
        return Err(ParseError("')' before '('"));
    }
    let pid = std::str::from_utf8(&buf[..open])
        .map_err(|_| ParseError("pid not utf-8"))?
        .trim()
        .parse::<i32>()
        .map_err(|_| ParseError("bad pid"))?;
    let name = String::from_utf8_lossy(&buf[open + 1..close]).into_owned();
    let rest = numeric_fields(buf, close)?;
    let mut fields = rest.split_ascii_whitespace();
    // Field numbers below are proc(5)'s, 1-based; `fields` starts at field 3.
    let state_field = fields.next().ok_or(ParseError("no state"))?;
    let state = ProcState::from_stat_char(
        state_field
            .chars()
            .next()
            .ok_or(ParseError("empty state"))?,
    );
    let ppid = next_num::<i32>(&mut fields, "ppid")?; // 4
    let pgid = next_num::<i32>(&mut fields, "pgrp")?; // 5
    let session = next_num::<i32>(&mut fields, "session")?; // 6
    let flags = fields // skip fields 7 and 8
        .nth(9 - 7)
        .ok_or(ParseError("no flags"))?
        .parse::<u64>()
        .map_err(|_| ParseError("bad flags"))?; // 9
    let num_threads = fields // skip fields 10..=19
        .nth(20 - 10)
        .ok_or(ParseError("no num_threads"))?
        .parse::<u64>()
        .map_err(|_| ParseError("bad num_threads"))?; // 20
    let start_time = fields // skip field 21
        .nth(22 - 21)
        .ok_or(ParseError("no starttime"))?
        .parse::<u64>()
        .map_err(|_| ParseError("bad starttime"))?; // 22
    let exit_code = fields.nth(52 - 23).and_then(|f| f.parse::<i32>().ok()); // 52
    Ok(Stat {
        pid,
        name,
        state,
        ppid,
        pgid,
        session,
        flags,
        num_threads,
        start_time,
        exit_code,
    })
}

/// Where the name ends: the LAST `)` of the line (see the module docs).
fn name_end(buf: &[u8]) -> Result<usize, ParseError> {
    buf.iter()
        .rposition(|&b| b == b')')
        .ok_or(ParseError("no ')'"))
}

/// The text after the name's closing parenthesis at `close`: fields 3 on.
fn numeric_fields(buf: &[u8], close: usize) -> Result<&str, ParseError> {
    std::str::from_utf8(&buf[close + 1..]).map_err(|_| ParseError("fields not utf-8"))
}

/// The controlling terminal of a process: fields 7 and 8, which [`Stat`]
/// leaves out (the liveness paths that fill it never need them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Terminal {
    /// The terminal's device number (`tty_nr`), 0 for none.
    pub tty_nr: i32,
    /// The terminal's foreground process group (`tpgid`), -1 for none.
    pub tpgid: i32,
}

pub fn parse_terminal(buf: &[u8]) -> Result<Terminal, ParseError> {
    let close = name_end(buf)?;
    // Fields 3 to 6 (state, ppid, pgrp, session) come first.
    let mut fields = numeric_fields(buf, close)?.split_ascii_whitespace().skip(4);
    Ok(Terminal {
        tty_nr: next_num(&mut fields, "tty_nr")?, // 7
        tpgid: next_num(&mut fields, "tpgid")?,   // 8
    })
}

fn next_num<'a, T: std::str::FromStr>(
    fields: &mut impl Iterator<Item = &'a str>,
    what: &'static str,
) -> Result<T, ParseError> {
    fields
        .next()
        .ok_or(ParseError(what))?
        .parse::<T>()
        .map_err(|_| ParseError(what))
}

/// The state and the flags (field 9), for the repeated liveness check: no
/// allocation, no name.
pub fn parse_state_flags(buf: &[u8]) -> Result<(ProcState, u64), ParseError> {
    let close = name_end(buf)?;
    let mut fields = numeric_fields(buf, close)?.split_ascii_whitespace();
    let state = fields
        .next()
        .and_then(|f| f.chars().next())
        .map(ProcState::from_stat_char)
        .ok_or(ParseError("no state"))?;
    let flags = fields // skip fields 4..=8
        .nth(9 - 4)
        .ok_or(ParseError("no flags"))?
        .parse::<u64>()
        .map_err(|_| ParseError("bad flags"))?;
    Ok((state, flags))
}

/// Only the state, for the liveness hot path: no allocation, no name.
pub fn parse_state(buf: &[u8]) -> Result<ProcState, ParseError> {
    let close = name_end(buf)?;
    buf[close + 1..]
        .iter()
        .find(|b| !b.is_ascii_whitespace())
        .map(|&b| ProcState::from_stat_char(b as char))
        .ok_or(ParseError("no state"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    // A real line from this kernel (6.18), `sleep 1000`.
    const SLEEP: &str = "4242 (sleep) S 4100 4242 4100 34816 4242 4194304 113 0 0 0 0 0 0 0 20 0 1 0 987654 8364032 224 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 0\n";

    #[test]
    fn parses_plain_line() {
        let s = parse(SLEEP.as_bytes()).unwrap();
        assert_eq!(s.pid, 4242);
        assert_eq!(s.name, "sleep");
        assert_eq!(s.state, ProcState::Sleeping);
        assert_eq!(s.ppid, 4100);
        assert_eq!(s.pgid, 4242);
        assert_eq!(s.session, 4100);
        assert_eq!(s.num_threads, 1);
        assert_eq!(s.start_time, 987654);
        assert_eq!(s.exit_code, Some(0));
        assert_eq!(parse_state(SLEEP.as_bytes()).unwrap(), ProcState::Sleeping);
        assert_eq!(
            parse_state_flags(SLEEP.as_bytes()).unwrap(),
            (ProcState::Sleeping, 4194304)
        );
        // A name that looks like fields is not read as them.
        let hostile = SLEEP.replace("(sleep)", "(a) Z 1 2 3 4 5 6 (b)");
        assert_eq!(
            parse_state_flags(hostile.as_bytes()).unwrap(),
            (ProcState::Sleeping, 4194304)
        );
        assert!(parse_state_flags(b"4242 (sleep) S 1 2 3").is_err());
        assert_eq!(
            parse_terminal(SLEEP.as_bytes()).unwrap(),
            Terminal {
                tty_nr: 34816,
                tpgid: 4242
            }
        );
    }

    #[test]
    fn no_terminal() {
        let line = SLEEP.replace(" 34816 4242 ", " 0 -1 ");
        let t = parse_terminal(line.as_bytes()).unwrap();
        assert_eq!((t.tty_nr, t.tpgid), (0, -1));
        // A name that looks like fields is not read as them.
        let hostile = line.replace("(sleep)", "(a) S 1 2 3 4 5 (b)");
        assert_eq!(parse_terminal(hostile.as_bytes()).unwrap(), t);
    }

    #[test]
    fn zombie_exit_code_is_field_52() {
        // A zombie that exited with code 7 (wait status 7 << 8).
        let z = SLEEP
            .replace(") S ", ") Z ")
            .replace(" 0 0 0\n", " 0 0 1792\n");
        let s = parse(z.as_bytes()).unwrap();
        assert_eq!(s.exit_code, Some(1792));
        // Kernels before 3.5 end the line earlier.
        let short: Vec<&str> = SLEEP.split(' ').take(44).collect();
        assert_eq!(parse(short.join(" ").as_bytes()).unwrap().exit_code, None);
    }

    #[test]
    fn hostile_name_is_not_the_state() {
        let line = SLEEP.replace("(sleep)", "(a) Z 1 (b)");
        let s = parse(line.as_bytes()).unwrap();
        assert_eq!(s.name, "a) Z 1 (b");
        assert_eq!(s.state, ProcState::Sleeping);
        assert_eq!(s.ppid, 4100);
        assert_eq!(s.start_time, 987654);
        assert_eq!(parse_state(line.as_bytes()).unwrap(), ProcState::Sleeping);
    }

    #[test]
    fn zombie_and_dead() {
        let z = SLEEP.replace(") S ", ") Z ");
        assert_eq!(parse(z.as_bytes()).unwrap().state, ProcState::Zombie);
        let x = SLEEP.replace(") S ", ") X ");
        assert_eq!(parse(x.as_bytes()).unwrap().state, ProcState::Dead);
        assert!(!ProcState::Zombie.is_running());
        assert!(!ProcState::Dead.is_running());
        assert!(ProcState::DiskSleep.is_running());
    }

    #[test]
    fn every_state_letter() {
        for (c, st) in [
            ('R', ProcState::Running),
            ('S', ProcState::Sleeping),
            ('D', ProcState::DiskSleep),
            ('T', ProcState::Stopped),
            ('t', ProcState::Stopped),
            ('Z', ProcState::Zombie),
            ('X', ProcState::Dead),
            ('x', ProcState::Dead),
            ('I', ProcState::Idle),
            ('W', ProcState::Other),
            ('P', ProcState::Other),
        ] {
            let line = SLEEP.replace(") S ", &format!(") {c} "));
            assert_eq!(parse(line.as_bytes()).unwrap().state, st, "{c}");
        }
    }

    #[test]
    fn truncated_and_garbage_lines_are_errors() {
        assert!(parse(b"").is_err());
        assert!(parse(b"12 (x").is_err());
        assert!(parse(b"12 x) S 1").is_err());
        assert!(parse(b"12 (x) S 1 2").is_err());
        assert!(parse(b"12 (x) S one 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20").is_err());
        assert!(parse_state(b"12 (x)").is_err());
        assert!(parse_state(b"12 (x)   ").is_err());
        assert!(parse_terminal(b"12 (x) S 1 2 3").is_err());
        assert!(parse_terminal(b"12 (x) S 1 2 3 tty -1").is_err());
    }

    proptest! {
        // Any 0..=15-byte name the kernel could store (no NUL), any state.
        #[test]
        fn any_name_round_trips(
            name in proptest::collection::vec(1u8..=255, 0..=15),
            state in proptest::sample::select(vec!['R', 'S', 'D', 'Z', 'T', 'X', 'I']),
            pid in 1i32..4_194_304,
            start in any::<u64>(),
        ) {
            let mut line = format!("{pid} (").into_bytes();
            line.extend_from_slice(&name);
            line.extend_from_slice(
                format!(") {state} 1 {pid} 1 0 -1 4194304 0 0 0 0 0 0 0 0 20 0 1 0 {start} 0 0\n")
                    .as_bytes(),
            );
            let s = parse(&line).unwrap();
            prop_assert_eq!(s.pid, pid);
            prop_assert_eq!(s.name, String::from_utf8_lossy(&name).into_owned());
            prop_assert_eq!(s.state, ProcState::from_stat_char(state));
            prop_assert_eq!(s.pgid, pid);
            prop_assert_eq!(s.start_time, start);
            prop_assert_eq!(parse_state(&line).unwrap(), s.state);
            prop_assert_eq!(parse_terminal(&line).unwrap(), Terminal { tty_nr: 0, tpgid: -1 });
        }

        #[test]
        fn arbitrary_bytes_never_panic(buf in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = parse(&buf);
            let _ = parse_state(&buf);
            let _ = parse_terminal(&buf);
        }
    }
}
