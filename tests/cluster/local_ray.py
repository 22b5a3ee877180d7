"""A local Ray cluster for tests, bound to loopback only, with no dashboard.

Asking for 127.0.0.1 is not enough: Ray resolves a loopback address to the machine's own IP
(``services.resolve_ip_for_localhost``), so its GCS, raylets and object managers listened on
every interface of a shared machine, and a driver given 127.0.0.1 connects to the machine's IP.
``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` (Ray's switch for single-machine use) makes Ray take
127.0.0.1 as the node's address throughout; every node is also started with ``node_ip_address``
127.0.0.1. Both are set for the cluster's processes (the environment) and for this one (Ray
reads the switch when imported, so its constant is set too)."""

from __future__ import annotations

import os
from pathlib import Path

from tests.proc_tree import descendants

LOOPBACK = "127.0.0.1"
STORE_BYTES = 80 * 2**20
LOCAL_ONLY = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}


def keep_ray_local() -> None:
    """Ray in this process and in the processes it starts takes 127.0.0.1 as this node's address."""
    os.environ.update(LOCAL_ONLY)
    import ray._private.ray_constants as constants

    constants.ENABLE_RAY_CLUSTER = False


def start_local_cluster(nodes: int, gpus_per_node: int) -> object:
    """A head without GPUs and ``nodes`` nodes with ``gpus_per_node`` logical GPUs each, on loopback
    (``keep_ray_local``: the caller restores ``LOCAL_ONLY``'s variables when it is done)."""
    keep_ray_local()
    from ray.cluster_utils import Cluster

    head = {"num_cpus": 1, "num_gpus": 0, "object_store_memory": STORE_BYTES, "include_dashboard": False,
            "node_ip_address": LOOPBACK}  # fmt: skip
    cluster = Cluster(initialize_head=True, head_node_args=head)
    node = {"num_cpus": 1, "num_gpus": gpus_per_node, "object_store_memory": STORE_BYTES, "node_ip_address": LOOPBACK}
    cluster.gpu_nodes = [cluster.add_node(**node) for _ in range(nodes)]  # type: ignore[attr-defined]
    cluster.wait_for_nodes()
    return cluster


def listening_addresses(root: int) -> set[tuple[str, int]]:
    """(address in /proc/net hex, port) of every TCP socket listened on by ``root``'s descendants."""
    inodes: set[str] = set()
    for pid in descendants(root):
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if link.startswith("socket:["):
                inodes.add(link[8:-1])
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            parts = line.split()
            if parts[3] == "0A" and parts[9] in inodes:  # state LISTEN, owned by a descendant
                address, port = parts[1].split(":")
                found.add((address, int(port, 16)))
    return found


def is_loopback(address: str) -> bool:
    """An address of /proc/net/tcp{,6} (hex) that is 127.0.0.0/8, ::1 or ::ffff:127.x.x.x."""
    if len(address) == 8:
        return address.endswith("7F")  # little-endian: the last byte is the first octet
    return address == "00000000000000000000000001000000" or (
        address.startswith("0000000000000000FFFF0000") and address.endswith("7F")
    )
