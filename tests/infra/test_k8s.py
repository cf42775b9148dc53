"""infra/k8s/: the Kubernetes schemas (kubernetes-validate, offline, --strict) and the settings that
matter: the server's probes and GPU, Secrets of placeholders, every reference to a Secret or ConfigMap
key resolving inside the set, the CronJob's overlap and deadline, command lines that parse."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.infra._infra import INFRA, K8S, parse_command

MANIFESTS = sorted(p for p in K8S.glob("*.yaml") if p.name != "kustomization.yaml")
UID = 10001  # the Dockerfile's KERNELWRIGHT_UID


def _docs() -> list[dict[str, Any]]:
    return [d for p in MANIFESTS for d in yaml.safe_load_all(p.read_text()) if d]


@pytest.fixture(scope="module")
def docs() -> dict[tuple[str, str], dict[str, Any]]:
    return {(d["kind"], d["metadata"]["name"]): d for d in _docs()}


def _pod(doc: dict[str, Any]) -> dict[str, Any]:
    spec = doc["spec"]
    return (spec["jobTemplate"]["spec"] if doc["kind"] == "CronJob" else spec)["template"]["spec"]


def _workloads(docs: dict[tuple[str, str], dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {name: doc for (kind, name), doc in docs.items() if kind in ("Deployment", "CronJob")}


def _env(container: dict[str, Any], docs: dict[tuple[str, str], dict[str, Any]]) -> dict[str, str]:
    """The container's environment as the kubelet builds it (Secret values as they stand)."""
    env: dict[str, str] = {}
    for source in container.get("envFrom", []):
        env.update(docs["ConfigMap", source["configMapRef"]["name"]]["data"])
    for e in container.get("env", []):
        ref = e.get("valueFrom", {})
        if "configMapKeyRef" in ref:
            env[e["name"]] = docs["ConfigMap", ref["configMapKeyRef"]["name"]]["data"][ref["configMapKeyRef"]["key"]]
        elif "secretKeyRef" in ref:
            env[e["name"]] = docs["Secret", ref["secretKeyRef"]["name"]]["stringData"][ref["secretKeyRef"]["key"]]
        else:
            env[e["name"]] = e["value"]
    return env


def _args(container: dict[str, Any], docs: dict[tuple[str, str], dict[str, Any]]) -> list[str]:
    env = _env(container, docs)
    return [re.sub(r"\$\((\w+)\)", lambda m: env[m.group(1)], a) for a in container["args"]]


def _mounted(doc: dict[str, Any], docs: dict[tuple[str, str], dict[str, Any]], tmp_path: Path) -> dict[str, Path]:
    """Files the pod mounts from ConfigMaps, as local copies: {path in the container: copy}."""
    pod = _pod(doc)
    files = {}
    for mount in pod["containers"][0].get("volumeMounts", []):
        volume = next(v for v in pod["volumes"] if v["name"] == mount["name"])
        if "configMap" in volume:
            data = docs["ConfigMap", volume["configMap"]["name"]]["data"]
            items = volume["configMap"].get("items") or [{"key": k, "path": k} for k in data]
            for item in items:
                (tmp_path / item["path"]).write_text(data[item["key"]])
                files[f"{mount['mountPath']}/{item['path']}"] = tmp_path / item["path"]
    return files


def test_every_manifest_passes_the_kubernetes_schemas_strictly() -> None:
    import kubernetes_validate
    from kubernetes_validate.utils import latest_version

    for doc in _docs():
        kubernetes_validate.validate(doc, latest_version(), strict=True)  # raises on any error


def test_the_kustomization_applies_every_manifest() -> None:
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    assert kustomization["kind"] == "Kustomization"
    assert sorted(kustomization["resources"]) == [p.name for p in MANIFESTS]


