"""What the kernel promises about each common syscall: its return-value domain, the payload
field that bounds its result, and how it touches file descriptors.

Kept as plain tables (no logic) so the rules, the repair and the sampling guide share one
source of truth. Names are LTTng's syscall names (``openat``, ``newfstat``...), without the
``syscall_entry_`` / ``syscall_exit_`` prefix.

Return-value convention (the x86-64/arm64 syscall ABI): a value in -4095..-1 is ``-errno``.
Any syscall may fail (seccomp's SECCOMP_RET_ERRNO can make even ``getpid`` return an errno),
so every domain except ``ANY`` and ``NORETURN`` admits errors. Values below -4095 are never
errors, so only the few syscalls that return arbitrary words (``ANY``) may produce them.
"""

from __future__ import annotations

#: Smallest and largest errno return values.
MIN_ERRNO_RET = -4095
EBADF = -9
EINTR = -4
EINVAL = -22

#: Descriptors above this are not "small": reaching them takes a million open files.
FD_LIMIT = 1 << 20
#: User-space addresses fit in 57 bits even with 5-level page tables.
ADDR_LIMIT = 1 << 57
PAGE = 4096

# Domain classes (small ints so they index numpy tables).
NONNEG = 0  # result >= 0, or an errno (the default: the ABI's "long, negative = error")
ZERO = 1  # 0 on success
FD = 2  # a new descriptor: 0 <= ret < FD_LIMIT
COUNT = 3  # 0 <= ret <= the entry's count argument
ADDR = 4  # page-aligned user address
ANY = 5  # arbitrary word (rt_sigreturn restores a register, ptrace peeks data, fcntl...)
NORETURN = 6  # never returns to user space: an exit event is impossible
ERRONLY = 7  # returns only when interrupted: always an errno

DOMAIN_NAMES = ("non-negative or errno", "0 or errno", "descriptor or errno",
                "at most the requested count, or errno", "page-aligned address or errno",
                "any value", "never returns", "errno only")

_ZERO = """close fsync fdatasync syncfs mkdir mkdirat rmdir unlink unlinkat rename renameat
renameat2 link linkat symlink symlinkat chdir fchdir chroot chmod fchmod fchmodat chown fchown
lchown fchownat access faccessat faccessat2 stat fstat lstat newstat newfstat newlstat
newfstatat fstatat64 stat64 fstat64 lstat64 statx statfs fstatfs truncate ftruncate munmap
mprotect madvise msync mlock mlock2 munlock mlockall munlockall set_robust_list get_robust_list
rt_sigaction rt_sigprocmask sigaltstack nanosleep clock_nanosleep clock_gettime clock_getres
clock_settime gettimeofday settimeofday kill tkill tgkill rt_sigqueueinfo bind connect listen
shutdown setsockopt getsockopt getsockname getpeername socketpair pipe pipe2 sched_yield
sched_setaffinity sched_setscheduler sched_setparam sched_getparam sched_setattr sched_getattr
setpgid setuid setgid setreuid setregid setresuid setresgid getresuid getresgid setgroups
setrlimit getrlimit prlimit64 getrusage arch_prctl uname newuname sysinfo mknod mknodat utime
utimes utimensat futimesat flock epoll_ctl inotify_rm_watch timer_settime timer_gettime
timer_delete timerfd_settime timerfd_gettime capset capget sethostname setdomainname mount
umount umount2 pivot_root sync fadvise64 fadvise64_64 fallocate setitimer getitimer
sync_file_range execve execveat waitid unshare setns shmdt semop semtimedop msgsnd swapon
swapoff setxattr lsetxattr fsetxattr removexattr lremovexattr fremovexattr ioprio_set
close_range mq_unlink"""

_FD = """open openat openat2 creat socket accept accept4 dup dup2 dup3 epoll_create
epoll_create1 eventfd eventfd2 signalfd signalfd4 timerfd_create inotify_init inotify_init1
memfd_create memfd_secret userfaultfd perf_event_open fanotify_init pidfd_open pidfd_getfd
open_by_handle_at fsopen fsmount fspick open_tree mq_open io_uring_setup"""

_ADDR = "mmap mmap2 mremap shmat"
_ANY = "rt_sigreturn sigreturn ptrace fcntl fcntl64 ioctl times unknown"
_NORETURN = "exit exit_group"
_ERRONLY = "pause rt_sigsuspend sigsuspend"

