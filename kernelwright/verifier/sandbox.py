"""The runner's confinement: who it runs as, where it may write, what it starts from.

- `make_scratch`: the runner's private folder (its builds, temporary files, output files), made by
  the judge, owned by the runner's user;
- `runner_user`: the unprivileged user the runner runs as when the judge is root (`nobody`), so it
  can write none of root's files and cannot reach the judge's memory through /proc; None when the
  judge is not root, or that user cannot run this Python (an interpreter under a private home):
  the runner then shares the judge's user, and Landlock alone confines it;
- `runner_env`: the runner's environment: HOME, TMPDIR and every compiler cache inside the scratch
  folder, nothing that names the judge's files;
- `confine`: called in the runner before the candidate is imported: Landlock (Linux 5.13+,
  unprivileged) lets it write only beneath its scratch folder and to the GPU's device files, for
  itself and every process it starts (the compilers); `no_new_privs` first, as Landlock requires.

What applied is recorded on the verdict (`isolation`), e.g. "user nobody, landlock abi 7".
"""

from __future__ import annotations

import ctypes
import functools
import glob
import logging
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

log = logging.getLogger(__name__)

_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446  # x86-64 and aarch64 alike
_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
PR_SET_NO_NEW_PRIVS = 38  # prctl: Landlock and seccomp filters both need it
_O_PATH = getattr(os, "O_PATH", 0o10000000)


def _write_rights(abi: int) -> int:
    """Every filesystem right that changes something, for a Landlock ABI: write, remove, make
    (bits 1, 4-12), refer (ABI 2), truncate (ABI 3). Reading and executing stay allowed."""
    rights = (1 << 1) | sum(1 << b for b in range(4, 13))
    if abi >= 2:
        rights |= 1 << 13
    if abi >= 3:
        rights |= 1 << 14
    return rights


_RUNNER_USER_LOCK = threading.Lock()


def runner_user() -> tuple[int, int, str] | None:
    """(uid, gid, name) of the user the runner runs as when the judge is root and that user can run
    this Python and import torch and this package; None otherwise. Probed once per process, however
    many of `verify_many`'s threads ask at once (each probe imports torch as that user: seconds of CPU)."""
    with _RUNNER_USER_LOCK:
        return _probed_runner_user()


@functools.cache
def _probed_runner_user() -> tuple[int, int, str] | None:
    if os.geteuid() != 0:
        return None
    try:
        entry = pwd.getpwnam("nobody")
        user = entry.pw_uid, entry.pw_gid, entry.pw_name
    except KeyError:
        user = 65534, 65534, "uid 65534"
    why = _why_not_run_as(user[0], user[1])
    if why:
        log.warning("runners will share the judge's user (root), confined by Landlock and seccomp only: "
                    "%s cannot start one (%s)", user[2], why)
        return None
    return user


def import_roots() -> list[str]:
    """Where the runner imports from: the folder holding the `kernelwright` package the judge runs,
    then the judge's own import folders (those PYTHONPATH added among them, which `-I` drops),
    never the judge's working folder. The runner can write none of them (`confine`)."""
    import kernelwright

    here = os.path.realpath(os.getcwd())
    roots = [str(Path(kernelwright.__file__).resolve().parents[1])]
    roots += [p for p in sys.path if p and os.path.isabs(p) and os.path.isdir(p) and os.path.realpath(p) != here]
    return list(dict.fromkeys(roots))


def _why_not_run_as(uid: int, gid: int) -> str:
    """Why that user cannot start the runner (this Python, torch and what the runner imports); "" if it can."""
    probe = (f"import sys; sys.path[:0] = {import_roots()!r}; "
             "import torch, kernelwright.verifier.runner, kernelwright.cuda.split_build")
    try:
        done = subprocess.run([sys.executable, "-I", "-c", probe], user=uid, group=gid, extra_groups=[],
                              cwd="/", capture_output=True, timeout=120, check=False,
                              env={"PATH": os.environ.get("PATH", ""), "HOME": "/"})
    except (OSError, subprocess.SubprocessError) as exc:
        return f"{type(exc).__name__}: {exc}"[:300]
    if done.returncode != 0:
        lines = done.stderr.decode(errors="replace").strip().splitlines()
        return (lines[-1] if lines else f"exit status {done.returncode}")[:300]
    return ""


def die_with_parent() -> None:
    """SIGKILL this process when its parent ends (PR_SET_PDEATHSIG; a change of user clears it)."""
    import signal

    ctypes.CDLL(None).prctl(1, int(signal.SIGKILL), 0, 0, 0)


