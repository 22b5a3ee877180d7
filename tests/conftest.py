"""Project-wide pytest setup: ``gpu``-marked tests are skipped cleanly where there is no CUDA device."""

from __future__ import annotations

import functools
import importlib.util
import os

import pytest

# The GPU machine runs the project from a checkout with carried wheels and no Textual (the UI is
# not run there): the tests that drive the app are left out of collection there, not errored.
collect_ignore_glob: list[str] = []
if importlib.util.find_spec("textual") is None:
    collect_ignore_glob += ["ui", "ui/*", "security/test_terminal_from_disk.py"]


@pytest.fixture(autouse=True, scope="session")
def _private_gpu_locks(tmp_path_factory: pytest.TempPathFactory) -> None:
    """The machine-wide GPU locks (ktt.gpu_lock) of this test session, apart from real runs and other sessions."""
    os.environ.setdefault("KTT_GPU_LOCK_DIR", str(tmp_path_factory.mktemp("gpu-locks")))


@functools.cache
def cuda_device_available() -> bool:
    try:
        from ktt.toolkit import gpu_count

        return gpu_count() > 0
    except Exception:
        return False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    gpu_items = [item for item in items if "gpu" in item.keywords]
    if not gpu_items or cuda_device_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device (none found)")
    for item in gpu_items:
        item.add_marker(skip)
