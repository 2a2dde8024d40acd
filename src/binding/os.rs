//! What this platform supports and what the kernel says of processes, for
//! `lib/os.js` (package-internal, not public API): the JS side asks here
//! rather than test its platform or read `/proc` itself. Written once for
//! every OS: where there is no `/proc`, `proc_info::facts` answers "cannot
//! tell" (null) and `platformFacts().procfs` is false.
//!
//! The scans and the long reads run on tokio's blocking threads and resolve
//! a promise: never on the JS thread.

use std::path::Path;

use napi::bindgen_prelude::{BigInt, PromiseRaw, ToNapiValue};
use napi::{Env, Result};
use napi_derive::napi;

use super::convert::to_pid;
use super::errors::{promise, throw, JsErr, Res};
use crate::cgroup::parse as cgroup_parse;
use crate::proc_info::{self, facts};

fn read_err(e: std::io::Error) -> JsErr {
    JsErr::os(&e, proc_info::INFO_CALL)
}

/// `f` on a blocking thread; a promise for its result (bad arguments, which
/// `f` checks, reject it as any other error does).
fn off_thread<'env, T, F>(env: &'env Env, f: F) -> Result<PromiseRaw<'env, T>>
where
    T: ToNapiValue + Send + 'static,
    F: FnOnce() -> Res<T> + Send + 'static,
{
    promise(env, async move {
        tokio::task::spawn_blocking(f)
            .await
            .map_err(|e| JsErr::coded("EUNKNOWN", e))?
    })
}

/// A file descriptor from JS: never negative.
fn to_fd(fd: i32) -> Res<i32> {
    if fd >= 0 {
        Ok(fd)
    } else {
        Err(JsErr::coded(
            "ERR_OUT_OF_RANGE",
            format!("fd must be >= 0, got {fd}"),
        ))
    }
}

fn to_port(port: f64) -> Res<u16> {
    if port.fract() == 0.0 && (1.0..=65535.0).contains(&port) {
        Ok(port as u16)
    } else {
        Err(JsErr::coded(
            "ERR_OUT_OF_RANGE",
            format!("port must be an integer in 1..=65535, got {port}"),
        ))
    }
}

#[napi(object)]
pub struct NativePlatformFacts {
    /// Node on Windows: signals are emulated (SIGBREAK, no SIGHUP raised),
    /// the console is written asynchronously.
    pub windows: bool,
    /// The process table can be read (Linux's `/proc`): sessions, groups,
    /// marks, sockets, the stray sweep, orphans to reap.
    pub procfs: bool,
}

/// What this platform supports, decided once, when the binary was built.
#[napi]
pub fn platform_facts() -> NativePlatformFacts {
    NativePlatformFacts {
        windows: cfg!(windows),
        procfs: facts::PROCFS,
    }
}

#[napi(object)]
pub struct NativeProcessStat {
    /// As `getProcessInfo` names it (`'sleeping'`, `'zombie'`, ...).
    pub state: String,
    /// Exists and has not exited (not a zombie).
    pub running: bool,
    pub ppid: i32,
    pub pgid: i32,
    pub session: i32,
    /// The controlling terminal's device number, 0 for none.
    pub tty_nr: i32,
    /// The terminal's foreground process group, -1 for none.
    pub tpgid: i32,
}

/// `pid`'s stat line, or null when it is gone (or there is no `/proc`).
#[napi]
pub fn process_stat(env: Env, pid: f64) -> Result<Option<NativeProcessStat>> {
    let pid = throw(&env, to_pid(pid))?;
    let st = throw(&env, facts::stat(pid).map_err(read_err))?;
    Ok(st.map(|(st, terminal)| NativeProcessStat {
        state: st.state.as_str().to_owned(),
        running: st.state.is_running(),
        ppid: st.ppid,
        pgid: st.pgid,
        session: st.session,
        tty_nr: terminal.tty_nr,
        tpgid: terminal.tpgid,
    }))
}

#[napi(object)]
pub struct NativeOwnStatus {
    pub pending: BigInt,
    pub shared_pending: BigInt,
    pub ignored: BigInt,
    pub caught: BigInt,
    pub cap_eff: BigInt,
}

/// This process's signal masks (bit n-1 for signal n) and effective
/// capabilities, or null where they cannot be read.
#[napi]
pub fn own_status(env: Env) -> Result<Option<NativeOwnStatus>> {
    let st = throw(&env, facts::own_status().map_err(read_err))?;
    Ok(st.map(|s| NativeOwnStatus {
        pending: s.pending.into(),
        shared_pending: s.shared_pending.into(),
        ignored: s.ignored.into(),
        caught: s.caught.into(),
        cap_eff: s.cap_eff.into(),
    }))
}

