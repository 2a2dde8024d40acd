//! The guardian: kills this process's contained children when this process
//! dies, by any means — SIGKILL and a crash included, where no code of ours
//! runs. `PR_SET_PDEATHSIG` cannot do it: it reaches only the child itself,
//! and the kernel clears it when a daemon changes its uid.
//!
//! Mechanism: one small `/bin/sh` per process, in a session of its own (a
//! terminal's Ctrl-C or a kill of our process group does not reach it),
//! reads a pipe whose only write end this process holds (close-on-exec, so
//! no child inherits it). Its arguments, and each line it reads later, name
//! a parent directory our children's cgroups live in. When the pipe reaches EOF — the kernel closes our end
//! as we die — it writes `1` to `cgroup.kill` of every cgroup there whose
//! name starts with our prefix (`<pid>-<start tick>-`, unique to this
//! process for the boot), then removes them once empty, with the cgroups a
//! child made below its own (deepest first: `rmdir` of a cgroup that has
//! children fails). A child spawned with `parentDeathSignal: false` is
//! named without the prefix and left alone.
//!
//! It ignores SIGTERM, SIGINT and SIGHUP: a service manager stopping our
//! unit sends SIGTERM to every process in it, the guardian included, and it
//! must keep guarding until its EOF (our death), then do its work. It is
//! born ignoring them (the spawn sets SIG_IGN, which `execve` keeps): a
//! shell's `trap` would come too late for a stop sent the moment the unit
//! started, while the shell was still loading. Only SIGKILL (or
//! `cgroup.kill` of the unit, which takes our children too) ends it early.
//!
//! Why a shell and not a fork of this process: a fork of Node without exec
//! would pin a copy-on-write image of the whole heap for as long as it
//! lives, and would show Node's environment; `sh` costs about a megabyte,
//! gets an environment of its own (just PATH), and is started once, through
//! the same clone-and-exec path as every child. Its removal loop after our
//! death retries `rmdir` every 100 ms for at most 10 s: it runs only then,
//! and a shell has no way to wait on `cgroup.events`.
//!
//! The guardian is our child: a native watcher reaps it if it ever dies
//! before us (killed by hand, or by the OOM killer), and a new one is
//! started at once and told every directory again, so our children are not
//! left unguarded until the next contained spawn. At most one replacement a
//! second that way (a guardian that dies as soon as it starts must not turn
//! into a fork loop): one that dies sooner is replaced by a timer when the
//! second is up (and a failed start is retried each second), never left to
//! the next contained spawn, which replaces a dead one anyway.

