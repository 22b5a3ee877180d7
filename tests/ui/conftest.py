"""Fixtures for the UI tests: a run directory written by the FAKE scripted engine."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from ui_helpers import Run


@pytest.fixture(autouse=True)
def utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Log lines show clock times: pin the zone for snapshots, for these tests only."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.fixture
def run(tmp_path: Path) -> Run:
    return Run(tmp_path)
