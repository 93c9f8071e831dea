"""A seccomp filter for the bubblewrap sandbox: the kernel's attack surface a solution has no use for.

Why: bubblewrap's namespaces and the uid drop stop a solution from reaching the host's files,
network and processes, but the syscalls that matter most for kernel exploits stay open: inside the
sandbox a solution could create nested user namespaces (gaining capabilities over its own mounts),
mount file systems, use ``io_uring``, ``bpf``, ``userfaultfd``, ``keyctl`` or ``ptrace``. Docker's
default profile closes these; this filter closes the same set for the ``local`` backend, where
bubblewrap loads it (``--seccomp FD``) just before it executes the solution.

The program is written directly in classic BPF (no ``libseccomp`` dependency): check the
architecture (x86-64 only; anything else, including the i386 ``int 0x80`` entry, is killed), refuse
x32 syscalls, refuse each listed syscall with ``EPERM``, refuse ``clone`` with any namespace flag,
answer ``clone3`` with ``ENOSYS`` (its flags live in memory BPF cannot read; the C library then
falls back to ``clone``), and allow everything else. Ordinary Python, numpy, pandas, scikit-learn and
LightGBM (threads, ``fork``, ``mmap``, shared memory) never call what is refused.

Example:
    >>> program = seccomp_program()
    >>> program is None or len(program) % 8 == 0
    True
"""

from __future__ import annotations

import errno
import os
import platform
import struct

__all__ = ["DENIED_SYSCALLS", "seccomp_fd", "seccomp_program"]

DENIED_SYSCALLS: dict[str, int] = {
    "ptrace": 101, "syslog": 103, "uselib": 134, "ustat": 136, "sysfs": 139, "vhangup": 153,
    "pivot_root": 155, "_sysctl": 156, "adjtimex": 159, "chroot": 161, "acct": 163, "settimeofday": 164,
    "mount": 165, "umount2": 166, "swapon": 167, "swapoff": 168, "reboot": 169, "sethostname": 170,
    "setdomainname": 171, "iopl": 172, "ioperm": 173, "create_module": 174, "init_module": 175,
    "delete_module": 176, "get_kernel_syms": 177, "query_module": 178, "quotactl": 179,
    "nfsservctl": 180, "lookup_dcookie": 212, "clock_settime": 227, "kexec_load": 246, "add_key": 248,
    "request_key": 249, "keyctl": 250, "unshare": 272, "perf_event_open": 298, "fanotify_init": 300,
    "name_to_handle_at": 303, "open_by_handle_at": 304, "clock_adjtime": 305, "setns": 308,
    "process_vm_readv": 310, "process_vm_writev": 311, "kcmp": 312, "finit_module": 313,
    "kexec_file_load": 320, "bpf": 321, "userfaultfd": 323, "io_uring_setup": 425,
    "io_uring_enter": 426, "io_uring_register": 427, "open_tree": 428, "move_mount": 429, "fsopen": 430,
    "fsconfig": 431, "fsmount": 432, "fspick": 433, "pidfd_getfd": 438, "mount_setattr": 442,
}
"""x86-64 syscalls refused with ``EPERM`` (Docker's default profile refuses these too)."""

_CLONE, _CLONE3 = 56, 435
_NAMESPACE_FLAGS = 0x7E020080  # CLONE_NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET|NEWTIME
_X32_SYSCALL_BIT = 0x40000000
_AUDIT_ARCH_X86_64 = 0xC000003E
_LD_ABS, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06
_ALLOW, _KILL_PROCESS, _ERRNO = 0x7FFF0000, 0x80000000, 0x00050000
_NR, _ARCH, _ARG0 = 0, 4, 16


def seccomp_program() -> bytes | None:
    """The filter as a ``struct sock_filter[]`` byte string, or None on an architecture it does not cover."""
    if platform.machine() != "x86_64":
        return None
    denied = sorted(DENIED_SYSCALLS.values())
    # Layout: 0 ld arch; 1 jeq; 2 kill; 3 ld nr; 4 x32; 5 clone; 6 clone3; 7.. denied;
    # then: allow, clone check (ld arg0, jset), deny, allow, enosys.
    first_denied = 7
    allow = first_denied + len(denied)
    clone_check = allow + 1
    deny = clone_check + 2
    enosys = deny + 2
    program: list[tuple[int, int, int, int]] = [
        (_LD_ABS, 0, 0, _ARCH),
        (_JEQ, 1, 0, _AUDIT_ARCH_X86_64),
        (_RET, 0, 0, _KILL_PROCESS),
        (_LD_ABS, 0, 0, _NR),
        (_JGE, deny - 5, 0, _X32_SYSCALL_BIT),
        (_JEQ, clone_check - 6, 0, _CLONE),
        (_JEQ, enosys - 7, 0, _CLONE3),
    ]
    for index, number in enumerate(denied, start=first_denied):
        program.append((_JEQ, deny - (index + 1), 0, number))
    program += [
        (_RET, 0, 0, _ALLOW),
        (_LD_ABS, 0, 0, _ARG0),
        (_JSET, 0, 1, _NAMESPACE_FLAGS),
        (_RET, 0, 0, _ERRNO | errno.EPERM),
        (_RET, 0, 0, _ALLOW),
        (_RET, 0, 0, _ERRNO | errno.ENOSYS),
    ]
    return b"".join(struct.pack("=HBBI", code, jt, jf, k) for code, jt, jf, k in program)


def seccomp_fd(program: bytes) -> int:
    """A fresh file descriptor holding ``program`` at offset 0 (bubblewrap reads it to the end)."""
    fd = os.memfd_create("wmrl-seccomp", 0)
    try:
        os.write(fd, program)
        os.lseek(fd, 0, os.SEEK_SET)
    except BaseException:
        os.close(fd)
        raise
    return fd
