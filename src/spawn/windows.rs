//! Spawning on Windows: `CreateProcessW`, the child born inside a Job object.
//!
//! The job is the group. It is attached at creation through
//! `PROC_THREAD_ATTRIBUTE_JOB_LIST` (no window in which the child runs, or
//! starts a grandchild, outside it: no CREATE_SUSPENDED + assign dance),
//! every descendant is created inside it too, and it never allows breakaway
//! (`JOB_OBJECT_LIMIT_BREAKAWAY_OK` is never set). With
//! `JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE` (the default, `parentDeathSignal`
//! not false) the kernel kills the whole tree when the job's last handle
//! closes — ours, when this process dies, however it dies.
//!
//! Inheritance: only the three stdio handles, named in
//! `PROC_THREAD_ATTRIBUTE_HANDLE_LIST`; any other inheritable handle of this
//! process (a lock file's is never inheritable anyway) stays out.
//!
//! Finding the program is libuv's rule, so `spawnSupervised('node')` finds
//! what `child_process.spawn('node')` finds: a name with a directory part is
//! taken as it is (relative to the child's cwd); a bare name is looked for in
//! the child's cwd, then in each directory of the child's `PATH`. A name with
//! an extension is tried as it is, then (any name) with `.com` and `.exe`
//! appended. `PATHEXT` is not consulted and `.bat`/`.cmd` are not run
//! directly (that takes `cmd.exe /d /s /c`, and its own quoting).
//!
//! The command line is quoted by the Microsoft C runtime's rules, which is
//! how the child's `main` (or `CommandLineToArgvW`) splits it again.

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::windows::ffi::OsStrExt;
use std::os::windows::io::OwnedHandle;
use std::path::{Path, PathBuf};
use std::ptr;

use windows_sys::Win32::Foundation::{
    DuplicateHandle, DUPLICATE_SAME_ACCESS, GENERIC_READ, GENERIC_WRITE, HANDLE,
    INVALID_HANDLE_VALUE, TRUE,
};
use windows_sys::Win32::Security::SECURITY_ATTRIBUTES;
use windows_sys::Win32::Storage::FileSystem::{
    CreateFileW, CREATE_ALWAYS, FILE_APPEND_DATA, FILE_ATTRIBUTE_NORMAL, FILE_SHARE_DELETE,
    FILE_SHARE_READ, FILE_SHARE_WRITE, OPEN_ALWAYS, OPEN_EXISTING,
};
use windows_sys::Win32::System::Console::{
    GetStdHandle, STD_ERROR_HANDLE, STD_INPUT_HANDLE, STD_OUTPUT_HANDLE,
};
use windows_sys::Win32::System::Threading::{
    CreateProcessW, DeleteProcThreadAttributeList, GetCurrentProcess,
    InitializeProcThreadAttributeList, UpdateProcThreadAttribute, CREATE_NEW_PROCESS_GROUP,
    CREATE_UNICODE_ENVIRONMENT, EXTENDED_STARTUPINFO_PRESENT, PROCESS_INFORMATION,
    PROC_THREAD_ATTRIBUTE_HANDLE_LIST, PROC_THREAD_ATTRIBUTE_JOB_LIST, STARTF_USESTDHANDLES,
    STARTUPINFOEXW,
};

use super::{At, Command, Environment, SpawnError, Stdio};
use crate::pid::Pid;
use crate::sys;

/// Never constructed: no cgroups here (every child is contained by its Job
/// object instead).
#[derive(Clone, Debug)]
pub enum IntoCgroup {}

/// Never constructed: no `'pipe'` stdio here (refused at spawn).
pub enum Pipe {}

pub fn pipe_into_raw(p: Pipe) -> i32 {
    match p {}
}

pub struct Child {
    pub pid: Pid,
    pub process: OwnedHandle,
    pub job: OwnedHandle,
}

fn os(at: At, syscall: &'static str) -> impl Fn(io::Error) -> SpawnError {
    move |err| SpawnError::Os { err, at, syscall }
}

