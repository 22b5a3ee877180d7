"""A local Ray cluster on loopback for the cluster tests: a head without GPUs and three
nodes with two logical GPUs each. Started once per module (it takes ~30 s on 2 cores);
the tests skip cleanly where Ray is not installed."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator

import pytest

from tests.cluster.local_ray import LOCAL_ONLY, start_local_cluster
from tests.pathenv import child_pythonpath

NODES, GPUS_PER_NODE = 3, 2


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[object]:
    pytest.importorskip("ray", reason="Ray is the optional [cluster] extra")
    import ray

    saved = {k: os.environ.get(k) for k in ("PYTHONPATH", "RAY_ADDRESS", *LOCAL_ONLY)}
    # Ray's node code installs its own SIGTERM/SIGINT handlers in this process (they call sys.exit):
    # put back pytest's afterwards, so no later test meets them.
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    os.environ["PYTHONPATH"] = child_pythonpath()  # the nodes' workers import tests.cluster.fakes
    cluster = start_local_cluster(NODES, GPUS_PER_NODE)  # bound to 127.0.0.1 only
    ray.init(address=cluster.address, log_to_driver=False, logging_level="ERROR", namespace="cacao")
    try:
        yield cluster
    finally:
        ray.shutdown()
        cluster.shutdown()
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
        for key, value in saved.items():  # later tests' children see the environment they had
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