/// `pid`'s name (comm), or null.
#[napi]
pub fn process_comm(env: Env, pid: f64) -> Result<Option<String>> {
    let pid = throw(&env, to_pid(pid))?;
    throw(&env, facts::comm(pid).map_err(read_err))
}

/// The uid that owns `pid`, or null.
#[napi]
pub fn process_owner(env: Env, pid: f64) -> Result<Option<u32>> {
    let pid = throw(&env, to_pid(pid))?;
    throw(&env, facts::owner(pid).map_err(read_err))
}

/// `pid`'s command line as argv, or null when it is gone.
#[napi(ts_return_type = "Promise<string[] | null>")]
pub fn process_argv<'env>(
    env: &'env Env,
    pid: f64,
) -> Result<PromiseRaw<'env, Option<Vec<String>>>> {
    off_thread(env, move || facts::argv(to_pid(pid)?).map_err(read_err))
}

#[napi(object)]
pub struct NativeCgroupOf {
    /// The cgroup's directory under the cgroup2 mount.
    pub path: String,
    /// Its inode: the cgroup id.
    pub id: f64,
}

/// `pid`'s cgroup v2, or null where it has none to tell (gone, cgroup v1
/// only, not under our view of the hierarchy). Its `0::` line placed under
/// the cgroup2 mount by `cgroup`'s own readers, as that module places the
/// cgroups it makes: the path is the one `spawnSupervised` reports, on a
/// hybrid host (the v2 tree at `/sys/fs/cgroup/unified`) too.
#[napi(ts_return_type = "Promise<NativeCgroupOf | null>")]
pub fn process_cgroup<'env>(
    env: &'env Env,
    pid: f64,
) -> Result<PromiseRaw<'env, Option<NativeCgroupOf>>> {
    off_thread(env, move || {
        let pid = to_pid(pid)?;
        let (Some(own), Some(mounts)) = (
            facts::cgroup_text(pid).map_err(read_err)?,
            facts::mountinfo().map_err(read_err)?,
        ) else {
            return Ok(None);
        };
        let Some(cg) = cgroup_parse::own_v2_path(&own) else {
            return Ok(None);
        };
        let Some((dir, _)) = cgroup_parse::fs_path(&cgroup_parse::v2_mounts(&mounts), cg) else {
            return Ok(None);
        };
        let id = facts::inode(&dir).map_err(|e| JsErr::os(&e, "stat").path(&dir))?;
        Ok(id.map(|id| NativeCgroupOf {
            path: dir.display().to_string(),
            id: id as f64,
        }))
    })
}

/// Whether a thread of this process other than the main (JS) one is
/// runnable now; false where that cannot be told.
#[napi]
pub fn other_threads_runnable(env: Env) -> Result<bool> {
    throw(&env, facts::other_threads_runnable().map_err(read_err))
}

/// This process's pid namespace (the inode of `/proc/self/ns/pid`: what
/// `readlink` shows as `pid:[N]`), or null where there is none to tell. A
/// record's pids mean something only in the namespace that wrote them.
#[napi]
pub fn own_pid_namespace(env: Env) -> Result<Option<f64>> {
    let ino = throw(
        &env,
        facts::inode(Path::new("/proc/self/ns/pid")).map_err(read_err),
    )?;
    // An inode number is far below 2^53 (the kernel's proc inodes are 32-bit).
    Ok(ino.map(|i| i as f64))
}

/// Where the cgroup2 hierarchy is mounted, or null.
#[napi]
pub fn cgroup2_mount(env: Env) -> Result<Option<String>> {
    let mounts = throw(&env, facts::mountinfo().map_err(read_err))?;
    Ok(mounts.and_then(|text| {
        let first = cgroup_parse::v2_mounts(&text).into_iter().next()?;
        Some(first.point.display().to_string())
    }))
}

/// A non-blocking file description of our own for the terminal on our
/// `fd`, as a new fd the caller owns (and closes); null when `fd` is no
/// terminal or cannot be opened anew here.
#[napi]
pub fn open_own_terminal(env: Env, fd: i32) -> Result<Option<i32>> {
    let fd = throw(&env, to_fd(fd))?;
    throw(
        &env,
        facts::open_own_terminal(fd).map_err(|e| JsErr::os(&e, "open")),
    )
}

/// The inodes (decimal strings) of the TCP sockets listening on `port` in
/// our network namespace, or null where that cannot be told.
#[napi(ts_return_type = "Promise<string[] | null>")]
pub fn port_listeners<'env>(
    env: &'env Env,
    port: f64,
) -> Result<PromiseRaw<'env, Option<Vec<String>>>> {
    off_thread(env, move || {
        Ok(facts::listening_inodes(to_port(port)?)
            .map(|inodes| inodes.into_iter().map(|i| i.to_string()).collect()))
    })
}