fn not_found() -> io::Error {
    io::Error::from_raw_os_error(windows_sys::Win32::Foundation::ERROR_FILE_NOT_FOUND as i32)
}

/// Appends `arg` to a command line so that the MS C runtime reads it back
/// as one argument: quoted when it is empty or holds a space, tab, newline
/// or quote; inside quotes, a quote is preceded by a backslash, and the
/// backslashes before a quote or before the closing quote are doubled
/// (elsewhere backslashes are literal and stay single).
pub fn quote_arg(arg: &str, out: &mut String) {
    if !arg.is_empty() && !arg.contains([' ', '\t', '\n', '\x0b', '"']) {
        out.push_str(arg);
        return;
    }
    out.push('"');
    let mut backslashes = 0usize;
    for c in arg.chars() {
        match c {
            '\\' => backslashes += 1,
            '"' => {
                out.extend(std::iter::repeat_n('\\', backslashes * 2 + 1));
                out.push('"');
                backslashes = 0;
            }
            c => {
                out.extend(std::iter::repeat_n('\\', backslashes));
                out.push(c);
                backslashes = 0;
            }
        }
    }
    out.extend(std::iter::repeat_n('\\', backslashes * 2));
    out.push('"');
}

/// The whole command line. The first word follows other rules: the runtime
/// takes it up to the next space, or between a pair of quotes, with no
/// backslash escapes, so it may not hold a quote at all.
pub fn command_line(argv0: &str, args: &[String]) -> Result<String, SpawnError> {
    if argv0.contains('"') {
        return Err(SpawnError::Invalid(format!(
            "the program name {argv0:?} may not contain a double quote on Windows"
        )));
    }
    let mut line = String::new();
    if argv0.is_empty() || argv0.contains([' ', '\t']) {
        line.push('"');
        line.push_str(argv0);
        line.push('"');
    } else {
        line.push_str(argv0);
    }
    for a in args {
        line.push(' ');
        quote_arg(a, &mut line);
    }
    Ok(line)
}

fn has_dir_part(program: &str) -> bool {
    program.contains(['/', '\\', ':'])
}

fn has_extension(program: &str) -> bool {
    let name = program.rsplit(['/', '\\']).next().unwrap_or(program);
    name.contains('.')
}

/// Where `program` is, by libuv's rule (see the module docs). `exists` is
/// the file test (a fake in the unit tests).
pub fn resolve(
    program: &str,
    cwd: &Path,
    path_var: Option<&OsStr>,
    exists: &dyn Fn(&Path) -> bool,
) -> Option<PathBuf> {
    let try_in = |dir: &Path| -> Option<PathBuf> {
        let base = dir.join(program);
        if has_extension(program) && exists(&base) {
            return Some(base);
        }
        for ext in [".com", ".exe"] {
            let mut with = base.clone().into_os_string();
            with.push(ext);
            let with = PathBuf::from(with);
            if exists(&with) {
                return Some(with);
            }
        }
        None
    };
    if has_dir_part(program) {
        return try_in(cwd);
    }
    if let Some(found) = try_in(cwd) {
        return Some(found);
    }
    let path_var = path_var?.to_string_lossy().into_owned();
    path_var
        .split(';')
        .map(|d| d.trim_matches('"'))
        .filter(|d| !d.is_empty())
        .find_map(|d| {
            let dir = Path::new(d);
            // A relative PATH entry is relative to the child's cwd, as in libuv.
            try_in(&cwd.join(dir))
        })
}

/// The value of `name` in `env`, compared as Windows compares variable
/// names (ASCII case-insensitively).
fn env_get<'a>(env: &'a [(OsString, OsString)], name: &str) -> Option<&'a OsStr> {
    env.iter()
        .find(|(k, _)| k.to_string_lossy().eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_os_str())
}

