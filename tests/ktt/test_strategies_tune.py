"""``python -m ktt tune --strategy NAME`` for every registered strategy.

On the CPU the command line runs with the fake GPU worker (tests/ktt/fake_worker.py, made-up
timings) and real NVRTC compiles; the gpu-marked test runs each strategy briefly on the real
GPU with tests/ktt/data/tiny.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import ktt.tune
from ktt import strategies
from ktt.cli import main
from ktt.protocol import ConfigResult

ROOT = Path(__file__).resolve().parents[2]
TINY = Path(__file__).parent / "data" / "tiny"
FAKE = [sys.executable, str(Path(__file__).parent / "fake_worker.py")]
NAMES = strategies.names()


def _args(out: Path, *extra: str) -> list[str]:
    return [
        "tune",
        "--problem", str(TINY),
        "--kernel", str(TINY / "kernels.cu"),
        "--spec", str(TINY / "tuning.yaml"),
        "--output", str(out),
        "--reference-time", str(out.parent / "reference_time.json"),
        *extra,
        "--json",
    ]  # fmt: skip


@pytest.fixture
def fake_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """The command line's tune() with the fake worker in place of the GPU one."""
    real = ktt.tune.tune

    def tune_with_fake_worker(opts: ktt.tune.TuneOptions, emit):  # type: ignore[no-untyped-def]
        opts.worker_command, opts.arch, opts.compile_workers = FAKE, "sm_90", 1
        return real(opts, emit)

    monkeypatch.setattr(ktt.tune, "tune", tune_with_fake_worker)


@pytest.mark.parametrize("name", NAMES)
def test_every_strategy_tunes_from_the_command_line(
    name: str, tmp_path: Path, fake_gpu: None, compile_cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    code = main(_args(out, "--strategy", name, "--max-configs", "6", "--duration", "0", "--seed", "4",
                      "--cache-dir", str(compile_cache)))  # fmt: skip
    lines = [json.loads(ln) for ln in capsys.readouterr().out.splitlines() if ln.startswith("{")]
    assert code == 0, lines[-3:]
    summary = lines[-1]
    assert summary["type"] == "result" and summary["best"] is not None
    assert [c["evaluated"] for c in summary["cases"]] == [6, 6]
    assert summary["strategy"]
    rows = [ConfigResult.model_validate_json(ln) for ln in (out / "results.jsonl").read_text().splitlines()]
    for shape in ("default", "half"):
        configs = [json.dumps(r.config, sort_keys=True) for r in rows if r.shape == shape]
        assert len(configs) == len(set(configs)) == 6
    assert all(r.config["BLOCK"] * r.config["UNROLL"] <= 512 for r in rows)


def test_an_unknown_strategy_is_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as exc:
        main(_args(tmp_path / "out", "--strategy", "nope"))
    assert exc.value.code == 2
    assert "invalid choice: 'nope'" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_a_strategy_whose_package_is_missing_is_one_line_exit_3(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ktt.strategies.surrogate import Surrogate

    monkeypatch.setattr(Surrogate, "missing", classmethod(lambda cls: "strategy 'surrogate' needs scikit-learn"))
    code = main(_args(tmp_path / "out", "--strategy", "surrogate"))
    lines = [json.loads(ln) for ln in capsys.readouterr().out.splitlines()]
    assert code == 3 and len(lines) == 1 and lines[0]["type"] == "error"
    assert "needs scikit-learn" in lines[0]["message"]
    assert not (tmp_path / "out").exists()


def test_help_lists_every_strategy() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "ktt", "tune", "--help"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        env={**os.environ, "COLUMNS": "2000"},  # no wrapping inside a summary
    )
    assert proc.returncode == 0
    text = " ".join(proc.stdout.split())
    for name, cls in strategies.REGISTRY.items():
        assert f"{name}: {' '.join(cls.summary.split())}" in text


@pytest.mark.gpu
@pytest.mark.parametrize("name", NAMES)
def test_every_strategy_tunes_on_the_gpu(name: str, tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "ktt", *_args(out, "--strategy", name, "--duration", "2")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=240,
    )
    lines = [json.loads(ln) for ln in proc.stdout.splitlines() if ln.startswith("{")]
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = lines[-1]
    assert summary["type"] == "result" and summary["best"] is not None, summary
    assert all(c["status"] == "ok" and c["valid"] >= 1 for c in summary["cases"])
