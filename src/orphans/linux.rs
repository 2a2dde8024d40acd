//! Linux: the children of every thread of this process, from
//! `/proc/self/task/<tid>/children` (a re-parented orphan is the child of
//! whichever of our threads the kernel picked), or, on a kernel built
//! without `CONFIG_PROC_CHILDREN`, from a scan of every `/proc/<pid>/stat`
//! for our pid as parent. Each child not on the caller's list is waited for
//! with `WNOHANG`: a zombie is reaped, a live one is left alone.

use std::io;

use crate::pid::Pid;
use crate::proc_info;

/// Makes this process a child subreaper: orphans of its descendants are
/// re-parented to it rather than to the namespace's init.
pub fn become_subreaper() -> io::Result<()> {
    // SAFETY: prctl with integer arguments only; changes a flag of ours.
    let ret = unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
    if ret != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Reaps every exited child of this process whose pid is not in `own`.
/// Returns the pids reaped.
pub fn reap(own: &[i32]) -> io::Result<Vec<i32>> {
    let mut reaped = Vec::new();
    for pid in children()? {
        if own.contains(&pid) {
            continue;
        }
        let mut status = 0;
        // SAFETY: waits for one child of ours by pid, without blocking;
        // `status` is ours to fill.
        let ret = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if ret == pid {
            reaped.push(pid);
        }
        // 0: still running. -1 (ECHILD): reaped meanwhile by its own
        // watcher, or not ours after all; nothing to do either way.
    }
    Ok(reaped)
}

/// This process's children, as the kernel lists them now.
fn children() -> io::Result<Vec<i32>> {
    let mut out = Vec::new();
    let mut listed = false;
    for task in std::fs::read_dir("/proc/self/task")?.flatten() {
        match std::fs::read_to_string(task.path().join("children")) {
            Ok(text) => {
                listed = true;
                out.extend(
                    text.split_ascii_whitespace()
                        .filter_map(|p| p.parse::<i32>().ok()),
                );
            }
            // A thread gone meanwhile; or no such file at all.
            Err(_) => continue,
        }
    }
    if listed {
        return Ok(out);
    }
    scan_for_children()
}

/// Every process whose parent is this process, from /proc/<pid>/stat.
fn scan_for_children() -> io::Result<Vec<i32>> {
    let me = std::process::id() as i32;
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc")?.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        let Ok(pid) = Pid::from_raw(pid) else {
            continue;
        };
        if let Ok(Some(st)) = proc_info::stat_of(pid) {
            if st.ppid == me {
                out.push(st.pid);
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    // Children reaped by `reap` itself, which clippy cannot see. Every other
    // child of this test process (other tests run beside us) goes on the
    // own list: only `exited` may be taken.
    #[allow(clippy::zombie_processes)]
    #[test]
    fn reaps_an_exited_child_not_on_the_list_and_leaves_the_listed_and_the_live() {
        let exited = Command::new("true").spawn().unwrap();
        let listed = Command::new("true").spawn().unwrap();
        let mut live = Command::new("sleep").arg("30").spawn().unwrap();
        let (exited, listed) = (exited.id() as i32, listed.id() as i32);
        // Until both are zombies.
        let zombie = |pid: i32| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .map(|s| s[s.rfind(')').unwrap() + 2..].starts_with('Z'))
                .unwrap_or(false)
        };
        let t0 = std::time::Instant::now();
        while !(zombie(exited) && zombie(listed)) && t0.elapsed().as_secs() < 10 {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let own: Vec<i32> = children()
            .unwrap()
            .into_iter()
            .filter(|&p| p != exited)
            .collect();
        assert!(own.contains(&listed) && own.contains(&(live.id() as i32)));
        let reaped = reap(&own).unwrap();
        assert_eq!(reaped, vec![exited]);
        assert!(zombie(listed), "a listed child is left for its owner");
        assert!(std::fs::metadata(format!("/proc/{exited}")).is_err());
        // The listed one is its owner's to reap; the live one is ours to stop.
        let mut status = 0;
        // SAFETY: reaps our own child by pid.
        assert_eq!(unsafe { libc::waitpid(listed, &mut status, 0) }, listed);
        live.kill().unwrap();
        live.wait().unwrap();
    }

    #[test]
    fn the_scan_finds_the_children_the_kernel_lists() {
        let mut child = Command::new("sleep").arg("30").spawn().unwrap();
        let pid = child.id() as i32;
        assert!(scan_for_children().unwrap().contains(&pid));
        assert!(children().unwrap().contains(&pid));
        child.kill().unwrap();
        child.wait().unwrap();
    }
}
