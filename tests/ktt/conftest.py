"""Fixtures for the ktt tests: a compile cache shared by the session (NVRTC is the slow part)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def compile_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("ktt-compile-cache")
