"""The retraining job's deployment files in infra/: linted, schema-checked, and the settings that matter.

yamllint and kubernetes-validate (offline schemas, --strict) come with the dev extra; systemd units
are checked with `systemd-analyze verify` where it is installed (any systemd host), else parsed.
"""

from __future__ import annotations

import configparser
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from kernelwright.config import read_yaml_config
from kernelwright.retrain.config import RetrainConfig
from kernelwright.retrain.schedule import cron_trigger

INFRA = Path(__file__).resolve().parents[2] / "infra"
CRONJOB = INFRA / "k8s" / "retrain-cronjob.yaml"
UNITS = sorted((INFRA / "systemd").glob("kernelwright-*"))
YAMLLINT = "{extends: default, rules: {line-length: {max: 120}, document-start: disable}}"


def _docs() -> dict[str, dict]:
    return {d["kind"]: d for d in yaml.safe_load_all(CRONJOB.read_text())}


def test_yaml_files_pass_yamllint() -> None:
    from yamllint import linter
    from yamllint.config import YamlLintConfig

    conf = YamlLintConfig(YAMLLINT)
    for path in [CRONJOB, INFRA / "retrain.example.yaml"]:
        problems = [f"{path.name}:{p.line}: {p.message}" for p in linter.run(path.read_text(), conf)]
        assert problems == []


def test_manifests_pass_the_kubernetes_schemas_strictly() -> None:
    import kubernetes_validate
    from kubernetes_validate.utils import latest_version

    for doc in yaml.safe_load_all(CRONJOB.read_text()):
        kubernetes_validate.validate(doc, latest_version(), strict=True)  # raises on any error


def test_the_cronjob_never_overlaps_has_a_deadline_and_a_gpu() -> None:
    docs = _docs()
    spec = docs["CronJob"]["spec"]
    assert spec["concurrencyPolicy"] == "Forbid" and 0 < spec["startingDeadlineSeconds"] <= 24 * 3600
    cron_trigger(spec["schedule"], spec["timeZone"])  # the same expression kernelwright schedule takes
    pod = spec["jobTemplate"]["spec"]["template"]["spec"]
    assert pod["restartPolicy"] == "Never"
    (container,) = pod["containers"]
    assert container["args"][:3] == ["retrain", "--config", "/etc/kernelwright/retrain.yaml"]
    assert container["args"][3:] == ["--lock-uri", "$(KERNELWRIGHT_LOCK_URI)"]  # one lock across pods
    assert container["resources"]["limits"]["nvidia.com/gpu"] == 1
    env = {e["name"] for e in container["env"]}
    assert {"KERNELWRIGHT_WORKDIR", "MLFLOW_TRACKING_URI", "KERNELWRIGHT_LOCK_URI"} <= env
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["work"]["persistentVolumeClaim"]["claimName"] == docs["PersistentVolumeClaim"]["metadata"]["name"]


def test_the_shipped_retrain_configs_hold_only_retrain_fields(tmp_path: Path) -> None:
    (tmp_path / "cm.yaml").write_text(_docs()["ConfigMap"]["data"]["retrain.yaml"])
    for path in (tmp_path / "cm.yaml", INFRA / "retrain.example.yaml"):
        RetrainConfig(**read_yaml_config(path, RetrainConfig))


def _unit(path: Path) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None, strict=True)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string(path.read_text())
    return parser


def test_the_systemd_timer_is_persistent_and_the_service_oneshot() -> None:
    timer = _unit(INFRA / "systemd" / "kernelwright-retrain.timer")
    assert timer["Timer"]["Persistent"] == "true" and timer["Timer"]["Unit"] == "kernelwright-retrain.service"
    assert timer["Timer"]["OnCalendar"] == "Sun *-*-* 03:00:00" and timer["Install"]["WantedBy"] == "timers.target"
    service = _unit(INFRA / "systemd" / "kernelwright-retrain.service")["Service"]
    assert service["Type"] == "oneshot" and service["SuccessExitStatus"] == "75"  # 75: the lock was held
    assert service["ExecStart"].split()[1:] == ["retrain", "--config", "/etc/kernelwright/retrain.yaml"]
    schedule = _unit(INFRA / "systemd" / "kernelwright-schedule.service")["Service"]
    assert schedule["Type"] == "simple" and " schedule --cron " in schedule["ExecStart"]


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed here")
def test_the_systemd_units_pass_systemd_analyze_verify(tmp_path: Path) -> None:
    kernelwright = Path(sys.executable).with_name("kernelwright")  # ExecStart must exist: point it at ours
    for unit in UNITS:
        (tmp_path / unit.name).write_text(unit.read_text().replace("/opt/kernelwright/.venv/bin/kernelwright",
                                                                   str(kernelwright)))
    done = subprocess.run(["systemd-analyze", "verify", *sorted(str(p) for p in tmp_path.iterdir())],
                          capture_output=True, text=True, timeout=60)
    complaints = [line for line in done.stderr.splitlines() if any(
        w in line for w in ("Unknown", "Failed", "ignoring", "bad", "Refusing"))]
    assert done.returncode == 0 and complaints == [], done.stderr
    calendar = subprocess.run(["systemd-analyze", "calendar", "Sun *-*-* 03:00:00"], capture_output=True, text=True)
    assert calendar.returncode == 0 and "Sun" in calendar.stdout
