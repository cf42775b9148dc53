"""The multi-node accelerate config: accelerate's own loader accepts it (unknown keys are refused), the
multi-node settings are coherent, and its FSDP sharding is the single-node file's."""

from __future__ import annotations

import ipaddress

import yaml

from tests.infra._infra import CONFIGS

MULTINODE = CONFIGS / "accelerate-fsdp-multinode.yaml"


def test_accelerate_loads_it_as_a_multi_node_fsdp_launch() -> None:
    from accelerate.commands.config.config_args import ClusterConfig

    cluster = ClusterConfig.from_yaml_file(str(MULTINODE))
    assert str(cluster.distributed_type) == "DistributedType.FSDP" and cluster.fsdp_config["fsdp_version"] == 2
    assert cluster.num_machines > 1 and cluster.num_processes % cluster.num_machines == 0
    assert 0 <= cluster.machine_rank < cluster.num_machines
    ipaddress.ip_address(cluster.main_process_ip)
    assert 1024 <= cluster.main_process_port <= 65535
    # static needs the fixed MASTER_ADDR that same_network sets; c10d the rendezvous endpoint it leaves
    assert (cluster.rdzv_backend, cluster.same_network) in {("static", True), ("c10d", False)}


def test_it_shards_like_the_single_node_config() -> None:
    single = yaml.safe_load((CONFIGS / "accelerate-fsdp.yaml").read_text())
    multi = yaml.safe_load(MULTINODE.read_text())
    assert multi["fsdp_config"] == single["fsdp_config"]
    assert {k: multi[k] for k in ("mixed_precision", "downcast_bf16", "distributed_type")} == {
        k: single[k] for k in ("mixed_precision", "downcast_bf16", "distributed_type")}


def test_each_multi_node_setting_is_explained() -> None:
    lines = MULTINODE.read_text().splitlines()
    comments = "\n".join(line for line in lines if line.lstrip().startswith("#"))
    for setting in ("num_machines", "machine_rank", "main_process_ip", "main_process_port", "rdzv_backend",
                    "same_network"):
        line = next(line for line in lines if line.startswith(setting + ":"))
        assert "#" in line or setting in comments, setting