/// The UTF-16 environment block: `k=v` strings sorted by name (case-
/// insensitively, as CreateProcess expects), one entry per name (the first
/// wins), ending in an empty string. `SYSTEMROOT` is added from this
/// process when missing: without it much of Windows (sockets, crypto) fails
/// in the child, so libuv adds it too.
pub fn env_block(env: &[(OsString, OsString)]) -> Result<Vec<u16>, SpawnError> {
    let mut vars: Vec<(String, &OsStr)> = Vec::new();
    for (k, v) in env {
        let key = k.to_string_lossy();
        // A leading '=' is allowed: Windows keeps per-drive cwds as `=C:`.
        if key.is_empty() || key.chars().skip(1).any(|c| c == '=') || key.contains('\0') {
            return Err(SpawnError::Invalid(format!("bad environment name {key:?}")));
        }
        if !vars.iter().any(|(n, _)| n.eq_ignore_ascii_case(&key)) {
            vars.push((key.into_owned(), v.as_os_str()));
        }
    }
    let system_root = std::env::var_os("SYSTEMROOT");
    if !vars
        .iter()
        .any(|(n, _)| n.eq_ignore_ascii_case("SYSTEMROOT"))
    {
        if let Some(root) = system_root.as_deref() {
            vars.push(("SYSTEMROOT".into(), root));
        }
    }
    vars.sort_by_key(|(n, _)| n.to_uppercase());
    let mut block = Vec::new();
    for (k, v) in vars {
        block.extend(OsStr::new(&k).encode_wide());
        block.push(u16::from(b'='));
        block.extend(v.encode_wide());
        block.push(0);
    }
    if block.is_empty() {
        block.push(0);
    }
    block.push(0);
    Ok(block)
}

fn wide(s: &OsStr) -> Vec<u16> {
    s.encode_wide().chain(Some(0)).collect()
}

fn inheritable() -> SECURITY_ATTRIBUTES {
    SECURITY_ATTRIBUTES {
        nLength: std::mem::size_of::<SECURITY_ATTRIBUTES>() as u32,
        lpSecurityDescriptor: ptr::null_mut(),
        bInheritHandle: TRUE,
    }
}

fn open_inheritable(path: &OsStr, access: u32, disposition: u32) -> io::Result<OwnedHandle> {
    let sa = inheritable();
    let name = wide(path);
    // SAFETY: a NUL-terminated name and valid security attributes.
    let h = unsafe {
        CreateFileW(
            name.as_ptr(),
            access,
            FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE,
            &sa,
            disposition,
            FILE_ATTRIBUTE_NORMAL,
            ptr::null_mut(),
        )
    };
    sys::owned(h, INVALID_HANDLE_VALUE)
}

/// An inheritable duplicate of this process's own stdio handle `which`, or
/// the null device when it has none (a GUI process, a closed stream).
fn inherit_own(which: u32) -> io::Result<OwnedHandle> {
    // SAFETY: plain call; the handle is borrowed, never closed here.
    let own: HANDLE = unsafe { GetStdHandle(which) };
    if own.is_null() || own == INVALID_HANDLE_VALUE {
        return null_device();
    }
    let mut dup: HANDLE = ptr::null_mut();
    // SAFETY: valid process pseudo-handles, a handle of ours, an out pointer.
    let ok = unsafe {
        DuplicateHandle(
            GetCurrentProcess(),
            own,
            GetCurrentProcess(),
            &mut dup,
            0,
            TRUE,
            DUPLICATE_SAME_ACCESS,
        )
    };
    if ok == 0 {
        // A stale handle (the stream was closed): the child gets nothing.
        return null_device();
    }
    sys::owned(dup, ptr::null_mut())
}

fn null_device() -> io::Result<OwnedHandle> {
    open_inheritable(
        OsStr::new("NUL"),
        GENERIC_READ | GENERIC_WRITE,
        OPEN_EXISTING,
    )
}

