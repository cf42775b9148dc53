"""A fork server: judges and runners forked from one process that has already imported torch and
the verifier, instead of each starting Python and importing torch (several CPU-seconds apiece on a
GPU host, where a judged candidate is CPU-bound).

    with started_server() as server:          # verify_many, around all its candidates
        child = server.spawn("judge", [spec_path], cwd=..., env=..., fds=(0, 1, 2))

- The server is started like a runner (`python -I`, the judge's import folders first); it holds
  nothing of any candidate, seed or verdict: it imports, listens, forks. CUDA is never initialised
  in it, so every child starts its own context.
- It listens on a SEQPACKET socket in a folder only its user may enter, and answers by the peer's
  credentials: `judge` requests only from its owner (the process that started it), `runner`
  requests only from a live judge it forked. A runner, or anything a runner starts, is refused.
- A child takes the three descriptors sent with the request as its stdin, stdout and stderr, its
  own working folder and environment, a new session if asked, and drops to the requested user
  (groups, gid, uid) before any of its own code runs; then `main(argv)` of its kind, `os._exit`.
- The client holds the connection: the server sends the child's pid, then its exit status (as
  `Popen.returncode` reads: negative for a signal), and kills the child if the connection closes
  first, so a judge that dies takes its runner with it. The server dies with its owner.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import selectors
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kernelwright.verifier.sandbox import die_with_parent

KINDS = {"judge": "kernelwright.verifier.judge", "runner": "kernelwright.verifier.runner"}
# torch only, not its lazily imported parts (torch._dynamo): importing those can touch the CUDA
# driver, which a forked child then cannot start again
PRELOAD = ("torch", *KINDS.values(), "kernelwright.cuda.split_build")
MAX_REQUEST = 1 << 20
START_S = 180.0  # the server's own start (Python, torch) on a busy host

BOOT = ("import os, sys; roots = sys.argv.pop(1).split(os.pathsep); sys.path[:0] = roots; "
        "from kernelwright.verifier.forkserver import serve; serve(sys.argv[1], int(sys.argv[2]))")


class SpawnRefused(RuntimeError):
    """The server would not (or could not) start the child."""


# ------------------------------------------------------------------ client side


@dataclass
class Spawned:
    """A child of the fork server, with the part of `subprocess.Popen`'s interface the judge and
    verify.py use: pid, poll, wait, send_signal, kill, returncode."""

    pid: int
    conn: socket.socket
    returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self._read(0.0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.returncode is None:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise subprocess.TimeoutExpired(f"pid {self.pid}", timeout or 0.0)
            self._read(left)
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def close(self) -> None:
        """Drop the connection: the server kills the child if it still runs."""
        with contextlib.suppress(OSError):
            self.conn.close()

    def _read(self, timeout: float | None) -> None:
        self.conn.settimeout(timeout)
        try:
            data = self.conn.recv(4096)
        except (TimeoutError, BlockingIOError):
            return
        except OSError:
            data = b""
        if not data:  # the server is gone: the child with it (its parent-death signal)
            self.returncode = -signal.SIGKILL
            return
        self.returncode = int(json.loads(data)["exit"])


@dataclass
class ForkServer:
    """A running server: its socket and process (the owner's handle)."""

    path: str
    proc: subprocess.Popen | None = None
    _folder: str = field(default="", repr=False)

    def spawn(self, kind: str, argv: Sequence[str], cwd: str, env: dict[str, str],
              fds: tuple[int, int, int], user: tuple[int, int] | None = None,
              new_session: bool = False) -> Spawned:
        return spawn(self.path, kind, argv, cwd, env, fds, user, new_session)

    def stop(self) -> None:
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=10)
        if self._folder:
            with contextlib.suppress(OSError):
                Path(self.path).unlink()
                os.rmdir(self._folder)


def spawn(path: str, kind: str, argv: Sequence[str], cwd: str, env: dict[str, str], fds: tuple[int, int, int],
          user: tuple[int, int] | None = None, new_session: bool = False) -> Spawned:
    """Ask the server at `path` for a child of `kind`; SpawnRefused when it refuses or is gone."""
    if kind not in KINDS:
        raise SpawnRefused(f"unknown kind {kind!r}")
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        conn.settimeout(START_S)
        conn.connect(path)
        request = {"kind": kind, "argv": list(argv), "cwd": cwd, "env": env,
                   "user": list(user) if user else None, "new_session": new_session}
        socket.send_fds(conn, [json.dumps(request).encode()], list(fds))
        reply = json.loads(conn.recv(4096) or b'{"error": "the fork server closed the connection"}')
    except (OSError, ValueError) as exc:
        conn.close()
        raise SpawnRefused(f"fork server at {path}: {exc}") from None
    if "pid" not in reply:
        conn.close()
        raise SpawnRefused(str(reply.get("error", "no pid in the reply"))[:300])
    return Spawned(int(reply["pid"]), conn)


