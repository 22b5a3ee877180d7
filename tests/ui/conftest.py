"""Fixtures for the UI tests: a run directory written by the FAKE scripted engine."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

os.environ["TZ"] = "UTC"  # log lines show clock times; pin them for snapshots
time.tzset()
sys.path.insert(0, str(Path(__file__).parent))

from ui_helpers import Run  # noqa: E402


@pytest.fixture
def run(tmp_path: Path) -> Run:
    return Run(tmp_path)
