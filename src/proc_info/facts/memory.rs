//! The memory a daemon's tree uses now, as the sum of its processes'
//! resident sets (RSS): the members of a process group, or the processes of
//! a cgroup (`cgroup.procs`). A group's `memoryLimit` samples it (at most
//! every 250 ms, off the JS thread) where the kernel cannot enforce the
//! limit itself (no memory controller delegated to the daemon's cgroup).
//!
//! Each process is one read of `/proc/<pid>/stat`: its group (field 5) and
//! its RSS in pages (field 24) are on that one line, so a scan of the table
//! costs one read per process. Pages shared by two members (a fork's
//! copy-on-write pages, a shared library) count once per member, as `ps`
//! and pm2 count them: the sum errs high, never low.
//!
//! Elsewhere there is no `/proc`: `None`, "cannot tell".

use std::io;
use std::path::Path;

/// Field 5 (pgrp) and field 24 (rss, in pages) of a stat line; `None` for a
/// line that is not one. Everything after the LAST `)` is the numeric
/// fields (the name, field 2, may hold anything, `)` too).
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
fn group_and_rss(line: &[u8]) -> Option<(i32, u64)> {
    let close = line.iter().rposition(|&b| b == b')')?;
    let rest = std::str::from_utf8(&line[close + 1..]).ok()?;
    // proc(5)'s numbers are 1-based; `fields` starts at field 3.
    let mut fields = rest.split_ascii_whitespace();
    let pgrp = fields.nth(5 - 3)?.parse::<i32>().ok()?;
    let rss = fields.nth(24 - 6)?.parse::<i64>().ok()?;
    // A process in its exit may show a negative count for a moment.
    Some((pgrp, rss.max(0) as u64))
}

#[cfg(target_os = "linux")]
mod imp {
    use std::io;
    use std::path::Path;

    use super::group_and_rss;
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

    /// `/proc/<pid>/stat`'s group and RSS pages; `None` when it has gone
    /// (or is gone in its own way: a pid that cannot be read is no member).
    fn read(pid: &str) -> Option<(i32, u64)> {
        let line = std::fs::read(format!("/proc/{pid}/stat")).ok()?;
        group_and_rss(&line)
    }

    pub fn group_rss(pgid: i32) -> io::Result<Option<u64>> {
        let mut pages = 0u64;
        let mut members = 0usize;
        for entry in std::fs::read_dir("/proc")? {
            let Ok(entry) = entry else { continue };
            let name = entry.file_name();
            let Some(pid) = name
                .to_str()
                .filter(|s| s.bytes().all(|b| b.is_ascii_digit()))
            else {
                continue;
            };
            if let Some((_, rss)) = read(pid).filter(|&(group, _)| group == pgid) {
                pages += rss;
                members += 1;
            }
        }
        Ok((members > 0).then(|| pages * page_size()))
    }

    pub fn cgroup_rss(dir: &Path) -> io::Result<Option<u64>> {
        let procs = match std::fs::read_to_string(dir.join("cgroup.procs")) {
            Ok(text) => text,
            Err(e) if is_gone(&e) => return Ok(None),
            Err(e) => return Err(e),
        };
        let mut pages = 0u64;
        let mut members = 0usize;
        for pid in procs.lines().map(str::trim).filter(|l| !l.is_empty()) {
            if let Some((_, rss)) = read(pid) {
                pages += rss;
                members += 1;
            }
        }
        Ok((members > 0).then(|| pages * page_size()))
    }
}

#[cfg(not(target_os = "linux"))]
mod imp {
    use std::io;
    use std::path::Path;

    pub fn group_rss(_pgid: i32) -> io::Result<Option<u64>> {
        Ok(None)
    }

    pub fn cgroup_rss(_dir: &Path) -> io::Result<Option<u64>> {
        Ok(None)
    }
}

/// The summed RSS, in bytes, of the processes in process group `pgid` now
/// (zombies count 0); `None` when none is left, or where there is no
/// `/proc`. An error only when `/proc` cannot be listed.
pub fn group_rss(pgid: i32) -> io::Result<Option<u64>> {
    imp::group_rss(pgid)
}

/// The summed RSS, in bytes, of the processes of cgroup `dir` (a directory
/// under the cgroup2 mount) now; `None` when it is gone or empty.
pub fn cgroup_rss(dir: &Path) -> io::Result<Option<u64>> {
    imp::cgroup_rss(dir)
}

#[cfg(test)]
mod tests {
    use super::group_and_rss;

    #[test]
    fn reads_group_and_rss_after_the_last_paren() {
        // A name with `)` and spaces in it; fields 3.. as the kernel writes them.
        let mut line =
            b"4242 (a) Z 1 (b) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 99 1000000 "
                .to_vec();
        // field 24 (rss) = 321 pages, then more fields.
        line.extend_from_slice(b"321 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n");
        assert_eq!(group_and_rss(&line), Some((4242, 321)));
    }

    #[test]
    fn a_negative_count_is_zero_and_a_short_line_nothing() {
        let line = b"7 (x) R 1 7 7 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 100 -3 0\n";
        assert_eq!(group_and_rss(line), Some((7, 0)));
        assert_eq!(group_and_rss(b"7 (x) R 1 7"), None);
        assert_eq!(group_and_rss(b"no paren"), None);
    }
}
