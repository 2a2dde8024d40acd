//! Pure readers of the kernel's cgroup texts: `/proc/self/cgroup`,
//! `/proc/self/mountinfo`, `cpu.stat`, `memory.current`/`pids.current` and
//! `cgroup.events`. No I/O here, so every quirk is unit-tested with fakes.

use std::path::{Path, PathBuf};

/// The calling process's cgroup in the v2 hierarchy: the path of the `0::`
/// line of `/proc/self/cgroup` (relative to the hierarchy's root, or to the
/// cgroup namespace's root). None on a v1-only system.
pub fn own_v2_path(proc_self_cgroup: &str) -> Option<&str> {
    proc_self_cgroup
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .map(|p| p.strip_suffix(" (deleted)").unwrap_or(p))
        .filter(|p| p.starts_with('/'))
}

/// A cgroup2 mount: `root` is the cgroup path mounted (usually `/`),
/// `point` where it is mounted, `read_only` its per-mount flag.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mount {
    pub root: String,
    pub point: PathBuf,
    pub read_only: bool,
}

/// mountinfo escapes space, tab, newline and backslash as `\ooo`.
fn unescape(field: &str) -> String {
    let b = field.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            out.push((b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0'));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Every cgroup2 mount in a `/proc/self/mountinfo` text, in order. Fields:
/// `id parent major:minor root point options [optional...] - fstype source
/// superoptions`; the optional fields end at the lone `-`.
pub fn v2_mounts(mountinfo: &str) -> Vec<Mount> {
    let mut out = Vec::new();
    for line in mountinfo.lines() {
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        if right.split(' ').next() != Some("cgroup2") {
            continue;
        }
        let f: Vec<&str> = left.split(' ').collect();
        if f.len() < 6 {
            continue;
        }
        out.push(Mount {
            root: unescape(f[3]),
            point: PathBuf::from(unescape(f[4])),
            read_only: f[5].split(',').any(|o| o == "ro"),
        });
    }
    out
}

/// Where cgroup `cg` (a path as `/proc/self/cgroup` shows it) is in the
/// file system: under the first mount whose root contains it. A mount of a
/// sub-tree (a container's bind mount) shows only what is below its root.
pub fn fs_path(mounts: &[Mount], cg: &str) -> Option<(PathBuf, Mount)> {
    mounts.iter().find_map(|m| {
        let root = m.root.trim_end_matches('/');
        let rest = cg.strip_prefix(root)?;
        if !(rest.is_empty() || rest.starts_with('/')) {
            return None;
        }
        let rest = rest.trim_start_matches('/');
        let path = if rest.is_empty() {
            m.point.clone()
        } else {
            m.point.join(rest)
        };
        Some((path, m.clone()))
    })
}

/// The cgroup2 mount that holds `path` (a file-system path), if any.
pub fn mount_of<'a>(mounts: &'a [Mount], path: &Path) -> Option<&'a Mount> {
    mounts
        .iter()
        .filter(|m| path.starts_with(&m.point))
        .max_by_key(|m| m.point.as_os_str().len())
}

/// `key value` lines (cpu.stat, memory.stat, cgroup.events): the value of
/// `key`.
pub fn keyed(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(' ')?;
        (k == key).then(|| v.trim().parse().ok()).flatten()
    })
}

/// `cpu.stat`'s `usage_usec`: CPU time of every task that ever ran in the
/// cgroup (present in every v2 cgroup, cpu controller or not).
pub fn cpu_usage_usec(cpu_stat: &str) -> Option<u64> {
    keyed(cpu_stat, "usage_usec")
}

/// A one-number file (`memory.current`, `pids.current`).
pub fn single_u64(text: &str) -> Option<u64> {
    text.trim().parse().ok()
}

/// `cgroup.events`'s `populated`: whether any process is in the cgroup or
/// below it.
pub fn populated(events: &str) -> Option<bool> {
    keyed(events, "populated").map(|v| v != 0)
}

/// Whether a kernel release (`uname -r`: `6.18.44-fc-v595`) is at least
/// `major.minor`.
pub fn kernel_at_least(release: &str, major: u32, minor: u32) -> bool {
    let mut nums = release
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .map(|s| s.parse::<u32>().unwrap_or(0));
    let (maj, min) = (nums.next().unwrap_or(0), nums.next().unwrap_or(0));
    (maj, min) >= (major, minor)
}

/// The name of a child's cgroup: `<owner pid>-<owner start tick>-<seq>`, or
/// with a `d` in front when no guardian kills it at our death
/// (`parentDeathSignal: false`). The owner's start tick keeps the name of a
/// later process with the same pid apart.
pub fn child_name(owner_pid: i32, owner_tick: u64, seq: u64, guarded: bool) -> String {
    let d = if guarded { "" } else { "d" };
    format!("{d}{owner_pid}-{owner_tick}-{seq}")
}

/// The prefix every guarded child cgroup of this owner starts with.
pub fn guarded_prefix(owner_pid: i32, owner_tick: u64) -> String {
    format!("{owner_pid}-{owner_tick}-")
}