def test_the_server_has_its_probes_its_gpu_and_listens_on_all_interfaces(docs, tmp_path: Path) -> None:
    deployment = docs["Deployment", "kernelwright-server"]
    pod = _pod(deployment)
    (container,) = pod["containers"]
    cfg = parse_command(_args(container, docs), _mounted(deployment, docs, tmp_path))
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert cfg.host == "0.0.0.0" and ports["http"] == cfg.port
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert container["resources"]["limits"]["nvidia.com/gpu"] == 1
    assert pod["terminationGracePeriodSeconds"] > cfg.drain_timeout_s  # requests in flight finish
    assert cfg.model.startswith("models:/") and cfg.reload_interval_s > 0  # follows the alias
    assert _env(container, docs)["KERNELWRIGHT_API_KEYS"]  # beyond loopback, keys are set
    assert container["image"].endswith(":0.1.0-cuda-runtime")  # compose.yaml's server image
    service = docs["Service", "kernelwright-server"]
    assert service["spec"]["selector"] == deployment["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["ports"][0]["targetPort"] == "http"


def test_the_mlflow_server_on_postgresql_and_s3(docs) -> None:
    deployment = docs["Deployment", "kernelwright-mlflow"]
    (container,) = _pod(deployment)["containers"]
    cfg = parse_command(_args(container, docs))
    env = _env(container, docs)
    assert cfg.host == "0.0.0.0" and cfg.backend_store_uri.startswith("postgresql://")
    assert "@" in cfg.backend_store_uri and ":" not in cfg.backend_store_uri.split("//")[1].split("@")[0]
    assert cfg.artifacts_destination.startswith("s3://") and cfg.serve_artifacts
    assert {"PGPASSWORD", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "MLFLOW_S3_ENDPOINT_URL"} <= set(env)
    assert container["readinessProbe"]["httpGet"]["path"] == "/health"
    assert "nvidia.com/gpu" not in container["resources"].get("limits", {})
    assert container["image"].endswith(":0.1.0-cpu")
    service = docs["Service", "kernelwright-mlflow"]
    url = f"http://{service['metadata']['name']}:{service['spec']['ports'][0]['port']}"
    assert {"kernelwright-mlflow", f"kernelwright-mlflow:{service['spec']['ports'][0]['port']}"} <= set(
        cfg.allowed_hosts.split(","))
    # every other pod tracks through this Service
    assert docs["ConfigMap", "kernelwright-server"]["data"]["MLFLOW_TRACKING_URI"] == url
    assert docs["Secret", "kernelwright-retrain"]["stringData"]["tracking-uri"] == url


def test_the_cronjob_never_overlaps_and_has_a_deadline(docs, tmp_path: Path) -> None:
    cronjob = docs["CronJob", "kernelwright-retrain"]
    assert cronjob["spec"]["concurrencyPolicy"] == "Forbid"
    assert 0 < cronjob["spec"]["startingDeadlineSeconds"] <= 24 * 3600
    (container,) = _pod(cronjob)["containers"]
    parse_command(_args(container, docs), _mounted(cronjob, docs, tmp_path))  # retrain --config: its fields
    assert container["resources"]["limits"]["nvidia.com/gpu"] == 1
    assert container["image"].endswith(":0.1.0-cuda")  # the devel image: retrain builds kernels


def test_pods_run_as_the_image_user(docs) -> None:
    for name, doc in _workloads(docs).items():
        ctx = _pod(doc)["securityContext"]
        assert ctx["runAsNonRoot"] is True and ctx["runAsUser"] == ctx["runAsGroup"] == UID, name
    for name in ("kernelwright-server", "kernelwright-retrain"):  # their volumes are written to
        assert _pod(_workloads(docs)[name])["securityContext"]["fsGroup"] == UID
    assert f"ARG KERNELWRIGHT_UID={UID}" in (INFRA / "Dockerfile").read_text()


def test_secrets_hold_placeholders_and_every_reference_resolves(docs) -> None:
    secrets = {name: d for (kind, name), d in docs.items() if kind == "Secret"}
    assert set(secrets) == {"kernelwright-retrain", "kernelwright-mlflow", "kernelwright-server"}
    for name, secret in secrets.items():
        assert "data" not in secret, name  # stringData: readable placeholders
        for key, value in secret["stringData"].items():
            assert "change-me" in value or key == "tracking-uri", (name, key)
    for name, doc in _workloads(docs).items():
        for container in _pod(doc)["containers"]:
            _env(container, docs)  # a KeyError names a Secret, ConfigMap or key that is not in the set
        for volume in _pod(doc).get("volumes", []):
            if "configMap" in volume:
                assert ("ConfigMap", volume["configMap"]["name"]) in docs, (name, volume)
