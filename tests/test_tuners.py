"""The tuner seam (cacao_tui/tuners.py): the product ships ktt only; a tuner registered under the
entry-point group cacao_tui.tuners (the tests' FAKE one, from a .dist-info on PYTHONPATH) is
picked by CACAO_TUNER; an unknown name is one line and exit 2, before anything is written."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from cacao_tui.ktt_client import KttTuner
from cacao_tui.tuners import TUNER_ENV, tuner_factory
from tests.pathenv import child_pythonpath
from tests.ui.fake_run_site import fake_cases_tuner

REPO = Path(__file__).resolve().parents[1]


def test_the_product_ships_no_fake() -> None:
    product = [p for package in ("cacao_tui", "ktt") for p in (REPO / package).rglob("*.py")]
    assert not [p for p in product if "fake" in p.name.lower()]
    for path in product:
        text = path.read_text(encoding="utf-8")
        assert "class Fake" not in text and "FakeTuner" not in text, path


def test_ktt_is_the_default(monkeypatch) -> None:
    monkeypatch.delenv(TUNER_ENV, raising=False)
    assert tuner_factory() is KttTuner
    monkeypatch.setenv(TUNER_ENV, "ktt")
    assert tuner_factory() is KttTuner


def _run(code: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **env}, cwd=cwd)  # fmt: skip


def test_a_registered_tuner_is_picked_by_name(tmp_path: Path) -> None:
    env = {"PYTHONPATH": f"{fake_cases_tuner.SITE}{os.pathsep}{child_pythonpath()}", TUNER_ENV: "fake-cases"}
    code = "from cacao_tui.tuners import tuner_factory, tuner_names; print(tuner_names(), tuner_factory().__name__)"
    done = _run(code, env, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["['fake-cases',", "'ktt']", "FakeCasesTuner"]


def test_an_unknown_tuner_is_one_line_and_nothing_is_written(tmp_path: Path) -> None:
    problem = tmp_path / "mmul"
    shutil.copytree(REPO / "problems" / "mmul", problem)
    env = {"PYTHONPATH": child_pythonpath(), TUNER_ENV: "nope"}
    code = "import sys; from cacao_tui.cli import main"
    code += f"\nsys.exit(main(['--dir', {str(problem)!r}, '--provider', 'replay', '--dry-run', '--no-ui']))"
    done = _run(code, env, tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == ["cacao: CACAO_TUNER=nope: no such tuner (installed: ktt)"]
    assert not (problem / "output").exists()
