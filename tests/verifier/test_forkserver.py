"""The fork server: children with the descriptors, folder and environment asked for, their exit
status reported, killed when their client goes, and requests refused by who asks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kernelwright.verifier.forkserver import ForkServer, SpawnRefused, started_server
from kernelwright.verifier.sandbox import KEPT_ENV, import_roots, plain_env
from kernelwright.verifier.spec import Spec


@pytest.fixture(scope="module")
def server() -> Iterator[ForkServer]:
    with started_server(import_roots(), plain_env()) as s:
        yield s


def _null_fds() -> tuple[int, int]:
    return os.open(os.devnull, os.O_RDONLY), os.open(os.devnull, os.O_WRONLY)


def test_a_judge_child_gets_its_stderr_folder_and_environment_and_its_exit_is_reported(
        server: ForkServer, tmp_path: Path) -> None:
    missing = tmp_path / "no_such_spec.json"
    import tempfile

    tempfile.gettempdir()  # cached in this process: a child still takes its own TMPDIR
    null_in, null_out = _null_fds()
    with (tmp_path / "err").open("w+b") as err:
        child = server.spawn("judge", [str(missing)], str(tmp_path), {"KW_MARK": "1", "PATH": os.environ["PATH"]},
                             (null_in, null_out, err.fileno()), new_session=True)
        code = child.wait(timeout=60)
        err.seek(0)
        said = err.read().decode()
    os.close(null_in)
    os.close(null_out)
    assert code == 70 and "FileNotFoundError" in said and str(missing) in said


def test_a_judge_forks_its_runner_through_the_server_and_reaches_a_verdict(server: ForkServer,
                                                                          tmp_path: Path) -> None:
    """On a machine without CUDA the runner cannot start: the verdict says so, through both forks."""
    fixtures = Path(__file__).parent.parent / "fixtures" / "verify"
    spec = Spec(problem=str(fixtures / "problems" / "affine.py"),
                candidate=str(fixtures / "candidates" / "honest_affine.py"),
                result=str(tmp_path / "result.json"), forkserver=server.path)
    spec_path = tmp_path / "spec.json"
    from dataclasses import asdict

    spec_path.write_text(json.dumps(asdict(spec)))
    null_in, null_out = _null_fds()
    with (tmp_path / "err").open("w+b") as err:
        child = server.spawn("judge", [str(spec_path)], str(tmp_path), dict(os.environ),
                             (null_in, null_out, err.fileno()), new_session=True)
        assert child.wait(timeout=120) == 0
    os.close(null_in)
    os.close(null_out)
    state = json.loads((tmp_path / "result.json").read_text())
    assert isinstance(state.get("runner_pid"), int)  # the runner was the server's child, not the judge's
    assert state["verdict"]["status"] != "correct"


def test_a_child_whose_client_goes_is_killed(server: ForkServer, tmp_path: Path) -> None:
    fifo = tmp_path / "spec.fifo"
    os.mkfifo(fifo)  # the judge blocks reading its spec
    null_in, null_out = _null_fds()
    child = server.spawn("judge", [str(fifo)], str(tmp_path), {}, (null_in, null_out, null_out), new_session=True)
    os.close(null_in)
    os.close(null_out)
    assert child.poll() is None
    child.close()
    for _ in range(200):
        if not Path(f"/proc/{child.pid}").exists() or "Z" in _state(child.pid):
            break
        time.sleep(0.05)
    assert not Path(f"/proc/{child.pid}").exists() or "Z" in _state(child.pid)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


def test_runner_requests_from_anyone_but_a_judge_of_its_own_are_refused(server: ForkServer, tmp_path: Path) -> None:
    null_in, null_out = _null_fds()
    with pytest.raises(SpawnRefused, match="refused"):  # the owner is no judge
        server.spawn("runner", [str(tmp_path / "settings.json")], str(tmp_path), {}, (null_in, null_out, null_out))
    with pytest.raises(SpawnRefused, match="unknown kind"):
        server.spawn("shell", ["-c", "true"], str(tmp_path), {}, (null_in, null_out, null_out))
    os.close(null_in)
    os.close(null_out)


def test_judge_requests_from_another_process_are_refused(server: ForkServer, tmp_path: Path) -> None:
    """A process that is not the server's owner (a runner, a compiler it started) gets nothing."""
    code = ("import os, sys; from kernelwright.verifier.forkserver import spawn, SpawnRefused\n"
            "n = os.open(os.devnull, os.O_RDWR)\n"
            "try:\n    spawn(sys.argv[1], 'judge', ['x'], '/', {}, (n, n, n))\nexcept SpawnRefused as e:\n"
            "    print('refused' if 'refused' in str(e) else e)\nelse:\n    print('spawned')\n")
    done = subprocess.run([sys.executable, "-c", code, server.path], capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, PYTHONPATH=os.pathsep.join(import_roots())), check=False)
    assert done.stdout.strip() == "refused", done.stderr[-2000:]


def test_the_server_starts_with_no_credential_in_its_environment(server: ForkServer) -> None:
    """A runner's first environment (/proc/self/environ) is the server's: only what compilers need."""
    assert server.proc is not None
    first = Path(f"/proc/{server.proc.pid}/environ").read_bytes().split(b"\0")
    names = {item.split(b"=", 1)[0].decode() for item in first if item}
    assert names <= set(KEPT_ENV), names - set(KEPT_ENV)