/// Whether `pid` or a member of its group `pgid` holds a socket listening
/// on `port`: true, false, or null where it cannot be told.
#[napi(ts_return_type = "Promise<boolean | null>")]
pub fn child_listens<'env>(
    env: &'env Env,
    pid: f64,
    pgid: Option<f64>,
    port: f64,
) -> Result<PromiseRaw<'env, Option<bool>>> {
    off_thread(env, move || {
        let pid = to_pid(pid)?;
        let pgid = pgid.map(to_pid).transpose()?.map(|p| p.as_raw());
        Ok(facts::child_listens(pid, pgid, to_port(port)?))
    })
}

/// Was our connection from local port `peer` to `port` accepted by `pid`
/// or its group `pgid`? null where it cannot be told.
#[napi(ts_return_type = "Promise<boolean | null>")]
pub fn child_accepted<'env>(
    env: &'env Env,
    pid: f64,
    pgid: Option<f64>,
    port: f64,
    peer: f64,
) -> Result<PromiseRaw<'env, Option<bool>>> {
    off_thread(env, move || {
        let pid = to_pid(pid)?;
        let pgid = pgid.map(to_pid).transpose()?.map(|p| p.as_raw());
        Ok(facts::child_accepted(
            pid,
            pgid,
            to_port(port)?,
            to_port(peer)?,
        ))
    })
}

#[napi(object)]
pub struct NativeMarked {
    pub pid: i32,
    pub ppid: i32,
    pub pgid: i32,
    pub session: i32,
    pub identity: String,
}

/// The running processes whose environment holds `entry` ("NAME=value"),
/// each with the identity read with its mark.
#[napi(ts_return_type = "Promise<NativeMarked[]>")]
pub fn marked_processes<'env>(
    env: &'env Env,
    entry: String,
) -> Result<PromiseRaw<'env, Vec<NativeMarked>>> {
    off_thread(env, move || {
        let found = facts::marked_processes(entry.as_bytes()).map_err(read_err)?;
        Ok(found
            .into_iter()
            .map(|m| NativeMarked {
                pid: m.pid,
                ppid: m.ppid,
                pgid: m.pgid,
                session: m.session,
                identity: m.identity.encode(),
            })
            .collect())
    })
}

#[napi(object)]
pub struct NativeTreeUsage {
    /// The summed RSS, in bytes.
    pub memory_bytes: f64,
    /// The CPU time of its live processes, in microseconds.
    pub cpu_usec: f64,
    pub processes: u32,
}

impl From<facts::TreeUsage> for NativeTreeUsage {
    fn from(u: facts::TreeUsage) -> Self {
        // Bytes and microseconds far below 2^53.
        NativeTreeUsage {
            memory_bytes: u.rss_bytes as f64,
            cpu_usec: u.cpu_usec as f64,
            processes: u.processes,
        }
    }
}

/// What process group `pgid`'s members use now, or null when none is left
/// (or there is no `/proc`). A scan of the table: off the JS thread.
#[napi(ts_return_type = "Promise<NativeTreeUsage | null>")]
pub fn group_usage<'env>(
    env: &'env Env,
    pgid: f64,
) -> Result<PromiseRaw<'env, Option<NativeTreeUsage>>> {
    off_thread(env, move || {
        let pgid = to_pid(pgid)?.as_raw();
        Ok(facts::group_usage(pgid).map_err(read_err)?.map(Into::into))
    })
}

/// What the processes of cgroup `dir` use now, or null when it is gone or
/// empty.
#[napi(ts_return_type = "Promise<NativeTreeUsage | null>")]
pub fn cgroup_usage<'env>(
    env: &'env Env,
    dir: String,
) -> Result<PromiseRaw<'env, Option<NativeTreeUsage>>> {
    off_thread(env, move || {
        let usage = facts::cgroup_usage(Path::new(&dir))
            .map_err(|e| JsErr::os(&e, "read").path(Path::new(&dir)))?;
        Ok(usage.map(Into::into))
    })
}

#[napi(object)]
pub struct NativePeerCred {
    pub pid: i32,
    pub uid: u32,
    pub gid: u32,
}

/// The pid, uid and gid the kernel recorded for the peer of `fd`, a
/// connected unix socket of ours (borrowed, not closed): null where it
/// cannot tell (not Linux). Throws where `fd` is no such socket.
#[napi]
pub fn peer_credentials(env: Env, fd: i32) -> Result<Option<NativePeerCred>> {
    let fd = throw(&env, to_fd(fd))?;
    let cred = throw(
        &env,
        facts::peer_cred(fd).map_err(|e| JsErr::os(&e, "getsockopt")),
    )?;
    Ok(cred.map(|c| NativePeerCred {
        pid: c.pid,
        uid: c.uid,
        gid: c.gid,
    }))
}
