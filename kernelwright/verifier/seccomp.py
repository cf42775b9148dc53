"""A seccomp filter for the runner: no reaching into other processes, no network sockets.

    (called by kernelwright.verifier.runner after Landlock, before the candidate is imported)

Runners may share one unprivileged user (`nobody`, where no uid of its own can be had:
runner_uid.py), and a runner's user can reach its own processes, so without more a hostile runner
could attach to another candidate's runner (or to the compilers it starts) and change what that
one computes or reports. `deny_reaching_out` installs, on every thread of the process (TSYNC) and on all it
starts, a filter that answers EPERM to:
- `ptrace`, `process_vm_readv`, `process_vm_writev`, `pidfd_getfd`: another process's memory,
  registers or descriptors;
- a signal to any process but itself (`kill`, `tkill`, `tgkill`, `rt_sigqueueinfo`,
  `rt_tgsigqueueinfo` to another pid, `pidfd_open` of one, any `pidfd_send_signal`, which also
  takes a `/proc/PID` folder): another runner of a shared user could otherwise be killed, and
  its candidate reported as crashed;
- `socket` for AF_INET and AF_INET6: the network, below Python (the runner's channel is a pipe;
  AF_UNIX stays, which the CUDA driver may use);
- any syscall of another ABI (i386's `int 0x80`, x32): the numbers above would not match there.
Everything else is allowed: the filter decides nothing about the GPU. Writing another process's
`/proc/PID/mem` is already out of reach (Landlock: no writes outside the scratch folder). The
process stays dumpable: a non-dumpable one running as `nobody` cannot open its own
`/proc/self/environ`, `auxv` or `mem`, which the CUDA stack may read.

What applied is part of the verdict's `isolation` ("seccomp: ..." or "no seccomp: why").
"""

from __future__ import annotations

import ctypes
import os
import platform
from dataclasses import dataclass

from kernelwright.verifier.sandbox import PR_SET_NO_NEW_PRIVS

_SECCOMP_SET_MODE_FILTER, _SECCOMP_FILTER_FLAG_TSYNC = 1, 1
_RET_ALLOW, _RET_EPERM = 0x7FFF0000, 0x00050000 | 1
_AF_INET, _AF_INET6 = 2, 10
# BPF opcodes: load a word at an absolute offset of seccomp_data, jump if equal / greater-or-equal, return
_LD_ABS, _JEQ, _JGE, _RET = 0x20, 0x15, 0x35, 0x06
_NR, _ARCH, _ARG0 = 0, 4, 16  # offsets in struct seccomp_data (args[0]'s low word, little-endian)


class _Filter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte), ("k", ctypes.c_uint32)]


class _Program(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_Filter))]


@dataclass(frozen=True)
class _Abi:
    arch: int  # AUDIT_ARCH_*
    seccomp: int  # the seccomp syscall
    foreign: int | None  # the first number of another ABI on the same arch (x32), or None
    denied: tuple[int, ...]  # ptrace, process_vm_readv, process_vm_writev, pidfd_getfd, pidfd_send_signal
    self_only: tuple[int, ...]  # kill, tkill, tgkill, rt_sigqueueinfo, rt_tgsigqueueinfo, pidfd_open
    socket: int


_ABIS = {
    "x86_64": _Abi(0xC000003E, 317, 0x40000000, (101, 310, 311, 438, 424), (62, 200, 234, 129, 297, 434), 41),
    "aarch64": _Abi(0xC00000B7, 277, None, (117, 270, 271, 438, 424), (129, 130, 131, 138, 240, 434), 198),
}


def program(machine: str, own_pid: int) -> list[tuple[int, int, int, int]]:
    """The filter for `machine` as (code, jt, jf, k) instructions; jumps count instructions skipped.
    Signals (and pidfds) are allowed only when their first argument is `own_pid` (the kernel reads it
    as an int: the low word is all of it)."""
    abi = _ABIS[machine]
    code = [(_LD_ABS, 0, 0, _ARCH), (_JEQ, 1, 0, abi.arch), (_RET, 0, 0, _RET_EPERM), (_LD_ABS, 0, 0, _NR)]
    if abi.foreign is not None:
        code += [(_JGE, 0, 1, abi.foreign), (_RET, 0, 0, _RET_EPERM)]
    for nr in abi.denied:
        code += [(_JEQ, 0, 1, nr), (_RET, 0, 0, _RET_EPERM)]
    for nr in abi.self_only:  # a block that returns when it matches, or is skipped whole (the number stays loaded)
        code += [(_JEQ, 0, 4, nr), (_LD_ABS, 0, 0, _ARG0), (_JEQ, 0, 1, own_pid), (_RET, 0, 0, _RET_ALLOW),
                 (_RET, 0, 0, _RET_EPERM)]
    code += [(_JEQ, 0, 4, abi.socket), (_LD_ABS, 0, 0, _ARG0), (_JEQ, 1, 0, _AF_INET), (_JEQ, 0, 1, _AF_INET6),
             (_RET, 0, 0, _RET_EPERM), (_RET, 0, 0, _RET_ALLOW)]
    return code


def deny_reaching_out() -> str:
    """Install the filter on every thread of this process (and all it starts); what applied."""
    machine = platform.machine()
    if machine not in _ABIS:
        return f"no seccomp: no filter written for {machine}"
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        return f"no seccomp: no_new_privs failed (errno {ctypes.get_errno()})"
    code = program(machine, os.getpid())
    filters = (_Filter * len(code))(*[_Filter(*ins) for ins in code])
    prog = _Program(len(code), filters)
    installed = libc.syscall(_ABIS[machine].seccomp, _SECCOMP_SET_MODE_FILTER, _SECCOMP_FILTER_FLAG_TSYNC,
                             ctypes.byref(prog))
    if installed != 0:
        return f"no seccomp: the filter was refused (errno {ctypes.get_errno()})"
    return "seccomp: no ptrace, process_vm, pidfd_getfd or inet sockets; signals to itself only"
