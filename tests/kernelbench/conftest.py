"""Fixtures for the KernelBench import tests: the fixture modules (written for this project, in
KernelBench's form), imported once per session. torch is needed to run a module; without it these
tests skip, saying so (CI installs a CPU build: README, "Set up")."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parent / "fixtures"
ROOT = Path(__file__).resolve().parents[2]
IMPORTED = ("relu", "conv_relu_bn", "row_stats", "heavy_tail_loss")  # and no_init_inputs, refused


def cacao(*args: str, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": str(cwd)}
    import os

    env.update({k: v for k, v in os.environ.items() if k in ("PATH", "VIRTUAL_ENV", "LANG", "TMPDIR")})
    return subprocess.run([sys.executable, "-m", "cacao_tui", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout, check=False)  # fmt: skip


@pytest.fixture(scope="session")
def torch():
    return pytest.importorskip("torch", reason="cacao import runs PyTorch modules: torch is not installed")


@pytest.fixture(scope="session")
def level(torch, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """``cacao import fixtures/ --to problems --level 1``, once: (the problems folder, the command's result)."""
    root = tmp_path_factory.mktemp("kb")
    done = cacao("import", str(FIXTURES), "--to", str(root / "problems"), "--level", "1", cwd=root)
    return root / "problems", done
