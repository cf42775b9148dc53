"""Every YAML file of the deployment (infra/ and the multi-node accelerate config) passes yamllint."""

from __future__ import annotations

from tests.infra._infra import CONFIGS, INFRA, YAMLLINT


def test_deployment_yaml_passes_yamllint() -> None:
    from yamllint import linter
    from yamllint.config import YamlLintConfig

    conf = YamlLintConfig(YAMLLINT)
    paths = sorted(INFRA.rglob("*.yaml")) + [CONFIGS / "accelerate-fsdp-multinode.yaml"]
    assert len(paths) >= 7
    problems = [f"{p.relative_to(INFRA.parent)}:{e.line}: {e.message}" for p in paths
                for e in linter.run(p.read_text(), conf)]
    assert problems == []
