"""The system calls every sandbox refuses, as a BPF program for bubblewrap and a profile for container engines.

A namespace sandbox shares the host's kernel, so each system call a program may make is kernel surface it can
attack. These are the calls a verifier program never needs and an escape usually starts from: new namespaces
(a nested user namespace hands a program every capability inside it, and with them mount, netfilter and more
of the kernel), ptrace and reading another process's memory, mounts, the kernel keyrings (shared by every
process of a uid, so a channel between runs), BPF, perf events, userfaultfd (a classic way to win kernel
races), io_uring (its operations bypass this filter), module loading, kexec, and clock, swap and quota
administration. Everything else is allowed: a deny list, kept short so it is read and reviewed as a whole.
What stays allowed on purpose: fork() and clone() without namespace flags, pipes, prctl (PR_SET_DUMPABLE),
seccomp itself (a program may only narrow its own filter), and everything Python's audit hooks use.

clone3 passes its flags in memory a filter cannot read, so it is refused with ENOSYS: glibc then falls back to
clone(), whose flags are checked (Docker's default profile does the same). unshare is refused whatever its
flags. A refused call fails with EPERM, which programs report as an ordinary error, never a crash.

bubblewrap takes the compiled program (`--seccomp FD`); it is built with libseccomp (the Debian package
libseccomp2, a dependency of apt, so present on any Debian) through ctypes, so the host arch's system call
numbers and its 32-bit entry points are libseccomp's to get right: a call through another ABI (int 0x80 on
x86_64, the x32 ABI) kills the process. Container engines take `docker_profile()` as JSON.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import platform
from functools import cache

REFUSED = (
    # namespaces: entering, creating, and the mount API behind them
    "unshare", "setns", "mount", "umount", "umount2", "pivot_root", "chroot", "open_tree", "move_mount",
    "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr",
    # other processes: tracing, reading or writing their memory, comparing or stealing their descriptors
    "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd",
    # kernel keyrings (persist per uid across runs)
    "keyctl", "add_key", "request_key",
    # large kernel surfaces a program never needs
    "bpf", "perf_event_open", "userfaultfd", "io_uring_setup", "io_uring_enter", "io_uring_register",
    "fanotify_init", "open_by_handle_at", "name_to_handle_at", "lookup_dcookie", "quotactl", "quotactl_fd",
    # the machine itself
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "create_module",
    "reboot", "swapon", "swapoff", "acct", "syslog", "settimeofday", "clock_settime", "clock_adjtime",
    "stime", "sethostname", "setdomainname", "iopl", "ioperm", "vm86", "vm86old", "uselib", "_sysctl",
    "ustat", "sysfs", "nfsservctl",
)  # fmt: skip
# clone() flags that make a new namespace; clone() with any of them is refused (fork and threads have none).
NAMESPACE_FLAGS = {
    "CLONE_NEWNS": 0x00020000,
    "CLONE_NEWCGROUP": 0x02000000,
    "CLONE_NEWUTS": 0x04000000,
    "CLONE_NEWIPC": 0x08000000,
    "CLONE_NEWUSER": 0x10000000,
    "CLONE_NEWPID": 0x20000000,
    "CLONE_NEWNET": 0x40000000,
}
# The engine profile lists every ABI of the host, so a 32-bit call is filtered by name, not let through.
DOCKER_ARCHES = {
    "x86_64": ["SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32"],
    "aarch64": ["SCMP_ARCH_AARCH64", "SCMP_ARCH_ARM"],
}

# libseccomp's ABI (seccomp.h): actions, the comparison operator and filter attributes used here.
SCMP_ACT_ALLOW = 0x7FFF0000
SCMP_ACT_KILL_PROCESS = 0x80000000
SCMP_CMP_MASKED_EQ = 7
SCMP_FLTATR_ACT_BADARCH = 2
NR_SCMP_ERROR = -1


def SCMP_ACT_ERRNO(code: int) -> int:  # noqa: N802 - the C macro's name
    return 0x00050000 | (code & 0xFFFF)


class _ArgCmp(ctypes.Structure):
    """struct scmp_arg_cmp: compare system call argument `arg` with `op` against datum_a (and datum_b)."""

    _fields_ = [
        ("arg", ctypes.c_uint),
        ("op", ctypes.c_int),
        ("datum_a", ctypes.c_uint64),
        ("datum_b", ctypes.c_uint64),
    ]


class SeccompUnavailable(RuntimeError):
    pass


def _libseccomp() -> ctypes.CDLL:
    name = ctypes.util.find_library("seccomp") or "libseccomp.so.2"
    try:
        lib = ctypes.CDLL(name, use_errno=True)
    except OSError as exc:
        raise SeccompUnavailable(
            f"libseccomp not found ({exc}); install the Debian package libseccomp2"
        ) from exc
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    lib.seccomp_attr_set.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add_array.argtypes = [
        ctypes.c_void_p,
        ctypes.c_uint32,
        ctypes.c_int,
        ctypes.c_uint,
        ctypes.POINTER(_ArgCmp),
    ]
    lib.seccomp_export_bpf.argtypes = [ctypes.c_void_p, ctypes.c_int]
    return lib


@cache
def bpf_program() -> bytes:
    """The filter as a compiled classic-BPF program for this host's arch (what `bwrap --seccomp` reads).

    Raises SeccompUnavailable when libseccomp is missing or refuses the rules.
    """
    lib = _libseccomp()
    ctx = lib.seccomp_init(SCMP_ACT_ALLOW)
    if not ctx:
        raise SeccompUnavailable("seccomp_init failed")
    try:

        def check(rc: int, what: str) -> None:
            if rc < 0:
                raise SeccompUnavailable(f"libseccomp refused {what}: {os.strerror(-rc)}")

        check(lib.seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS), "the arch rule")
        for name in REFUSED:
            number = lib.seccomp_syscall_resolve_name(name.encode())
            if number == NR_SCMP_ERROR:
                continue  # not a system call on this arch (vm86 off x86, umount on x86_64 …)
            check(lib.seccomp_rule_add_array(ctx, SCMP_ACT_ERRNO(errno.EPERM), number, 0, None), name)
        clone = lib.seccomp_syscall_resolve_name(b"clone")
        for flag in NAMESPACE_FLAGS.values():
            # (flags & flag) == flag: one rule per flag, any of them refuses the call.
            cmp = _ArgCmp(arg=0, op=SCMP_CMP_MASKED_EQ, datum_a=flag, datum_b=flag)
            check(
                lib.seccomp_rule_add_array(ctx, SCMP_ACT_ERRNO(errno.EPERM), clone, 1, ctypes.byref(cmp)),
                "clone",
            )
        clone3 = lib.seccomp_syscall_resolve_name(b"clone3")
        if clone3 != NR_SCMP_ERROR:
            check(lib.seccomp_rule_add_array(ctx, SCMP_ACT_ERRNO(errno.ENOSYS), clone3, 0, None), "clone3")
        read_fd, write_fd = os.pipe()
        try:
            # A program of a few hundred instructions, far below a pipe's buffer: the export cannot block.
            check(lib.seccomp_export_bpf(ctx, write_fd), "the export")
            os.close(write_fd)
            write_fd = -1
            chunks = []
            while chunk := os.read(read_fd, 1 << 16):
                chunks.append(chunk)
            return b"".join(chunks)
        finally:
            os.close(read_fd)
            if write_fd >= 0:
                os.close(write_fd)
    finally:
        lib.seccomp_release(ctx)


def docker_profile() -> dict:
    """The same filter as a Docker/OCI seccomp profile (HostConfig.SecurityOpt "seccomp=<json>").

    Engines skip names their libseccomp does not know, so one profile serves every arch.
    """
    refused = {"action": "SCMP_ACT_ERRNO", "errnoRet": errno.EPERM}
    rules = [{"names": list(REFUSED), **refused}]
    rules += [
        {
            "names": ["clone"],
            **refused,
            "args": [{"index": 0, "value": flag, "valueTwo": flag, "op": "SCMP_CMP_MASKED_EQ"}],
        }
        for flag in NAMESPACE_FLAGS.values()
    ]
    rules.append({"names": ["clone3"], "action": "SCMP_ACT_ERRNO", "errnoRet": errno.ENOSYS})
    profile: dict = {"defaultAction": "SCMP_ACT_ALLOW", "syscalls": rules}
    arches = DOCKER_ARCHES.get(platform.machine())
    if arches:
        profile["architectures"] = arches
    return profile


if __name__ == "__main__":
    # `python -m sandboxes.backends.seccomp > anneal-sandbox.json`: the profile for an engine or a
    # Kubernetes node (Localhost profiles live under the kubelet's seccomp directory).
    import json
    import sys

    json.dump(docker_profile(), sys.stdout, indent=2)
    sys.stdout.write("\n")
