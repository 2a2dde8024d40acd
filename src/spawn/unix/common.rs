//! Preparing a spawn, on the calling thread: the program found through the
//! child's PATH, argv and envp as C strings, stdio opened, the readiness
//! pipe made. Everything that can fail for the caller's reasons (bad path,
//! missing cwd, unopenable stdio file) fails here, before any process
//! exists. What comes out ([`Prepared`]) is owned, so it can cross to the
//! spawner thread, and is all the child reads between `clone` and `exec`.
//! None of it may wait on another process (see `stdio` for the files).

use std::ffi::{CString, OsString};
use std::io;
use std::os::fd::{IntoRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::super::{Command, Environment, SpawnError};
use super::stage::Stage;
use super::stdio::{above_stdio, open_stdio, ChildFd};
use crate::pid::{Pid, Signal};

/// Where a contained child starts: its cgroup's directory (for `clone3`'s
/// `CLONE_INTO_CGROUP`, or its `cgroup.procs`, which the pre-exec child
/// writes itself into where clone3 cannot). The caller keeps the directory
/// open until `spawn` returns.
#[derive(Clone, Debug)]
pub struct IntoCgroup {
    pub dir: RawFd,
}

/// The parent's end of a `'pipe'` stdio or of the readiness pipe.
pub type Pipe = OwnedFd;

/// The fd number JS takes a pipe end as (it owns it from then on).
pub fn pipe_into_raw(p: Pipe) -> i32 {
    p.into_raw_fd()
}

/// Everything the spawner thread needs, owned, so it can cross threads.
pub struct Prepared {
    pub(super) path: CString,
    pub(super) argv: Vec<CString>,
    pub(super) envp: Vec<CString>,
    pub(super) cwd: Option<CString>,
    pub(super) child_stdio: [ChildFd; 3],
    pub(super) process_group: bool,
    pub(super) death_signal: Option<Signal>,
    /// (write end, fd number in the child).
    pub(super) notify: Option<(OwnedFd, i32)>,
    pub(super) uid: Option<u32>,
    pub(super) gid: Option<u32>,
    pub(super) umask: Option<u32>,
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    pub(super) new_session: bool,
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    pub(super) ignore_stop_signals: bool,
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    pub(super) take_terminal: bool,
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    pub(super) cgroup: Option<IntoCgroup>,
    /// This process (`getpid`, once per spawn): the child's death-signal
    /// check compares its parent with it, and the main-thread check too.
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    pub(super) parent_pid: Pid,
    /// Copies of `Command::listen`'s sockets, above every fd number the
    /// child puts anything at (so no dup2 of the child overwrites one before
    /// it is copied); the child puts them at 3, 4, … The environment has
    /// `LISTEN_FDS` and `LISTEN_FDNAMES` already; `LISTEN_PID` is the
    /// child's to write.
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    pub(super) listen: Vec<OwnedFd>,
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    pub(super) listen_blocking: bool,
}

fn cstring(s: &str, what: &str) -> Result<CString, SpawnError> {
    CString::new(s).map_err(|_| SpawnError::Invalid(format!("{what} must not contain NUL bytes")))
}

fn is_executable_file(path: &Path) -> Option<bool> {
    let meta = std::fs::metadata(path).ok()?;
    if !meta.is_file() {
        return Some(false);
    }
    let c = CString::new(path.as_os_str().as_bytes()).ok()?;
    // SAFETY: access takes a NUL-terminated path we own.
    Some(unsafe { libc::access(c.as_ptr(), libc::X_OK) } == 0)
}

/// glibc's `execvp` searches this when the environment has no PATH.
const DEFAULT_PATH: &[u8] = b"/bin:/usr/bin";

/// PATH lookup as libuv's child does it on Linux, but in the parent: libuv
/// calls `chdir(cwd)` and then `execvp`, so a relative PATH entry (or an empty
/// one, the working directory) and a command containing `/` are relative to
/// the *child's* cwd, and the PATH is the first `PATH=` entry of the child's
/// environment, as its `getenv` sees it.
///
/// The returned path is what the child passes to `execve` after its own
/// `chdir`, so it stays relative where libuv's would; only the existence
/// checks here join it to `cwd` (itself relative to our cwd when relative).
/// A command without `/` that is found nowhere is ENOENT before any process
/// exists; one found only without execute permission is EACCES.
fn resolve(program: &str, envp: &[CString], cwd: Option<&Path>) -> Result<PathBuf, SpawnError> {
    if program.contains('/') {
        return Ok(PathBuf::from(program));
    }
    let path_var = envp
        .iter()
        .find_map(|e| e.as_bytes().strip_prefix(b"PATH="))
        .unwrap_or(DEFAULT_PATH);
    let mut saw_unexecutable = false;
    for dir in path_var.split(|&b| b == b':') {
        let dir: &[u8] = if dir.is_empty() { b"." } else { dir };
        let candidate = PathBuf::from(std::ffi::OsStr::from_bytes(dir)).join(program);
        let seen_from_here = match cwd {
            Some(cwd) if candidate.is_relative() => cwd.join(&candidate),
            _ => candidate.clone(),
        };
        match is_executable_file(&seen_from_here) {
            Some(true) => return Ok(candidate),
            Some(false) => saw_unexecutable = true,
            None => {}
        }
    }
    let errno = if saw_unexecutable {
        libc::EACCES
    } else {
        libc::ENOENT
    };
    Err(SpawnError::os(
        io::Error::from_raw_os_error(errno),
        Stage::Resolve,
    ))
}

/// `key=value` C strings of `vars`, in order; a key must be non-empty and
/// without `=`, and nothing may hold a NUL byte.
fn envp_of(vars: &[(OsString, OsString)]) -> Result<Vec<CString>, SpawnError> {
    let mut envp = Vec::with_capacity(vars.len());
    for (k, v) in vars {
        let (k, v) = (k.as_bytes(), v.as_bytes());
        if k.is_empty() || k.contains(&b'=') {
            return Err(SpawnError::Invalid(format!(
                "env key {:?} must be non-empty and must not contain '='",
                String::from_utf8_lossy(k)
            )));
        }
        let entry = [k, b"=", v].concat();
        envp.push(
            CString::new(entry)
                .map_err(|_| SpawnError::Invalid("env must not contain NUL bytes".into()))?,
        );
    }
    Ok(envp)
}

/// This process's environment as it is now: each `environ` entry copied
/// into a C string as it is (one allocation an entry, where owned pairs
/// and then `key=value` strings took three), as libuv passes `environ` to
/// a child without `env`.
///
/// Read as `std::env::vars_os` reads it: std's lock around that read only
/// orders it against std's own `set_var` in this library (there is none);
/// Node's `process.env` writes are made on the JS thread, which is the one
/// spawning here, or by a worker under `SHARE_ENV`, which neither guards.
#[cfg(target_os = "linux")]
fn inherited_envp() -> Result<Vec<CString>, SpawnError> {
    extern "C" {
        static environ: *const *const libc::c_char;
    }
    // SAFETY: reads the pointer's value; `environ` is NULL or a
    // NULL-terminated array of NUL-terminated strings (see above for who
    // may change it meanwhile).
    let base = unsafe { environ };
    let mut envp = Vec::new();
    if base.is_null() {
        return Ok(envp);
    }
    loop {
        // SAFETY: `base` is NULL-terminated and every index before this one
        // held an entry, so `base + envp.len()` is within the array.
        let entry = unsafe { *base.add(envp.len()) };
        if entry.is_null() {
            return Ok(envp);
        }
        // SAFETY: each entry is a NUL-terminated string, copied at once.
        envp.push(unsafe { std::ffi::CStr::from_ptr(entry) }.to_owned());
    }
}

/// Elsewhere (macOS: `environ` is not for a library to link against) through std.
#[cfg(not(target_os = "linux"))]
fn inherited_envp() -> Result<Vec<CString>, SpawnError> {
    envp_of(&std::env::vars_os().collect::<Vec<_>>())
}

/// The parent's ends: stdio pipes and the notify pipe's read end.
pub(super) type ParentEnds = ([Option<OwnedFd>; 3], Option<OwnedFd>);

pub(super) fn prepare(cmd: &Command) -> Result<(Prepared, ParentEnds), SpawnError> {
    if cmd.program.is_empty() {
        return Err(SpawnError::Invalid(
            "command must be a non-empty string".into(),
        ));
    }
    let mut argv = vec![match &cmd.argv0 {
        Some(a) => cstring(a, "argv0")?,
        None => cstring(&cmd.program, "command")?,
    }];
    for a in &cmd.args {
        argv.push(cstring(a, "args")?);
    }
    let mut envp = match &cmd.env {
        Environment::Set(vars) => envp_of(vars)?,
        Environment::Inherit => inherited_envp()?,
    };
    if let Some(listen) = &cmd.listen {
        super::listen::listen_env(&mut envp, listen)?;
    }
    let cwd = match &cmd.cwd {
        Some(dir) => {
            let meta = std::fs::metadata(dir).map_err(|e| SpawnError::os(e, Stage::Cwd))?;
            if !meta.is_dir() {
                return Err(SpawnError::os(
                    io::Error::from_raw_os_error(libc::ENOTDIR),
                    Stage::Cwd,
                ));
            }
            Some(
                CString::new(dir.as_os_str().as_bytes())
                    .map_err(|_| SpawnError::Invalid("cwd must not contain NUL bytes".into()))?,
            )
        }
        None => None,
    };
    let path = resolve(&cmd.program, &envp, cmd.cwd.as_deref())?;
    let path = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| SpawnError::Invalid("command must not contain NUL bytes".into()))?;
    let mut child_stdio: [ChildFd; 3] = [ChildFd::Inherit, ChildFd::Inherit, ChildFd::Inherit];
    let mut pipes: [Option<OwnedFd>; 3] = [None, None, None];
    for n in 0..3 {
        let (child, parent) = open_stdio(n, &cmd.stdio[n])?;
        child_stdio[n] = child;
        pipes[n] = parent;
    }
    let (notify, notify_read) = match cmd.notify_fd {
        None => (None, None),
        Some(target) if target < 3 => {
            return Err(SpawnError::Invalid(format!(
                "notifyFd must be 3 or above (0..2 are stdio), got {target}"
            )))
        }
        Some(target) => {
            let (r, w) = io::pipe().map_err(|e| SpawnError::os(e, Stage::Stdio))?;
            (Some((above_stdio(w.into())?, target)), Some(r.into()))
        }
    };
    let listen = match &cmd.listen {
        Some(listen) => super::listen::copy_listen(listen, cmd.notify_fd)?
            .map_err(|e| SpawnError::os(e, Stage::Listen))?,
        None => Vec::new(),
    };
    Ok((
        Prepared {
            path,
            argv,
            envp,
            cwd,
            child_stdio,
            process_group: cmd.process_group,
            death_signal: cmd.death_signal,
            notify,
            uid: cmd.uid,
            gid: cmd.gid,
            umask: cmd.umask,
            new_session: cmd.new_session,
            ignore_stop_signals: cmd.ignore_stop_signals,
            take_terminal: cmd.take_terminal,
            cgroup: cmd.cgroup.clone(),
            parent_pid: Pid::current(),
            listen,
            listen_blocking: cmd.listen.as_ref().is_some_and(|l| l.blocking),
        },
        (pipes, notify_read),
    ))
}

