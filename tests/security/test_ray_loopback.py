"""Issue 23, "Also": the tests' local Ray cluster is asked for loopback and listens on loopback only.

It was described as a loopback cluster, yet nothing asked Ray for 127.0.0.1: its GCS, raylets and
object managers listened on every interface of a shared machine. ``tests/cluster/local_ray.py``
now starts every node with ``node_ip_address`` 127.0.0.1 (and docs/CLUSTER.md's one-machine trial
with ``--node-ip-address 127.0.0.1``); this starts a head and one node and lists what their
processes listen on.
"""

from __future__ import annotations

import os

import pytest

from tests.cluster.local_ray import is_loopback, listening_addresses, start_local_cluster

pytestmark = pytest.mark.timeout(180)


def test_the_local_test_cluster_listens_on_loopback_only() -> None:
    pytest.importorskip("ray", reason="Ray is the optional [cluster] extra")
    cluster = start_local_cluster(nodes=1, gpus_per_node=1)
    try:
        found = listening_addresses(os.getpid())
    finally:
        cluster.shutdown()  # type: ignore[attr-defined]
    assert found, "no listening socket of Ray's processes was found"
    assert all(is_loopback(address) for address, _ in found), sorted(found)
