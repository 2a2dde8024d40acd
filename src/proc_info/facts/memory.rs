//! What a daemon's tree uses now, as the sum over its processes: their
//! resident sets (RSS) and CPU time. The tree is the members of a process
//! group, or the processes of a cgroup (`cgroup.procs`). A group's
//! `memoryLimit` samples it (at most every 250 ms, off the JS thread) where
//! the kernel cannot enforce the limit itself (no memory controller
//! delegated to the daemon's cgroup); `procward status -f` shows it.
//!
//! Each process is one read of `/proc/<pid>/stat`: its group (field 5), its
//! CPU ticks (14, 15) and its RSS in pages (24) are on that one line, so a
//! scan of the table costs one read per process. Pages shared by two members
//! (a fork's copy-on-write pages, a shared library) count once per member,
//! as `ps` and pm2 count them: the sum errs high, never low.
//!
//! Elsewhere there is no `/proc`: `None`, "cannot tell".

use std::io;
use std::path::Path;

/// What a tree uses now: its resident memory (bytes), the CPU time its live
/// processes have used (microseconds; what exited members used is gone
/// with them, unless a member still alive waited for them), and how many
/// processes were read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TreeUsage {
    pub rss_bytes: u64,
    pub cpu_usec: u64,
    pub processes: u32,
}

/// One process's share of its tree: field 5 (pgrp), fields 14 + 15 (utime +
/// stime, in clock ticks) and field 24 (rss, in pages) of a stat line;
/// `None` for a line that is not one. Everything after the LAST `)` is the
/// numeric fields (the name, field 2, may hold anything, `)` too).
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
fn usage_fields(line: &[u8]) -> Option<(i32, u64, u64)> {
    let close = line.iter().rposition(|&b| b == b')')?;
    let rest = std::str::from_utf8(&line[close + 1..]).ok()?;
    // proc(5)'s numbers are 1-based; `fields` starts at field 3.
    let mut fields = rest.split_ascii_whitespace();
    let pgrp = fields.nth(5 - 3)?.parse::<i32>().ok()?;
    let utime = fields.nth(14 - 6)?.parse::<u64>().ok()?;
    let stime = fields.next()?.parse::<u64>().ok()?;
    let rss = fields.nth(24 - 16)?.parse::<i64>().ok()?;
    // A process in its exit may show a negative count for a moment.
    Some((pgrp, utime + stime, rss.max(0) as u64))
}

#[cfg(target_os = "linux")]
mod imp {
    use std::io;
    use std::path::Path;

    use super::{usage_fields, TreeUsage};
    use crate::proc_info::procfs::is_gone;

    fn page_size() -> u64 {
        // SAFETY: sysconf takes an integer and reads no memory of ours.
        let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        if size > 0 {
            size as u64
        } else {
            4096
        }
    }

    fn usec_per_tick() -> u64 {
        // SAFETY: sysconf takes an integer and reads no memory of ours.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
        1_000_000 / if hz > 0 { hz as u64 } else { 100 }
    }

    /// `/proc/<pid>/stat`'s group, CPU ticks and RSS pages; `None` when it
    /// has gone (a pid that cannot be read is no member).
    fn read(pid: &str) -> Option<(i32, u64, u64)> {
        let line = std::fs::read(format!("/proc/{pid}/stat")).ok()?;
        usage_fields(&line)
    }

    /// The sum over `members`; `None` when none was read.
    fn total(members: impl Iterator<Item = (i32, u64, u64)>) -> Option<TreeUsage> {
        let (mut ticks, mut pages, mut processes) = (0u64, 0u64, 0u32);
        for (_, t, p) in members {
            ticks += t;
            pages += p;
            processes += 1;
        }
        (processes > 0).then(|| TreeUsage {
            rss_bytes: pages * page_size(),
            cpu_usec: ticks * usec_per_tick(),
            processes,
        })
    }

    pub fn group_usage(pgid: i32) -> io::Result<Option<TreeUsage>> {
        let pids: Vec<String> = std::fs::read_dir("/proc")?
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|name| name.bytes().all(|b| b.is_ascii_digit()))
            .collect();
        Ok(total(
            pids.iter()
                .filter_map(|pid| read(pid))
                .filter(|&(group, _, _)| group == pgid),
        ))
    }

    pub fn cgroup_usage(dir: &Path) -> io::Result<Option<TreeUsage>> {
        let procs = match std::fs::read_to_string(dir.join("cgroup.procs")) {
            Ok(text) => text,
            Err(e) if is_gone(&e) => return Ok(None),
            Err(e) => return Err(e),
        };
        Ok(total(
            procs
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .filter_map(read),
        ))
    }
}

#[cfg(not(target_os = "linux"))]
mod imp {
    use std::io;
    use std::path::Path;

    use super::TreeUsage;

    pub fn group_usage(_pgid: i32) -> io::Result<Option<TreeUsage>> {
        Ok(None)
    }

    pub fn cgroup_usage(_dir: &Path) -> io::Result<Option<TreeUsage>> {
        Ok(None)
    }
}

/// What the processes in process group `pgid` use now (zombies count 0);
/// `None` when none is left, or where there is no `/proc`. An error only
/// when `/proc` cannot be listed.
pub fn group_usage(pgid: i32) -> io::Result<Option<TreeUsage>> {
    imp::group_usage(pgid)
}

/// What the processes of cgroup `dir` (a directory under the cgroup2 mount)
/// use now; `None` when it is gone or empty.
pub fn cgroup_usage(dir: &Path) -> io::Result<Option<TreeUsage>> {
    imp::cgroup_usage(dir)
}

#[cfg(test)]
mod tests {
    use super::usage_fields;

    #[test]
    fn reads_group_cpu_and_rss_after_the_last_paren() {
        // A name with `)` and spaces in it; fields 3.. as the kernel writes
        // them: utime 7 and stime 5 (fields 14, 15), rss 321 (field 24).
        let line = b"4242 (a) Z 1 (b) S 1 4242 4242 0 -1 4194560 100 0 0 0 7 5 0 0 20 0 1 0 99 1000000 321 18446744073709551615 1 1 0 0\n";
        assert_eq!(usage_fields(line), Some((4242, 12, 321)));
    }

    #[test]
    fn a_negative_count_is_zero_and_a_short_line_nothing() {
        let line = b"7 (x) R 1 7 7 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 100 -3 0\n";
        assert_eq!(usage_fields(line), Some((7, 0, 0)));
        assert_eq!(usage_fields(b"7 (x) R 1 7"), None);
        assert_eq!(usage_fields(b"no paren"), None);
    }
}