#[cfg(test)]
pub(super) mod tests {
    use super::super::super::{At, Stdio};
    use super::*;

    fn env() -> Vec<(OsString, OsString)> {
        vec![("PATH".into(), "/usr/bin:/bin".into())]
    }

    /// `vars` as the child's C strings.
    fn envp(vars: Vec<(OsString, OsString)>) -> Vec<CString> {
        envp_of(&vars).unwrap()
    }

    /// `program args…` leading a group of its own, stdio ignored, nothing
    /// else asked for.
    pub(crate) fn command(program: &str, args: Vec<String>) -> Command {
        Command {
            program: program.into(),
            args,
            env: Environment::Set(env().into()),
            cwd: None,
            stdio: [Stdio::Ignore, Stdio::Ignore, Stdio::Ignore],
            process_group: true,
            death_signal: None,
            notify_fd: None,
            listen: None,
            uid: None,
            gid: None,
            umask: None,
            argv0: None,
            new_session: false,
            ignore_stop_signals: false,
            take_terminal: false,
            cgroup: None,
        }
    }

    #[test]
    fn resolves_through_path() {
        let p = resolve("sh", &envp(env()), None).unwrap();
        assert!(p.ends_with("sh"));
        assert!(p.is_absolute());
    }

    #[test]
    fn missing_command_is_enoent_before_any_process() {
        match resolve("procward-no-such-command", &envp(env()), None) {
            Err(SpawnError::Os { err, at, syscall }) => {
                assert_eq!(err.raw_os_error(), Some(libc::ENOENT));
                assert_eq!((at, syscall), (At::Spawn, Stage::Resolve.syscall()));
            }
            other => panic!("{other:?}"),
        }
    }

