"""Issue 23, "Also": the tests' local Ray cluster is asked for loopback and listens on loopback only.

It was described as a loopback cluster, yet Ray's GCS, raylets and object managers listened on
every interface of a shared machine. ``tests/cluster/local_ray.py`` now keeps Ray local
(``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` and ``node_ip_address`` 127.0.0.1; docs/CLUSTER.md's
one-machine trial likewise); this starts a head and one node, runs a task from a driver given
the loopback address, and lists what the cluster's processes listen on.
"""

from __future__ import annotations

import os

import pytest

from tests.cluster.local_ray import LOCAL_ONLY, is_loopback, listening_addresses, start_local_cluster

pytestmark = pytest.mark.timeout(180)


def test_the_local_test_cluster_listens_on_loopback_only() -> None:
    pytest.importorskip("ray", reason="Ray is the optional [cluster] extra")
    import ray

    saved = {k: os.environ.get(k) for k in LOCAL_ONLY}
    cluster = start_local_cluster(nodes=1, gpus_per_node=1)
    try:
        # A driver given the loopback address reaches the cluster, and a task runs on it.
        ray.init(address=cluster.address, log_to_driver=False, logging_level="ERROR")  # type: ignore[attr-defined]
        def worker_pid() -> int:  # a local function: sent by value, the worker need not import this file
            import os

            return os.getpid()

        assert ray.get(ray.remote(worker_pid).remote()) != os.getpid()
        found = listening_addresses(os.getpid())
    finally:
        ray.shutdown()
        cluster.shutdown()  # type: ignore[attr-defined]
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    assert found, "no listening socket of Ray's processes was found"
    assert all(is_loopback(address) for address, _ in found), sorted(found)
