//! `clone3` with `CLONE_INTO_CGROUP` (Linux 5.7): the child is created
//! inside its cgroup, so not even the pre-exec code runs outside it, and no
//! cgroup migration (`cgroup.procs`, which takes the cgroup subsystem's
//! global write lock) happens per spawn.
//!
//! glibc exports no `clone3` that runs a function on a new stack, and a
//! `CLONE_VM` child cannot return from a `syscall()` wrapper: it wakes on
//! an empty stack, in the parent's memory. So the syscall is made here in
//! a few instructions of assembly that, in the child, call `child_main` on
//! its stack and `exit` with its result (it only returns on failure; its
//! success is `execve`). x86_64 only; elsewhere [`supported`] is false and
//! the pre-exec child writes itself into `cgroup.procs` instead.

use std::ffi::{c_int, c_void};
use std::io;

/// `struct clone_args` up to `cgroup` (`CLONE_ARGS_SIZE_VER2`).
#[repr(C)]
struct CloneArgs {
    flags: u64,
    pidfd: u64,
    child_tid: u64,
    parent_tid: u64,
    exit_signal: u64,
    stack: u64,
    stack_size: u64,
    tls: u64,
    set_tid: u64,
    set_tid_size: u64,
    cgroup: u64,
}

const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;

pub const fn supported() -> bool {
    cfg!(target_arch = "x86_64")
}

/// Creates a child running `entry(arg)` on `stack` inside the cgroup whose
/// directory is `cgroup_fd`, sharing our memory until it execs (the caller
/// is suspended until then: `CLONE_VFORK`). Returns its pid, and writes its
/// pidfd into `*pidfd` when `want_pidfd`.
///
/// # Safety
/// As for `libc::clone` with `CLONE_VM | CLONE_VFORK`: `entry` makes only
/// async-signal-safe calls on `arg`, which outlives the child's use of it;
/// `stack` is unused by anyone else; the caller's signals are blocked.
pub unsafe fn clone_into(
    entry: extern "C" fn(*mut c_void) -> c_int,
    arg: *mut c_void,
    stack: &mut [u8],
    cgroup_fd: c_int,
    want_pidfd: bool,
    pidfd: &mut c_int,
) -> io::Result<libc::pid_t> {
    let mut flags = (libc::CLONE_VM | libc::CLONE_VFORK) as u64 | CLONE_INTO_CGROUP;
    if want_pidfd {
        flags |= libc::CLONE_PIDFD as u64;
    }
    // 16-byte aligned top: the kernel starts the child at stack + size.
    let base = stack.as_mut_ptr() as u64;
    let size = ((base + stack.len() as u64) & !15) - base;
    let args = CloneArgs {
        flags,
        pidfd: pidfd as *mut c_int as u64,
        child_tid: 0,
        parent_tid: 0,
        exit_signal: libc::SIGCHLD as u64,
        stack: base,
        stack_size: size,
        tls: 0,
        set_tid: 0,
        set_tid_size: 0,
        cgroup: cgroup_fd as u64,
    };
    // SAFETY: as the caller promised for `entry`, `arg` and `stack`; `args`
    // lives across the call.
    let ret = unsafe { clone3(&args, entry, arg) };
    if ret < 0 {
        return Err(io::Error::from_raw_os_error(-ret as i32));
    }
    Ok(ret as libc::pid_t)
}

/// The `clone3` syscall, its child calling `entry(arg)` on the stack `args`
/// names and exiting with its result: the raw return (a pid, or -errno).
///
/// # Safety
/// As for [`clone_into`].
#[cfg(target_arch = "x86_64")]
unsafe fn clone3(
    args: &CloneArgs,
    entry: extern "C" fn(*mut c_void) -> c_int,
    arg: *mut c_void,
) -> i64 {
    let ret: i64;
    // SAFETY: the syscall reads `args` (alive across it); in the parent it
    // clobbers only rax, rcx and r11. The child (rax == 0) starts on its own
    // stack with our registers, calls `entry(arg)` (r12, r13 survive the
    // syscall), and exits with its result; it never returns here.
    unsafe {
        std::arch::asm!(
            "syscall",
            "test rax, rax",
            "jnz 2f",
            "xor ebp, ebp",
            "mov rdi, r12",
            "call r13",
            "mov edi, eax",
            "mov eax, 60",
            "syscall",
            "ud2",
            "2:",
            inlateout("rax") libc::SYS_clone3 => ret,
            in("rdi") args as *const CloneArgs,
            in("rsi") std::mem::size_of::<CloneArgs>(),
            in("r12") arg,
            in("r13") entry as usize,
            lateout("rcx") _,
            lateout("r11") _,
        );
    }
    ret
}

#[cfg(not(target_arch = "x86_64"))]
unsafe fn clone3(_: &CloneArgs, _: extern "C" fn(*mut c_void) -> c_int, _: *mut c_void) -> i64 {
    -i64::from(libc::ENOSYS)
}