fn stdio_handle(fd: usize, spec: &Stdio) -> Result<OwnedHandle, SpawnError> {
    let read = fd == 0;
    let r = match spec {
        Stdio::Pipe => return Err(unsupported("stdio 'pipe'")),
        Stdio::Ignore => null_device(),
        Stdio::Inherit => inherit_own([STD_INPUT_HANDLE, STD_OUTPUT_HANDLE, STD_ERROR_HANDLE][fd]),
        Stdio::File { path, .. } if read => {
            open_inheritable(path.as_os_str(), GENERIC_READ, OPEN_EXISTING)
        }
        Stdio::File { path, append: true } => open_inheritable(
            path.as_os_str(),
            // Every write lands at the end; SYNCHRONIZE for synchronous I/O.
            FILE_APPEND_DATA | windows_sys::Win32::Storage::FileSystem::SYNCHRONIZE,
            OPEN_ALWAYS,
        ),
        Stdio::File {
            path,
            append: false,
        } => open_inheritable(path.as_os_str(), GENERIC_WRITE, CREATE_ALWAYS),
    };
    r.map_err(|err| SpawnError::File {
        fd,
        err,
        reason: None,
    })
}

/// A PROC_THREAD_ATTRIBUTE_LIST with room for two attributes, deleted on drop.
struct AttrList(Vec<usize>);

impl AttrList {
    fn new() -> io::Result<AttrList> {
        let mut size = 0usize;
        // SAFETY: the documented size query (a null list); it "fails" with
        // ERROR_INSUFFICIENT_BUFFER and sets `size`.
        unsafe { InitializeProcThreadAttributeList(ptr::null_mut(), 2, 0, &mut size) };
        let mut buf = vec![0usize; size.div_ceil(std::mem::size_of::<usize>())];
        // SAFETY: a buffer of at least `size` bytes, pointer-aligned.
        if unsafe { InitializeProcThreadAttributeList(buf.as_mut_ptr().cast(), 2, 0, &mut size) }
            == 0
        {
            return Err(io::Error::last_os_error());
        }
        Ok(AttrList(buf))
    }

    fn ptr(&mut self) -> *mut core::ffi::c_void {
        self.0.as_mut_ptr().cast()
    }