/// Whether `name` is one [`child_name`] could have made.
pub fn is_child_name(name: &str) -> bool {
    let name = name.strip_prefix('d').unwrap_or(name);
    let parts: Vec<&str> = name.split('-').collect();
    parts.len() == 3
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_path_is_the_v2_line() {
        let hybrid = "9:name=systemd:/\n4:memory:/x/y\n0::/\n";
        assert_eq!(own_v2_path(hybrid), Some("/"));
        let pure = "0::/user.slice/user-1000.slice/user@1000.service/app.slice/a.scope\n";
        assert_eq!(
            own_v2_path(pure),
            Some("/user.slice/user-1000.slice/user@1000.service/app.slice/a.scope")
        );
        assert_eq!(own_v2_path("4:memory:/\n1:cpu:/\n"), None);
        assert_eq!(own_v2_path("0::/gone (deleted)\n"), Some("/gone"));
        assert_eq!(own_v2_path(""), None);
    }

    const MOUNTINFO: &str = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime shared:9 - cgroup2 cgroup2 rw
50 23 0:38 /sub /mnt/my\\040cg ro,nosuid master:3 - cgroup2 cgroup2 rw,nsdelegate
";

    #[test]
    fn finds_cgroup2_mounts_only_with_escapes_and_flags() {
        let m = v2_mounts(MOUNTINFO);
        assert_eq!(m.len(), 2);
        assert_eq!(m[0].root, "/");
        assert_eq!(m[0].point, PathBuf::from("/sys/fs/cgroup/unified"));
        assert!(!m[0].read_only);
        assert_eq!(m[1].root, "/sub");
        assert_eq!(m[1].point, PathBuf::from("/mnt/my cg"));
        assert!(m[1].read_only);
        assert!(v2_mounts("garbage\n1 2 3 - cgroup2\n").is_empty());
    }

    #[test]
    fn maps_a_cgroup_path_into_the_file_system() {
        let m = v2_mounts(MOUNTINFO);
        let (p, _) = fs_path(&m, "/").unwrap();
        assert_eq!(p, PathBuf::from("/sys/fs/cgroup/unified"));
        let (p, _) = fs_path(&m, "/a/b").unwrap();
        assert_eq!(p, PathBuf::from("/sys/fs/cgroup/unified/a/b"));
        // Only the bind mount of /sub: /subway is not below it.
        let sub = &m[1..];
        assert_eq!(
            fs_path(sub, "/sub/x").unwrap().0,
            PathBuf::from("/mnt/my cg/x")
        );
        assert_eq!(fs_path(sub, "/sub").unwrap().0, PathBuf::from("/mnt/my cg"));
        assert!(fs_path(sub, "/subway").is_none());
        assert!(fs_path(&[], "/").is_none());
        let found = mount_of(&m, Path::new("/sys/fs/cgroup/unified/x")).unwrap();
        assert_eq!(found.root, "/");
        assert!(mount_of(&m, Path::new("/sys/fs/cgroup/memory")).is_none());
    }

    #[test]
    fn reads_cpu_memory_pids_and_events() {
        let cpu = "usage_usec 12345\nuser_usec 10000\nsystem_usec 2345\nnr_periods 0\n";
        assert_eq!(cpu_usage_usec(cpu), Some(12345));
        assert_eq!(cpu_usage_usec("user_usec 1\n"), None);
        assert_eq!(cpu_usage_usec("usage_usec x\n"), None);
        assert_eq!(single_u64("4096\n"), Some(4096));
        assert_eq!(single_u64("max\n"), None);
        assert_eq!(single_u64(""), None);
        assert_eq!(populated("populated 1\nfrozen 0\n"), Some(true));
        assert_eq!(populated("populated 0\nfrozen 0\n"), Some(false));
        assert_eq!(populated("frozen 0\n"), None);
        // A key that only starts like another does not count.
        assert_eq!(keyed("populated_x 1\npopulated 0\n", "populated"), Some(0));
    }

    #[test]
    fn compares_kernel_releases() {
        assert!(kernel_at_least("6.18.44-fc-v595", 5, 14));
        assert!(kernel_at_least("5.14.0", 5, 14));
        assert!(!kernel_at_least("5.13.19-generic", 5, 14));
        assert!(!kernel_at_least("4.19.0", 5, 7));
        assert!(!kernel_at_least("", 5, 7));
    }

    #[test]
    fn child_names_round_trip() {
        let n = child_name(1234, 98765, 7, true);
        assert_eq!(n, "1234-98765-7");
        assert!(n.starts_with(&guarded_prefix(1234, 98765)));
        let d = child_name(1234, 98765, 7, false);
        assert_eq!(d, "d1234-98765-7");
        assert!(!d.starts_with(&guarded_prefix(1234, 98765)));
        assert!(is_child_name(&n) && is_child_name(&d));
        for bad in [
            "", "procward", "1-2", "1-2-3-4", "x1-2-3", "1--3", "dd1-2-3", "1-2-3 ",
        ] {
            assert!(!is_child_name(bad), "{bad:?}");
        }
    }
}