#: syscall -> entry payload field that bounds a successful return value.
COUNT_FIELD = {
    "read": "count", "write": "count", "pread64": "count", "pwrite64": "count",
    "getdents": "count", "getdents64": "count", "readlink": "bufsiz", "readlinkat": "bufsiz",
    "getrandom": "count", "getcwd": "size", "sendto": "len", "splice": "len", "tee": "len",
    "sendfile": "count", "sendfile64": "count", "copy_file_range": "len",
    "epoll_wait": "maxevents", "epoll_pwait": "maxevents", "epoll_pwait2": "maxevents",
    "poll": "nfds", "ppoll": "nfds",
}

DOMAIN: dict[str, int] = {}
for _names, _cls in ((_ZERO, ZERO), (_FD, FD), (_ADDR, ADDR), (_ANY, ANY),
                     (_NORETURN, NORETURN), (_ERRONLY, ERRONLY)):
    for _n in _names.split():
        DOMAIN[_n] = _cls
for _n in COUNT_FIELD:
    DOMAIN[_n] = COUNT


def domain_of(name: str) -> int:
    """The domain class of a syscall name; unknown names get the permissive ABI default."""
    return DOMAIN.get(name, NONNEG)


#: Syscalls whose success creates a thread/process whose id is the return value.
CHILD_RETURNING = frozenset({"clone", "clone3", "fork", "vfork"})
#: Syscalls that replace the program image (the process name may change there).
EXEC = frozenset({"execve", "execveat"})
#: Syscalls after whose entry the thread never runs user code again.
THREAD_ENDING = frozenset({"exit", "exit_group"})
#: Calls whose exit event may be missing: they restore the interrupted register state,
#: including orig_ax = -1, so the exit tracepoint cannot tell which syscall it was.
EXIT_UNTRACED = frozenset({"rt_sigreturn", "sigreturn"})
#: Calls that may rename a thread (prctl PR_SET_NAME) besides exec.
RENAMING = frozenset({"prctl"})

# --- file descriptors -----------------------------------------------------------------
#: Calls whose *successful* return value is a newly installed descriptor.
FD_CREATING = frozenset(_FD.split()) - {"dup2", "dup3"}
#: dup2/dup3 install their return value over `newfd`, which may already be open.
FD_REPLACING = frozenset({"dup2", "dup3"})
#: Calls that close the descriptor in their `fd` field.
FD_CLOSING = frozenset({"close"})
#: Entry payload fields naming a descriptor the call uses (must be open to succeed).
FD_USE_FIELDS: dict[str, tuple[str, ...]] = {
    **{n: ("fd",) for n in """read write pread64 pwrite64 readv writev preadv pwritev fstat
       newfstat fstat64 lseek fsync fdatasync ftruncate getdents getdents64 sendto recvfrom
       sendmsg recvmsg connect bind listen accept accept4 shutdown setsockopt getsockopt
       getsockname getpeername fchdir fchmod fchown flock fadvise64 fallocate
       sync_file_range fstatfs syncfs""".split()},
    "dup": ("fildes",),
    "dup2": ("oldfd",),
    "dup3": ("oldfd",),
    "epoll_ctl": ("epfd",),
    "epoll_wait": ("epfd",),
    "epoll_pwait": ("epfd",),
    "sendfile64": ("out_fd", "in_fd"),
    "sendfile": ("out_fd", "in_fd"),
    "splice": ("fd_in", "fd_out"),
    "timerfd_settime": ("ufd",),
}
#: Calls that may install descriptors we cannot see (SCM_RIGHTS, pipe arrays, ioctls that
#: return descriptors, F_DUPFD...), or close ranges: after them a closed descriptor's state
#: is unknown again.
FD_OPAQUE = frozenset("""pipe pipe2 socketpair recvmsg recvmmsg ioctl fcntl fcntl64
io_uring_enter io_uring_register close_range unshare seccomp bpf unknown""".split())


def default_ret(name: str, count: int | None = None) -> int:
    """A valid return value to write where one is missing (used by repair)."""
    cls = domain_of(name)
    if cls in (ERRONLY,):
        return EINTR
    if cls == FD:
        return 3
    if cls == ADDR:
        return 0x7F0000000000
    if cls == COUNT and count is not None and count >= 0:
        return count
    return 0