@contextlib.contextmanager
def started_server(roots: Sequence[str], env: dict[str, str] | None = None) -> Iterator[ForkServer]:
    """A fork server for this process (its owner), stopped on exit; roots: the import folders."""
    folder = tempfile.mkdtemp(prefix="kw_forks_")  # 0700: no other user reaches the socket
    path = os.path.join(folder, "socket")
    cmd = [sys.executable, "-I", "-c", BOOT, os.pathsep.join(roots), path, str(os.getpid())]
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, env=env, close_fds=True)
    server = ForkServer(path, proc, folder)
    try:
        ready = proc.stdout is not None and select.select([proc.stdout], [], [], START_S)[0]
        line = proc.stdout.readline() if ready and proc.stdout is not None else b""  # "ready" once it listens
        if line.strip() != b"ready":
            raise SpawnRefused(f"the fork server did not start (exit {proc.poll()})")
        yield server
    finally:
        server.stop()


# ------------------------------------------------------------------ server side


def _peer(conn: socket.socket) -> tuple[int, int]:
    pid, uid, _gid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
    return pid, uid


@dataclass
class _Server:
    owner: int
    sel: selectors.BaseSelector
    children: dict[int, tuple[socket.socket, bool]] = field(default_factory=dict)  # pid -> (conn, own group)
    judges: set[int] = field(default_factory=set)
    pending: set[socket.socket] = field(default_factory=set)  # connected, no child yet

    def accept(self, listener: socket.socket) -> None:
        with contextlib.suppress(OSError):
            conn, _ = listener.accept()
            self.pending.add(conn)
            self.sel.register(conn, selectors.EVENT_READ)

    def readable(self, conn: socket.socket) -> None:
        if conn in self.pending:
            self.pending.discard(conn)
            self._request(conn)
            return
        with contextlib.suppress(OSError):
            if conn.recv(16):
                return  # a client has nothing to say after its request
        for pid, (c, group) in list(self.children.items()):  # the client is gone: so is its child
            if c is conn:
                _kill(pid, group)

    def _request(self, conn: socket.socket) -> None:
        fds: list[int] = []
        try:
            data, fds, _flags, _addr = socket.recv_fds(conn, MAX_REQUEST, 3)
            req = json.loads(data)
            refusal = self._refusal(conn, req, fds)
            if refusal:
                conn.send(json.dumps({"error": refusal}).encode())
                self._drop(conn)
                return
            pid = _fork(req, fds)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            with contextlib.suppress(OSError):
                conn.send(json.dumps({"error": f"bad request: {exc}"[:300]}).encode())
            self._drop(conn)
            return
        finally:
            for fd in fds:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self.children[pid] = (conn, bool(req.get("new_session")))
        if req["kind"] == "judge":
            self.judges.add(pid)
        with contextlib.suppress(OSError):
            conn.send(json.dumps({"pid": pid}).encode())

    def _refusal(self, conn: socket.socket, req: dict, fds: list[int]) -> str:
        pid, uid = _peer(conn)
        kind = req.get("kind")
        if uid != os.getuid() or kind not in KINDS or len(fds) != 3:
            return "refused"
        if kind == "judge" and pid != self.owner or kind == "runner" and pid not in self.judges:
            return "refused"
        return ""

    def _drop(self, conn: socket.socket) -> None:
        with contextlib.suppress(KeyError, ValueError):
            self.sel.unregister(conn)
        conn.close()

    def reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
            self.judges.discard(pid)
            entry = self.children.pop(pid, None)
            if entry is not None:
                with contextlib.suppress(OSError):
                    entry[0].send(json.dumps({"exit": code}).encode())
                self._drop(entry[0])


def _kill(pid: int, group: bool) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL) if group else os.kill(pid, signal.SIGKILL)


def _fork(req: dict, fds: list[int]) -> int:
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        _child(req, fds)  # never returns
    return pid


def _child(req: dict, fds: list[int]) -> None:
    code = 70
    try:
        if req.get("new_session"):
            os.setsid()
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        os.closerange(3, 65536)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        os.chdir(str(req["cwd"]))
        os.environ.clear()
        os.environ.update({str(k): str(v) for k, v in dict(req["env"]).items()})
        tempfile.tempdir = None  # the server's cached /tmp: a child's temporary folder is its own TMPDIR's
        if req.get("user"):
            uid, gid = int(req["user"][0]), int(req["user"][1])
            os.setgroups([])
            os.setgid(gid)
            os.setuid(uid)
        die_with_parent()  # after the change of user, which clears it
        sys.dont_write_bytecode = True
        module = sys.modules[KINDS[str(req["kind"])]]
        argv = [str(a) for a in req["argv"]]
        sys.argv = [module.__name__, *argv]
        code = int(module.main(argv) or 0)
    except SystemExit as done:
        code = done.code if isinstance(done.code, int) else 1
    except BaseException:  # noqa: BLE001 - a child reports its own failure on its stderr and exits
        with contextlib.suppress(Exception):
            os.write(2, traceback.format_exc().encode(errors="replace")[-8000:])
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def serve(path: str, owner: int) -> None:
    """The server's loop (in its own process): fork on request until the owner is gone."""
    import importlib

    die_with_parent()  # the server dies with its owner
    for name in PRELOAD:
        importlib.import_module(name)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(path)
    listener.listen(256)
    sel = selectors.DefaultSelector()
    sel.register(listener, selectors.EVENT_READ)
    server = _Server(owner, sel)
    os.write(1, b"ready\n")
    while os.getppid() == owner:
        for key, _ in sel.select(timeout=0.05):
            sock = key.fileobj
            assert isinstance(sock, socket.socket)
            if sock is listener:
                server.accept(listener)
            else:
                server.readable(sock)
        server.reap()
    for pid, (_, group) in list(server.children.items()):
        _kill(pid, group)
