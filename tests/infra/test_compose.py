"""infra/compose.yaml: the Compose Specification's schema (check-jsonschema's vendored copy, offline)
and the settings that matter: GPU reservations, health checks behind every depends_on condition,
kernelwright command lines that parse, the server on 0.0.0.0, credentials only where they are used."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.infra._infra import INFRA, interpolate, parse_command, validator

COMPOSE = INFRA / "compose.yaml"
ENV_EXAMPLE = INFRA / "compose.env.example"
KERNELWRIGHT = {"mlflow", "server", "scheduler", "trainer"}
GPU = [{"driver": "nvidia", "count": 1, "capabilities": ["gpu"]}]


def example_env() -> dict[str, str]:
    lines = [line for line in ENV_EXAMPLE.read_text().splitlines() if line and not line.startswith("#")]
    return dict(line.split("=", 1) for line in lines)


@pytest.fixture(scope="module")
def services() -> dict[str, Any]:
    return yaml.safe_load(interpolate(COMPOSE.read_text(), example_env()))["services"]


def test_the_compose_schema_accepts_it() -> None:
    done = subprocess.run([validator("check-jsonschema"), "--builtin-schema", "vendor.compose-spec", str(COMPOSE)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


def test_secrets_have_no_defaults_and_the_example_marks_each_placeholder() -> None:
    required = set(re.findall(r"\$\{(\w+):\?", COMPOSE.read_text()))
    assert {"POSTGRES_PASSWORD", "MINIO_ROOT_PASSWORD", "KERNELWRIGHT_API_KEYS"} <= required
    env = example_env()
    assert all(env.get(name) == "change-me" for name in required)
    with pytest.raises(AssertionError, match="required"):  # compose refuses to start without them
        interpolate(COMPOSE.read_text(), {})


def test_gpu_reservations_where_kernels_are_built_or_generated(services: dict[str, Any]) -> None:
    for name in ("scheduler", "trainer", "server"):
        assert services[name]["deploy"]["resources"]["reservations"]["devices"] == GPU, name
    for name in ("postgres", "minio", "minio-init", "mlflow"):
        assert "deploy" not in services[name], name


def test_every_depends_on_condition_can_be_met(services: dict[str, Any]) -> None:
    for name, service in services.items():
        for dep, cond in service.get("depends_on", {}).items():
            target = services[dep]
            if cond["condition"] == "service_healthy":
                assert "test" in target.get("healthcheck", {}), f"{name} waits for {dep}, which has no healthcheck"
            elif cond["condition"] == "service_completed_successfully":
                assert target.get("restart") == "no", f"{name} waits for {dep} to exit, but it restarts"
            assert "profiles" not in target, f"{name} depends on {dep}, which only starts in a profile"
    assert services["mlflow"]["depends_on"] == {"postgres": {"condition": "service_healthy"},
                                                "minio-init": {"condition": "service_completed_successfully"}}
    assert services["minio-init"]["depends_on"] == {"minio": {"condition": "service_healthy"}}
    for name in ("server", "scheduler", "trainer"):
        assert services[name]["depends_on"] == {"mlflow": {"condition": "service_healthy"}}
    for name in ("postgres", "minio", "mlflow", "server", "scheduler"):
        assert services[name]["healthcheck"]["test"][0] in ("CMD", "CMD-SHELL"), name


def test_images_come_from_the_dockerfile_with_the_right_base(services: dict[str, Any]) -> None:
    def build_args(name: str) -> dict[str, str]:
        build = services[name]["build"]
        assert build["context"] == ".." and (INFRA / ".." / build["dockerfile"]).resolve() == INFRA / "Dockerfile"
        return build.get("args", {})

    assert build_args("mlflow") == {}  # the Dockerfile's defaults: python slim and CPU torch
    for name, kind in (("scheduler", "devel"), ("trainer", "devel"), ("server", "runtime")):
        a = build_args(name)
        assert re.fullmatch(rf"nvidia/cuda:[\d.]+-{kind}-ubuntu24\.04", a["BASE_IMAGE"]), name
        assert a["TORCH_INDEX_URL"].startswith("https://download.pytorch.org/whl/cu") and "gpu" in a["EXTRAS"]


def _published(service: dict[str, Any]) -> set[int]:
    return {int(p.rsplit(":", 1)[1]) for p in service.get("ports", [])}


def test_the_server_binds_all_interfaces_on_its_published_port(services: dict[str, Any]) -> None:
    server = services["server"]
    cfg = parse_command(server["command"])
    assert cfg.host == "0.0.0.0" and cfg.port in _published(server)
    assert cfg.model.startswith("models:/") and server["environment"]["MLFLOW_TRACKING_URI"] == "http://mlflow:5000"
    assert f"127.0.0.1:{cfg.port}/readyz" in server["healthcheck"]["test"][-1]
    assert server["environment"]["KERNELWRIGHT_API_KEYS"]  # listening beyond loopback: keys are set


def test_the_mlflow_server_on_postgresql_and_the_bucket_minio_init_creates(services: dict[str, Any]) -> None:
    mlflow = services["mlflow"]
    cfg = parse_command(mlflow["command"])
    assert cfg.host == "0.0.0.0" and cfg.port in _published(mlflow) and cfg.serve_artifacts
    assert cfg.backend_store_uri == "postgresql://kernelwright@postgres:5432/mlflow"  # no password in argv
    assert f"127.0.0.1:{cfg.port}/health" in mlflow["healthcheck"]["test"][-1]
    assert {"mlflow", f"mlflow:{cfg.port}"} <= set(cfg.allowed_hosts.split(","))
    bucket = services["minio-init"]["environment"]["BUCKET"]
    assert cfg.artifacts_destination.startswith(f"s3://{bucket}/")
    assert "mc mb --ignore-existing" in services["minio-init"]["command"][0]
    env = mlflow["environment"]
    assert env["PGPASSWORD"] == services["postgres"]["environment"]["POSTGRES_PASSWORD"]
    assert env["AWS_SECRET_ACCESS_KEY"] == services["minio"]["environment"]["MINIO_ROOT_PASSWORD"]
    assert env["MLFLOW_S3_ENDPOINT_URL"] == "http://minio:9000"
    store_env = {"PGPASSWORD", "AWS_SECRET_ACCESS_KEY", "MLFLOW_S3_ENDPOINT_URL"}
    for name in KERNELWRIGHT - {"mlflow"}:  # the store's credentials stay on the MLflow server
        assert not store_env & set(services[name]["environment"]), name


def test_the_scheduler_and_the_trainer_run_retrain_on_one_work_volume(services: dict[str, Any],
                                                                     tmp_path: Path) -> None:
    from kernelwright.retrain.schedule import cron_trigger

    example = INFRA / "retrain.example.yaml"
    files = {"/etc/kernelwright/retrain.yaml": example}
    scheduler, trainer = services["scheduler"], services["trainer"]
    cfg = parse_command(scheduler["command"], files)
    cron_trigger(cfg.cron, cfg.timezone)
    assert cfg.retrain_config == str(example)
    parse_command(trainer["command"], files)  # retrain --config: RetrainConfig fields only
    assert trainer["profiles"] == ["manual"]
    for service in (scheduler, trainer):
        mounts = {v.split(":")[1]: v.split(":")[0] for v in service["volumes"]}
        assert mounts["/var/lib/kernelwright"] == "work"  # one lock and one set of checkpoints
        assert service["environment"]["KERNELWRIGHT_WORKDIR"] == "/var/lib/kernelwright"
        assert (INFRA / mounts["/etc/kernelwright/retrain.yaml"]).resolve() == example
        assert service["environment"]["MLFLOW_TRACKING_URI"] == "http://mlflow:5000"


def test_every_kernelwright_service_runs_a_command_that_exists(services: dict[str, Any]) -> None:
    for name in KERNELWRIGHT:
        assert services[name]["image"].startswith("kernelwright:"), name
        command = services[name]["command"]
        parse_command(command, {"/etc/kernelwright/retrain.yaml": INFRA / "retrain.example.yaml"})
