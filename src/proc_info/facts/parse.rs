//! Pure readers of the `/proc` texts the facts come from, other than the
//! stat line (`proc_info::stat`): `/proc/<pid>/status`, `/proc/net/tcp{,6}`
//! and an environment block. No I/O here, so each is tested on every OS.

/// What `/proc/self/status` says of this process's signals and privileges:
/// masks with bit `n - 1` for signal `n` (capability `n` for `cap_eff`). A
/// field the kernel does not show reads 0.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OwnStatus {
    /// `SigPnd`: pending for the thread that read the file.
    pub pending: u64,
    /// `ShdPnd`: pending for the process, not yet taken by a thread.
    pub shared_pending: u64,
    /// `SigIgn`: ignored.
    pub ignored: u64,
    /// `SigCgt`: caught (a handler is installed).
    pub caught: u64,
    /// `CapEff`: the effective capabilities.
    pub cap_eff: u64,
}

/// Reads the masks out of a `/proc/<pid>/status` text: `Name:\tvalue`
/// lines, the masks in hexadecimal.
pub fn status(text: &[u8]) -> OwnStatus {
    let mut out = OwnStatus::default();
    for line in text.split(|&b| b == b'\n') {
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            continue;
        };
        let field = match &line[..colon] {
            b"SigPnd" => &mut out.pending,
            b"ShdPnd" => &mut out.shared_pending,
            b"SigIgn" => &mut out.ignored,
            b"SigCgt" => &mut out.caught,
            b"CapEff" => &mut out.cap_eff,
            _ => continue,
        };
        if let Some(mask) = std::str::from_utf8(&line[colon + 1..])
            .ok()
            .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        {
            *field = mask;
        }
    }
    out
}

/// `st` of a socket in LISTEN (`TCP_LISTEN`, include/net/tcp_states.h).
const TCP_LISTEN: &str = "0A";

/// The inodes of the sockets listening on `port` in a `/proc/net/tcp` or
/// `/proc/net/tcp6` text. Each line after the header: `sl local_address
/// rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
/// ...`, an address as `hex-ip:hex-port`.
pub fn tcp_listeners(text: &[u8], port: u16) -> Vec<u64> {
    let text = String::from_utf8_lossy(text);
    text.lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split_ascii_whitespace().collect();
            if f.len() < 10 || f[3] != TCP_LISTEN {
                return None;
            }
            let (_, local_port) = f[1].rsplit_once(':')?;
            if u16::from_str_radix(local_port, 16).ok()? != port {
                return None;
            }
            f[9].parse().ok()
        })
        .collect()
}

/// Does the environment block `env` (`NAME=value` entries, each ended by a
/// NUL, as `/proc/<pid>/environ` has them) hold the entry `entry` itself
/// (not as the tail of another)?
pub fn environ_holds(env: &[u8], entry: &[u8]) -> bool {
    // The piece after the last NUL is not ended by one: no entry.
    let complete = env.split(|&b| b == 0).count() - 1;
    !entry.is_empty() && env.split(|&b| b == 0).take(complete).any(|e| e == entry)
}