    /// `value` must stay valid until CreateProcessW has returned.
    fn set(&mut self, attribute: u32, value: *const HANDLE, count: usize) -> io::Result<()> {
        // SAFETY: an initialized list; `value` points to `count` handles
        // that the caller keeps alive until the list is used.
        let ok = unsafe {
            UpdateProcThreadAttribute(
                self.ptr(),
                0,
                attribute as usize,
                value.cast(),
                count * std::mem::size_of::<HANDLE>(),
                ptr::null_mut(),
                ptr::null(),
            )
        };
        if ok == 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

impl Drop for AttrList {
    fn drop(&mut self) {
        // SAFETY: initialized in `new`, deleted once.
        unsafe { DeleteProcThreadAttributeList(self.ptr()) };
    }
}

fn unsupported(what: &str) -> SpawnError {
    SpawnError::Unsupported(format!("{what} is not supported on Windows"))
}

/// Starts `cmd` in a Job object of its own. `_want_pidfd`: no pidfds here
/// (the process handle plays that part).
pub fn spawn(cmd: &Command, _want_pidfd: bool) -> Result<Child, SpawnError> {
    if cmd.uid.is_some() || cmd.gid.is_some() {
        return Err(unsupported("uid/gid"));
    }
    if cmd.umask.is_some() {
        return Err(unsupported("umask"));
    }
    if cmd.notify_fd.is_some() {
        return Err(unsupported("a readiness fd (notifyFd)"));
    }
    if cmd.stdio.contains(&Stdio::Pipe) {
        return Err(unsupported("stdio 'pipe'"));
    }
    if cmd.listen.is_some() {
        return Err(unsupported("listen (held sockets)"));
    }
    if let Some(c) = &cmd.cgroup {
        match *c {}
    }
    let cwd = match &cmd.cwd {
        Some(dir) => {
            let meta = std::fs::metadata(dir).map_err(os(At::Chdir, "chdir"))?;
            if !meta.is_dir() {
                return Err(SpawnError::Os {
                    err: io::Error::from_raw_os_error(
                        windows_sys::Win32::Foundation::ERROR_DIRECTORY as i32,
                    ),
                    at: At::Chdir,
                    syscall: "chdir",
                });
            }
            dir.clone()
        }
        None => std::env::current_dir().map_err(os(At::Chdir, "getcwd"))?,
    };
    let inherited: Vec<(OsString, OsString)>;
    let env: &[(OsString, OsString)] = match &cmd.env {
        Environment::Set(vars) => &vars[..],
        Environment::Inherit => {
            inherited = std::env::vars_os().collect();
            &inherited
        }
    };
    let block = env_block(env)?;
    let path_var = env_get(env, "PATH");
    let program =
        resolve(&cmd.program, &cwd, path_var, &|p| p.is_file()).ok_or(SpawnError::Os {
            err: not_found(),
            at: At::Spawn,
            syscall: "spawn",
        })?;
    let argv0 = cmd.argv0.as_deref().unwrap_or(&cmd.program);
    let line = command_line(argv0, &cmd.args)?;
    let mut line: Vec<u16> = wide(OsStr::new(&line));

    let handles = [
        stdio_handle(0, &cmd.stdio[0])?,
        stdio_handle(1, &cmd.stdio[1])?,
        stdio_handle(2, &cmd.stdio[2])?,
    ];
    let raw: Vec<HANDLE> = handles.iter().map(sys::raw).collect();
    let job = sys::job(cmd.death_signal.is_some()).map_err(os(At::Spawn, "CreateJobObjectW"))?;
    let jobs = [sys::raw(&job)];

    let mut attrs = AttrList::new().map_err(os(At::Spawn, "InitializeProcThreadAttributeList"))?;
    attrs
        .set(PROC_THREAD_ATTRIBUTE_HANDLE_LIST, raw.as_ptr(), raw.len())
        .map_err(os(At::Spawn, "UpdateProcThreadAttribute"))?;
    attrs
        .set(PROC_THREAD_ATTRIBUTE_JOB_LIST, jobs.as_ptr(), 1)
        .map_err(os(At::Spawn, "UpdateProcThreadAttribute"))?;

    // SAFETY: all-zero is a valid STARTUPINFOEXW; the fields used are set below.
    let mut si: STARTUPINFOEXW = unsafe { std::mem::zeroed() };
    si.StartupInfo.cb = std::mem::size_of::<STARTUPINFOEXW>() as u32;
    si.StartupInfo.dwFlags = STARTF_USESTDHANDLES;
    si.StartupInfo.hStdInput = raw[0];
    si.StartupInfo.hStdOutput = raw[1];
    si.StartupInfo.hStdError = raw[2];
    si.lpAttributeList = attrs.ptr();
    // SAFETY: all-zero is a valid PROCESS_INFORMATION (an out parameter).
    let mut pi: PROCESS_INFORMATION = unsafe { std::mem::zeroed() };
    let mut flags = CREATE_UNICODE_ENVIRONMENT | EXTENDED_STARTUPINFO_PRESENT;
    if cmd.process_group {
        flags |= CREATE_NEW_PROCESS_GROUP;
    }
    let app = wide(program.as_os_str());
    let dir = wide(cwd.as_os_str());
    // SAFETY: NUL-terminated application name, a mutable NUL-terminated
    // command line, an environment block in the format the flag says, a
    // NUL-terminated directory, and a STARTUPINFOEXW whose attribute list
    // and the handles it names live until this returns.
    let ok = unsafe {
        CreateProcessW(
            app.as_ptr(),
            line.as_mut_ptr(),
            ptr::null(),
            ptr::null(),
            TRUE,
            flags,
            block.as_ptr().cast(),
            dir.as_ptr(),
            &si.StartupInfo,
            &mut pi,
        )
    };
    if ok == 0 {
        return Err(SpawnError::Os {
            err: io::Error::last_os_error(),
            at: At::Spawn,
            syscall: "spawn",
        });
    }
    drop(attrs);
    drop(handles);
    drop(sys::owned(pi.hThread, ptr::null_mut()));
    let process = sys::owned(pi.hProcess, ptr::null_mut()).map_err(os(At::Spawn, "spawn"))?;
    let pid = Pid::from_raw(pi.dwProcessId as i32).map_err(|e| SpawnError::Os {
        // A pid beyond the range procward accepts: the child is taken down
        // again (the job, dropped with this error, kills it if the flag is
        // not set, terminate_job does).
        err: io::Error::other(e.to_string()),
        at: At::Spawn,
        syscall: "spawn",
    });
    let pid = match pid {
        Ok(pid) => pid,
        Err(e) => {
            let _ = sys::terminate_job(&job);
            return Err(e);
        }
    };
    Ok(Child { pid, process, job })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(a: &str) -> String {
        let mut s = String::new();
        quote_arg(a, &mut s);
        s
    }

    #[test]
    fn quoting_follows_the_c_runtime() {
        assert_eq!(q("plain"), "plain");
        assert_eq!(q(""), "\"\"");
        assert_eq!(q("a b"), "\"a b\"");
        assert_eq!(q("a\"b"), "\"a\\\"b\"");
        assert_eq!(q("a\\b"), "a\\b");
        assert_eq!(q("a b\\"), "\"a b\\\\\"");
        assert_eq!(q("a\\\"b"), "\"a\\\\\\\"b\"");
        assert_eq!(q("C:\\Program Files\\"), "\"C:\\Program Files\\\\\"");
    }

    #[test]
    fn first_word_is_never_escaped() {
        let line = command_line("C:\\a b\\x.exe", &["1".into(), "".into()]).unwrap();
        assert_eq!(line, "\"C:\\a b\\x.exe\" 1 \"\"");
        assert!(command_line("a\"b", &[]).is_err());
    }

    #[test]
    fn lookup_is_libuvs() {
        let have = |names: &'static [&'static str]| {
            move |p: &Path| names.iter().any(|n| Path::new(n) == p)
        };
        let cwd = Path::new("C:\\work");
        let exists = have(&[
            "C:\\bin\\node.exe",
            "C:\\work\\tool.com",
            "C:\\bin\\run.cmd",
        ]);
        let path = OsString::from("C:\\nope;\"C:\\bin\"");
        assert_eq!(
            resolve("node", cwd, Some(&path), &exists),
            Some(PathBuf::from("C:\\bin\\node.exe"))
        );
        // The cwd first, .com before .exe.
        assert_eq!(
            resolve("tool", cwd, Some(&path), &exists),
            Some(PathBuf::from("C:\\work\\tool.com"))
        );
        // A batch file is never picked by a bare name.
        assert_eq!(resolve("run", cwd, Some(&path), &exists), None);
        // A directory part: no PATH search.
        assert_eq!(resolve("sub\\node", cwd, Some(&path), &exists), None);
        assert_eq!(
            resolve("C:\\bin\\node", cwd, Some(&path), &exists),
            Some(PathBuf::from("C:\\bin\\node.exe"))
        );
    }

    #[test]
    fn env_block_is_sorted_and_unique() {
        let env = vec![
            (OsString::from("b"), OsString::from("2")),
            (OsString::from("A"), OsString::from("1")),
            (OsString::from("B"), OsString::from("3")),
            (OsString::from("SystemRoot"), OsString::from("C:\\W")),
        ];
        let block = env_block(&env).unwrap();
        let text = String::from_utf16(&block).unwrap();
        assert_eq!(text, "A=1\0b=2\0SystemRoot=C:\\W\0\0");
        assert!(env_block(&[(OsString::from("a=b"), OsString::new())]).is_err());
        // `=C:` style names (per-drive cwd) are allowed.
        assert!(env_block(&[(OsString::from("=C:"), OsString::from("C:\\"))]).is_ok());
        assert!(env_block(&[(OsString::from("é=x"), OsString::new())]).is_err());
    }
}
