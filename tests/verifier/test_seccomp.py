"""The runner's seccomp filter (kernelwright.verifier.seccomp): the program, and the filter applied."""

from __future__ import annotations

import os
import platform
import signal
import subprocess
import sys

import pytest

from kernelwright.verifier.seccomp import _ABIS, program

ALLOW, EPERM = 0x7FFF0000, 0x00050001


OWN = 4242  # the pid the filter is pinned to in the interpreter's runs


def run_filter(machine: str, arch: int, nr: int, arg0: int = 0) -> int:
    """What the filter returns for one syscall: a small classic-BPF interpreter over seccomp_data."""
    data = {0: nr, 4: arch, 16: arg0 & 0xFFFFFFFF}
    acc, pc, code = 0, 0, program(machine, OWN)
    while True:
        op, jt, jf, k = code[pc]
        if op == 0x20:
            acc, pc = data[k], pc + 1
        elif op in (0x15, 0x35):
            hit = acc == k if op == 0x15 else acc >= k
            pc += 1 + (jt if hit else jf)
        else:
            assert op == 0x06
            return k


@pytest.mark.parametrize("machine", sorted(_ABIS))
def test_the_program_denies_exactly_the_reaching_out(machine: str) -> None:
    abi = _ABIS[machine]
    arch, foreign, denied, socket_nr = abi.arch, abi.foreign, abi.denied, abi.socket
    for nr in abi.self_only:  # signals: to itself only (another pid, a process group, every process: refused)
        assert run_filter(machine, arch, nr, OWN) == ALLOW
        assert [run_filter(machine, arch, nr, pid) for pid in (OWN + 1, 1, 0, -1, -OWN)] == [EPERM] * 5
    for nr in denied:
        assert run_filter(machine, arch, nr) == EPERM
    assert run_filter(machine, arch, socket_nr, 2) == EPERM  # AF_INET
    assert run_filter(machine, arch, socket_nr, 10) == EPERM  # AF_INET6
    assert run_filter(machine, arch, socket_nr, 1) == ALLOW  # AF_UNIX
    for nr in (0, 1, 9, 16, 56, 59, 231, 435):  # read, write, mmap, ioctl, clone, execve, exit_group, clone3
        if nr not in denied and nr not in abi.self_only and nr != socket_nr:
            assert run_filter(machine, arch, nr) == ALLOW
    assert run_filter(machine, 0x40000003, 0) == EPERM  # i386 ABI: its numbers mean other calls
    if foreign is not None:
        assert run_filter(machine, arch, foreign | denied[0]) == EPERM  # x32: the same call, another number


APPLIED = r"""
import ctypes, os, signal, socket, subprocess, sys, threading
from kernelwright.verifier.seccomp import deny_reaching_out
sibling = subprocess.Popen(["sleep", "60"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)  # another process of the same user, started before
print(sibling.pid)
go, seen = threading.Event(), {}
def early():  # a thread started before the filter: TSYNC covers it
    go.wait()
    try:
        socket.socket(socket.AF_INET); seen["thread"] = "allowed"
    except PermissionError:
        seen["thread"] = "EPERM"
t = threading.Thread(target=early); t.start()
print(deny_reaching_out())
go.set(); t.join(); print("thread", seen["thread"])
libc = ctypes.CDLL(None, use_errno=True)
print("ptrace", libc.ptrace(16, os.getppid(), 0, 0), ctypes.get_errno())  # PTRACE_ATTACH to the test
buf = ctypes.create_string_buffer(8)
iov = (ctypes.c_void_p * 2)(ctypes.cast(buf, ctypes.c_void_p), 8)
print("vm_readv", libc.process_vm_readv(os.getppid(), iov, 1, iov, 1, 0), ctypes.get_errno())
socket.socket(socket.AF_UNIX).close(); print("unix ok")
child = subprocess.run([sys.executable, "-c", "import socket; socket.socket(socket.AF_INET6)"], capture_output=True)
print("child", "EPERM" if b"PermissionError" in child.stderr else child.returncode)
try:
    os.kill(sibling.pid, signal.SIGKILL); print("kill allowed")
except PermissionError:
    print("kill EPERM")
os.kill(os.getpid(), 0); signal.pthread_kill(threading.main_thread().ident, 0); print("self signals ok")
print("own /proc", len(os.listdir("/proc/self/task")) > 0, len(open("/proc/self/maps").read()) > 0,
      len(open("/proc/self/environ", "rb").read()) > 0, os.path.exists(os.readlink("/proc/self/exe")))
"""


@pytest.mark.skipif(platform.machine() not in _ABIS, reason=f"no filter written for {platform.machine()}")
def test_applied_it_holds_for_every_thread_and_child_and_leaves_the_rest() -> None:
    done = subprocess.run([sys.executable, "-c", APPLIED], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    sibling, *lines = done.stdout.splitlines()
    os.kill(int(sibling), signal.SIGKILL)  # still alive: the filtered process could not kill it
    assert lines[0].startswith("seccomp: ")
    assert lines[1:] == ["thread EPERM", "ptrace -1 1", "vm_readv -1 1", "unix ok", "child EPERM", "kill EPERM",
                         "self signals ok", "own /proc True True True True"]