def scratch_parent() -> str | None:
    """Where scratch folders go: /dev/shm (memory: the outputs the runner hands over are written
    and read there) where it is a writable folder, else the system's temporary folder."""
    shm = "/dev/shm"
    return shm if os.path.isdir(shm) and os.access(shm, os.W_OK | os.X_OK) else None


def make_scratch(user: tuple[int, int, str] | None, parent: str | None = None) -> Path:
    """A new private folder for one runner, owned by its user (mode 0700)."""
    path = Path(tempfile.mkdtemp(prefix="kw_runner_", dir=parent or scratch_parent()))
    for sub in ("tmp", "out", "builds", "cache"):
        (path / sub).mkdir()
    if user is not None:
        for item in (path, *path.iterdir()):
            os.chown(item, user[0], user[1])
    return path


def remove_scratch(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


KEPT_ENV = ("PATH", "LANG", "LC_ALL", "CUDA_HOME", "CUDA_PATH", "CUDA_VISIBLE_DEVICES", "LD_LIBRARY_PATH",
            "NVIDIA_VISIBLE_DEVICES", "CC", "CXX", "MAX_JOBS", "TORCH_CUDA_ARCH_LIST")


def plain_env() -> dict[str, str]:
    """The judge's environment less everything but what compilers and CUDA need: no credential,
    no path of the judge's own (what the fork server starts with, as its children's first
    environment shows in /proc)."""
    return {k: v for k, v in os.environ.items() if k in KEPT_ENV}


def runner_env(scratch: Path) -> dict[str, str]:
    """The runner's environment: `plain_env`, with HOME, TMPDIR and the compiler caches inside
    `scratch`."""
    env = plain_env()
    cache = scratch / "cache"
    env.update(HOME=str(scratch), TMPDIR=str(scratch / "tmp"), TORCH_EXTENSIONS_DIR=str(scratch / "builds"),
               CUDA_CACHE_PATH=str(cache / "nv"), TRITON_CACHE_DIR=str(cache / "triton"),
               XDG_CACHE_HOME=str(cache), PYTHONDONTWRITEBYTECODE="1", PYTHONHASHSEED="0")
    return env


def _device_files() -> list[str]:
    """Device files the CUDA driver opens for writing (and /dev/null)."""
    return ["/dev/null", *sorted(glob.glob("/dev/nvidia*")), *sorted(glob.glob("/dev/dri/*"))]


def landlock_abi() -> int:
    """The kernel's Landlock ABI version; 0 where there is none (old kernel, disabled, not Linux)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        abi = int(libc.syscall(_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(_RULESET_VERSION)))
    except (OSError, AttributeError):
        return 0
    return max(abi, 0)


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def confine(writable: list[Path]) -> str:
    """Landlock: from now on this process and its children write only beneath `writable` and to
    the device files. Returns what applied ("landlock abi N" or "no landlock: why")."""
    abi = landlock_abi()
    if abi <= 0:
        return "no landlock: the kernel offers none"
    libc = ctypes.CDLL(None, use_errno=True)
    rights = _write_rights(abi)
    handled = ctypes.c_uint64(rights)
    ruleset = int(libc.syscall(_CREATE_RULESET, ctypes.byref(handled), ctypes.c_size_t(8), ctypes.c_uint32(0)))
    if ruleset < 0:
        return f"no landlock: create_ruleset failed (errno {ctypes.get_errno()})"
    try:
        for path in [*map(str, writable), *_device_files()]:
            _allow(libc, ruleset, path, rights if os.path.isdir(path) else rights & _file_rights(abi))
        if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            return f"no landlock: no_new_privs failed (errno {ctypes.get_errno()})"
        if int(libc.syscall(_RESTRICT_SELF, ruleset, ctypes.c_uint32(0))) != 0:
            return f"no landlock: restrict_self failed (errno {ctypes.get_errno()})"
    finally:
        os.close(ruleset)
    return f"landlock abi {abi}"


def _file_rights(abi: int) -> int:
    """The rights that apply to a file (not a folder) rule: write, and truncate from ABI 3."""
    return (1 << 1) | ((1 << 14) if abi >= 3 else 0)


def _allow(libc: ctypes.CDLL, ruleset: int, path: str, rights: int) -> None:
    try:
        fd = os.open(path, _O_PATH | os.O_CLOEXEC)
    except OSError:
        return
    try:
        rule = _PathBeneath(allowed_access=rights, parent_fd=fd)
        libc.syscall(_ADD_RULE, ruleset, ctypes.c_int(_RULE_PATH_BENEATH), ctypes.byref(rule), ctypes.c_uint32(0))
    finally:
        os.close(fd)
