"""Fixtures for the problem tests; the helpers live in problem_fixtures.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from problem_fixtures import write_tiny


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    """A valid problem directory at tmp_path/tiny."""
    return write_tiny(tmp_path / "tiny")
