"""The code a run ran, written on its MLflow run so that the run can be reproduced from the store.

    with mlflow.start_run():
        tag_code_state()        # kw.code.version, kw.code.commit, kw.code.dirty, kw.code.diff_sha256

MLflow records the git commit of the entry point's checkout (`mlflow.source.git.commit`), but not
whether the tree held changes that commit lacks, and a run from such a tree names code nobody can
check out. Here, from the git checkout that tracks the `kernelwright` package imported:

- `kw.code.version`: the package's version (all there is for an installed package: no checkout);
- `kw.code.commit`: HEAD; `kw.code.dirty`: `true` when tracked files differ from it or untracked
  files lie beside them (git's own ignore rules apply);
- with changes, `kw.code.diff_sha256` (the diff's digest, to tell two dirty runs apart) and the
  artifact `code/uncommitted.diff`: `git diff HEAD` of the tracked files, then the untracked files'
  names (their text is not copied), at most MAX_DIFF_BYTES.

A resumed run keeps the state it started with; code that changed between its attempts is tagged
`kw.code.resumed_with` (the new commit, and the new diff's digest). Without git, or outside a
checkout, only the version is written.
"""

from __future__ import annotations

import hashlib
import subprocess
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import mlflow
from mlflow.tracking import MlflowClient

import kernelwright

TAG = "kw.code."
DIFF_ARTIFACT = "code/uncommitted.diff"
MAX_DIFF_BYTES = 4 << 20  # a diff above this is cut (its digest is of the whole)
GIT_TIMEOUT_S = 20.0


@dataclass(frozen=True)
class CodeState:
    version: str
    commit: str = ""  # "" outside a git checkout
    dirty: bool = False
    diff: str = ""  # tracked changes against HEAD, then the untracked files' names

    @property
    def diff_sha256(self) -> str:
        return hashlib.sha256(self.diff.encode()).hexdigest() if self.dirty else ""

    def tags(self) -> dict[str, str]:
        tags = {f"{TAG}version": self.version}
        if self.commit:
            tags |= {f"{TAG}commit": self.commit, f"{TAG}dirty": str(self.dirty).lower()}
        if self.dirty:
            tags[f"{TAG}diff_sha256"] = self.diff_sha256
        return tags

    def brief(self) -> str:
        return _brief(self.commit, self.diff_sha256)


def _brief(commit: str, diff_sha256: str) -> str:
    """The commit, and the diff's digest when the tree was dirty (a clean tree's digest is "")."""
    return commit + (f"+{diff_sha256[:12]}" if diff_sha256 else "")


def _git(root: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, errors="replace",
                              timeout=GIT_TIMEOUT_S, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def read_code_state(package: Path) -> CodeState:
    """The state of the checkout that tracks the package folder `package` (its `__init__.py`): a package
    installed into a virtual environment inside some other repository is not that repository's code."""
    version = kernelwright.__version__
    if _git(package, "ls-files", "--error-unmatch", "__init__.py") is None:
        return CodeState(version)
    root = Path((_git(package, "rev-parse", "--show-toplevel") or str(package)).strip())
    commit = (_git(root, "rev-parse", "HEAD") or "").strip()
    if not commit:
        return CodeState(version)
    tracked = _git(root, "diff", "HEAD", "--no-ext-diff", "--binary") or ""
    untracked = (_git(root, "ls-files", "--others", "--exclude-standard") or "").splitlines()
    listed = "".join(f"untracked: {name}\n" for name in untracked)
    diff = tracked + listed
    return CodeState(version, commit, bool(diff), diff)


@cache
def code_state() -> CodeState:
    """The state of the checkout this package is imported from, read once a process."""
    return read_code_state(Path(kernelwright.__file__).resolve().parent)


def tag_code_state(state: CodeState | None = None) -> None:
    """Write `state` (this process's code) on the active run (module docstring); nothing without one."""
    run = mlflow.active_run()
    if run is None:
        return
    state = state or code_state()
    held = MlflowClient().get_run(run.info.run_id).data.tags
    if f"{TAG}version" in held:  # a resumed run: its first attempt's state stays
        before = _brief(held.get(f"{TAG}commit", ""), held.get(f"{TAG}diff_sha256", ""))  # tagged when dirty only
        if before != state.brief() or held[f"{TAG}version"] != state.version:
            mlflow.set_tag(f"{TAG}resumed_with", f"{state.version} {state.brief()}".strip())
        return
    mlflow.set_tags(state.tags())
    if state.dirty:
        text = state.diff.encode()
        cut = text[:MAX_DIFF_BYTES].decode(errors="ignore")
        mlflow.log_text(cut if len(text) <= MAX_DIFF_BYTES else cut + "\n[cut]\n", DIFF_ARTIFACT)
