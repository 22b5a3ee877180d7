"""Project-wide pytest setup: ``gpu``-marked tests are skipped cleanly where there is no CUDA device."""

from __future__ import annotations

import functools

import pytest


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