use std::collections::BTreeSet;
use std::io::{self, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::exit_watch::unix::{register, watch, Watched};
use crate::spawn::{self, Command, Environment, Stdio};

/// Where the guardian's shell finds [`SCRIPT`] (see `start`).
const SCRIPT_VAR: &str = "PROCWARD_GUARDIAN_SCRIPT";

const SCRIPT: &str = r#"trap '' TERM INT HUP
p=$1
shift
dirs=
for d in "$@"; do dirs="$dirs$d
"; done
while IFS= read -r d; do dirs="$dirs$d
"; done
each() {
  printf '%s' "$dirs" | while IFS= read -r d; do
    for c in "$d/$p"*; do [ -d "$c" ] && "$@" "$c"; done
  done 2>/dev/null
}
kill1() { echo 1 > "$1/cgroup.kill"; }
rm1() (
  for s in "$1"/*/; do [ -d "$s" ] && rm1 "${s%/}"; done
  rmdir "$1" 2>/dev/null || echo busy
)
each kill1
n=0
while [ -n "$(each rm1)" ] && [ "$n" -lt 100 ]; do
  sleep 0.1 2>/dev/null || sleep 1
  n=$((n+1))
done
"#;

struct Guardian {
    write: std::fs::File,
    watched: Arc<Watched>,
}

struct State {
    running: Option<Guardian>,
    dirs: BTreeSet<PathBuf>,
    /// This process's guarded name prefix, once a guardian was asked for.
    prefix: Option<String>,
    /// When a dead guardian was last replaced from its exit watcher.
    replaced: Option<Instant>,
}

static STATE: Mutex<State> = Mutex::new(State {
    running: None,
    dirs: BTreeSet::new(),
    prefix: None,
    replaced: None,
});

/// Starts a guardian that knows every directory in `state`. They go in its
/// arguments, so it knows them from its first instruction: were they sent
/// down the pipe after the spawn, our death in between would leave it an
/// EOF and nothing to kill. (A path that is not UTF-8 cannot be an
/// argument here; it goes down the pipe.)
fn start_knowing(state: &State, prefix: &str) -> io::Result<Guardian> {
    let (known, other): (Vec<&PathBuf>, Vec<&PathBuf>) =
        state.dirs.iter().partition(|d| d.to_str().is_some());
    let known = known.iter().filter_map(|d| d.to_str()).map(String::from);
    let mut g = start(prefix, known)?;
    for d in other {
        send(&mut g, d)?;
    }
    Ok(g)
}

/// Whether a replacer thread is on its way (so a guardian that keeps dying
/// makes one thread, not one per death).
static REPLACING: AtomicBool = AtomicBool::new(false);

/// At most one replacement a second: a guardian that dies as soon as it
/// starts must not turn into a fork loop.
const REPLACE_EVERY: Duration = Duration::from_secs(1);

/// A guardian died while we live: have the next one started, on a thread of
/// its own (the exit watcher runs on the runtime, which a spawn must not
/// hold up).
fn on_guardian_exit() {
    if REPLACING.swap(true, Ordering::AcqRel) {
        return;
    }
    let started = std::thread::Builder::new()
        .name("procward-guardian".into())
        .spawn(replace_dead);
    if started.is_err() {
        // No thread: the next contained spawn replaces it.
        REPLACING.store(false, Ordering::Release);
    }
}

/// Starts the next guardian as soon as the rate limit allows (a timer, not
/// the next contained spawn: a long-running daemon must not stay unguarded),
/// and again a second later while a start fails.
fn replace_dead() {
    loop {
        let wait = match try_replace() {
            None => {
                REPLACING.store(false, Ordering::Release);
                // One that died after try_replace looked, but before the flag
                // was down, found it up and left its replacement to us.
                if guardian_alive() || REPLACING.swap(true, Ordering::AcqRel) {
                    return;
                }
                continue;
            }
            Some(wait) => wait,
        };
        std::thread::sleep(wait);
    }
}

fn guardian_alive() -> bool {
    let state = STATE.lock().unwrap_or_else(|e| e.into_inner());
    state.prefix.is_none()
        || state.dirs.is_empty()
        || state
            .running
            .as_ref()
            .is_some_and(|g| !g.watched.has_exited())
}

/// One attempt: None when a guardian runs (or none is needed); else how
/// long to wait before the next attempt.
fn try_replace() -> Option<Duration> {
    let mut state = STATE.lock().unwrap_or_else(|e| e.into_inner());
    let alive = state
        .running
        .as_ref()
        .is_some_and(|g| !g.watched.has_exited());
    let prefix = state.prefix.clone()?;
    if alive || state.dirs.is_empty() {
        return None;
    }
    if let Some(since) = state.replaced.map(|t| t.elapsed()) {
        if since < REPLACE_EVERY {
            return Some(REPLACE_EVERY - since);
        }
    }
    state.replaced = Some(Instant::now());
    state.running = None;
    match start_knowing(&state, &prefix) {
        Ok(g) => {
            state.running = Some(g);
            None
        }
        Err(_) => Some(REPLACE_EVERY),
    }
}

/// The guardian's PATH (for `rmdir` and `sleep`, which no shell has built
/// in): the usual directories, then ours, for a system that has them
/// elsewhere (NixOS has only `/bin/sh` in `/bin`). Its `cgroup.kill` is the
/// shell's own `echo`, so the kill never depends on it.
fn guardian_path() -> std::ffi::OsString {
    let mut path = std::ffi::OsString::from("/usr/bin:/bin");
    if let Some(ours) = std::env::var_os("PATH").filter(|p| !p.is_empty()) {
        path.push(":");
        path.push(ours);
    }
    path
}

fn start(prefix: &str, dirs: impl Iterator<Item = String>) -> io::Result<Guardian> {
    // The script goes in the environment, not the command line: `ps` and
    // `systemctl status` show the guardian as one short line that names it
    // (it was the whole script, some 900 characters), and exec hands it
    // over as atomically as an argument.
    let mut args = vec![
        "-c".into(),
        format!("eval \"${SCRIPT_VAR}\""),
        "procward-guardian".into(),
        prefix.into(),
    ];
    args.extend(dirs);
    let cmd = Command {
        program: "/bin/sh".into(),
        args,
        env: Environment::Set(
            vec![
                ("PATH".into(), guardian_path()),
                (SCRIPT_VAR.into(), SCRIPT.into()),
            ]
            .into(),
        ),
        cwd: Some("/".into()),
        stdio: [Stdio::Pipe, Stdio::Ignore, Stdio::Ignore],
        process_group: false,
        death_signal: None,
        notify_fd: None,
        listen: None,
        uid: None,
        gid: None,
        umask: None,
        argv0: Some("procward-guardian".into()),
        new_session: true,
        ignore_stop_signals: true,
        take_terminal: false,
        cgroup: None,
    };
    let mut child = spawn::spawn(&cmd, true).map_err(|e| match e {
        spawn::SpawnError::Os { err, .. } | spawn::SpawnError::File { err, .. } => err,
        spawn::SpawnError::Invalid(m) | spawn::SpawnError::Unsupported(m) => io::Error::other(m),
    })?;
    let write: OwnedFd = child.pipes[0]
        .take()
        .ok_or_else(|| io::Error::other("no pipe to the guardian"))?;
    // Never block the JS thread on a guardian that stopped reading.
    // SAFETY: F_GETFL/F_SETFL on an fd we own.
    let flags = unsafe { libc::fcntl(write.as_raw_fd(), libc::F_GETFL) };
    // SAFETY: as above.
    unsafe { libc::fcntl(write.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK) };
    let watched = register(
        child.pid,
        None,
        false,
        crate::proc_info::IdentitySeed::default(),
        child.pidfd.take(),
    );
    // Reaped natively whenever it ends; nothing to tell JS, but a new one
    // to start (our own death ends no watcher: nothing runs then).
    let on_exit = Box::new(|_| on_guardian_exit());
    if let Err(e) = watch(&watched, on_exit) {
        let _ = crate::sys::kill(child.pid, crate::pid::Signal::KILL);
        let _ = crate::sys::waitid_pid(child.pid, libc::WEXITED);
        return Err(e);
    }
    Ok(Guardian {
        write: std::fs::File::from(write),
        watched,
    })
}

fn send(g: &mut Guardian, dir: &Path) -> io::Result<()> {
    let mut line = dir.as_os_str().as_encoded_bytes().to_vec();
    line.push(b'\n');
    g.write.write_all(&line)
}

/// Makes sure the guardian runs and knows `dir`, before a child is spawned
/// there. `prefix`: this process's guarded name prefix.
pub fn guard(dir: &Path, prefix: &str) -> io::Result<()> {
    if dir.as_os_str().as_encoded_bytes().contains(&b'\n') {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "a cgroup parent path with a newline cannot be guarded",
        ));
    }
    let mut state = STATE.lock().unwrap_or_else(|e| e.into_inner());
    // Dead (a zombie counts: `has_exited` peeks with WNOWAIT) is replaced,
    // and the new one is told every directory again. One retry: a write
    // that fails with EPIPE (no reader left) means it died just now.
    for attempt in 0..2 {
        let alive = state
            .running
            .as_ref()
            .is_some_and(|g| !g.watched.has_exited());
        let res: io::Result<()> = (|| {
            if state.prefix.is_none() {
                state.prefix = Some(prefix.to_owned());
            }
            if !alive {
                state.running = None;
                let g = start_knowing(&state, prefix)?;
                state.running = Some(g);
            }
            if !state.dirs.contains(dir) {
                let g = state.running.as_mut().expect("started above");
                send(g, dir)?;
                state.dirs.insert(dir.to_path_buf());
            }
            Ok(())
        })();
        match res {
            Ok(()) => return Ok(()),
            // EPIPE: it died. Anything else (EAGAIN: it stopped reading)
            // keeps it: closing its pipe would make it kill our children.
            Err(e) if attempt == 1 || e.raw_os_error() != Some(libc::EPIPE) => return Err(e),
            Err(_) => state.running = None,
        }
    }
    Ok(())
}