/// A command line as `/proc/<pid>/cmdline` has it (each argument ended by
/// a NUL) as arguments. A process may have written over its own (Linux
/// then shows what it wrote, without the last NUL): that tail is an
/// argument too.
pub fn cmdline(raw: &[u8]) -> Vec<String> {
    if raw.is_empty() {
        return Vec::new();
    }
    raw.strip_suffix(&[0])
        .unwrap_or(raw)
        .split(|&b| b == 0)
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    // Lines from this kernel (6.18), a Node process.
    const STATUS: &str = "Name:\tnode\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t4242\n\
        SigQ:\t0/63432\nSigPnd:\t0000000000000000\nShdPnd:\t0000000000004000\n\
        SigBlk:\t0000000000000000\nSigIgn:\t0000000001001000\nSigCgt:\t0000000188014602\n\
        CapInh:\t0000000000000000\nCapPrm:\t000001ffffffffff\nCapEff:\t00000000000000c0\n";

    #[test]
    fn status_masks() {
        let s = status(STATUS.as_bytes());
        assert_eq!(
            s,
            OwnStatus {
                pending: 0,
                shared_pending: 0x4000,
                ignored: 0x0100_1000,
                caught: 0x1_8801_4602,
                cap_eff: 0xc0,
            }
        );
        // SIGTERM (15) is pending for the process; SIGPIPE (13) ignored.
        assert_eq!((s.shared_pending >> 14) & 1, 1);
        assert_eq!((s.ignored >> 12) & 1, 1);
    }

    #[test]
    fn status_without_the_fields_reads_zero() {
        assert_eq!(status(b""), OwnStatus::default());
        assert_eq!(
            status(b"Name:\tx\nSigCgt:\tzz\nCapEff\n"),
            OwnStatus::default()
        );
        // Only the field's own name counts.
        assert_eq!(status(b"XSigCgt:\tff\n").caught, 0);
    }

    const TCP: &str = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 51234 1 0000000000000000 100 0 0 10 0\n\
   1: 0100007F:1F90 0100007F:D2F0 01 00000000:00000000 00:00000000 00000000  1000        0 51240 1 0000000000000000 20 4 30 10 -1\n\
   2: 00000000:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1700 1 0000000000000000 100 0 0 10 0\n";

    #[test]
    fn listeners_on_a_port() {
        // 0x1F90 = 8080: the LISTEN line, not the established one.
        assert_eq!(tcp_listeners(TCP.as_bytes(), 8080), vec![51234]);
        assert_eq!(tcp_listeners(TCP.as_bytes(), 22), vec![1700]);
        assert!(tcp_listeners(TCP.as_bytes(), 80).is_empty());
        // IPv6: the address is 32 hex digits, the port still after the colon.
        let v6 = "header\n   0: 00000000000000000000000000000000:1F90 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 777 1\n";
        assert_eq!(tcp_listeners(v6.as_bytes(), 8080), vec![777]);
        assert!(tcp_listeners(b"", 8080).is_empty());
        assert!(tcp_listeners(b"header\n0: x y 0A\n", 8080).is_empty());
    }

    #[test]
    fn environ_entries_whole() {
        let env = b"A=1\0PROCWARD_MARK=abc\0B=2\0";
        assert!(environ_holds(env, b"PROCWARD_MARK=abc"));
        assert!(environ_holds(env, b"A=1"));
        assert!(environ_holds(env, b"B=2"));
        // A value's tail, a prefix, another value: not the entry.
        assert!(!environ_holds(
            b"XPROCWARD_MARK=abc\0",
            b"PROCWARD_MARK=abc"
        ));
        assert!(!environ_holds(
            b"PROCWARD_MARK=abcd\0",
            b"PROCWARD_MARK=abc"
        ));
        assert!(!environ_holds(
            b"C=PROCWARD_MARK=abc\0",
            b"PROCWARD_MARK=abc"
        ));
        // An entry not ended by its NUL (a block cut short) does not count.
        assert!(!environ_holds(b"PROCWARD_MARK=abc", b"PROCWARD_MARK=abc"));
        assert!(!environ_holds(b"", b"PROCWARD_MARK=abc"));
        assert!(!environ_holds(env, b""));
    }

    #[test]
    fn command_lines() {
        assert_eq!(cmdline(b"sleep\x0030\0"), vec!["sleep", "30"]);
        assert_eq!(cmdline(b"a\0\0b\0"), vec!["a", "", "b"]);
        // Kernel threads and zombies show nothing.
        assert!(cmdline(b"").is_empty());
        // Written over (setproctitle): the text as it stands.
        assert_eq!(
            cmdline(b"nginx: master process"),
            vec!["nginx: master process"]
        );
        assert_eq!(cmdline(b"\0"), vec![""]);
        assert_eq!(cmdline(b"caf\xc3\xa9\0\xff\0"), vec!["café", "\u{fffd}"]);
    }
}