    /// A scratch directory, removed when dropped.
    struct Scratch(PathBuf);

    impl Scratch {
        fn new(name: &str) -> Scratch {
            let dir = std::env::temp_dir().join(format!("procward-{name}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            Scratch(dir)
        }

        fn executable(&self, rel: &str) -> PathBuf {
            use std::os::unix::fs::PermissionsExt;
            let path = self.0.join(rel);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, "#!/bin/sh\n").unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
            path
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn path_env(path: &str) -> Vec<(OsString, OsString)> {
        vec![("PATH".into(), path.into())]
    }

    #[test]
    fn relative_path_entries_stay_relative_to_the_childs_cwd() {
        let s = Scratch::new("resolve");
        s.executable("work/bin/tool");
        // The child runs `bin/tool` after its chdir to .../work; the check
        // here found it at .../work/bin/tool.
        let work = s.0.join("work");
        let p = resolve("tool", &envp(path_env("bin:/usr/bin")), Some(&work)).unwrap();
        assert_eq!(p, PathBuf::from("bin/tool"));
        // An empty entry is the child's cwd.
        s.executable("work/tool2");
        let p = resolve("tool2", &envp(path_env("/usr/bin:")), Some(&work)).unwrap();
        assert_eq!(p, PathBuf::from("./tool2"));
        // Not there from the child's cwd: not found, wherever we are.
        assert!(resolve("tool", &envp(path_env("bin")), Some(&s.0)).is_err());
        // Absolute entries are absolute whatever the cwd.
        let p = resolve("sh", &envp(path_env("/bin")), Some(&work)).unwrap();
        assert_eq!(p, PathBuf::from("/bin/sh"));
    }

    #[test]
    fn the_first_path_wins_and_a_missing_one_is_glibcs_default() {
        let mut env = path_env("/nonexistent");
        env.push(("PATH".into(), "/usr/bin:/bin".into()));
        assert!(resolve("sh", &envp(env), None).is_err());
        let p = resolve("sh", &[], None).unwrap();
        assert_eq!(p, PathBuf::from("/bin/sh"));
    }

    #[test]
    fn an_inherited_environment_is_this_processs_as_it_is() {
        let c = Command {
            env: Environment::Inherit,
            ..command("sh", vec![])
        };
        let (prepared, _) = prepare(&c).unwrap();
        let expected: Vec<Vec<u8>> = std::env::vars_os()
            .map(|(k, v)| [k.as_bytes(), b"=", v.as_bytes()].concat())
            .collect();
        let got: Vec<Vec<u8>> = prepared
            .envp
            .iter()
            .map(|e| e.as_bytes().to_vec())
            .collect();
        assert_eq!(got, expected);
        // The PATH lookup reads the same entries.
        assert!(prepared.path.as_bytes().ends_with(b"/sh"));
    }

    #[test]
    fn rejects_nul_and_bad_env_keys() {
        let base = command("true", vec![]);
        let mut c = base.clone();
        c.args.push("a\0b".into());
        assert!(matches!(prepare(&c), Err(SpawnError::Invalid(_))));
        let mut c = base.clone();
        c.env = Environment::Set(vec![("A=B".into(), "x".into())].into());
        assert!(matches!(prepare(&c), Err(SpawnError::Invalid(_))));
        let mut c = base.clone();
        c.program = String::new();
        assert!(matches!(prepare(&c), Err(SpawnError::Invalid(_))));
    }
}
