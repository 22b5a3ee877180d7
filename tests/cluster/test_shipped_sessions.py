"""The recorded sessions the shipped problems carry for ``--provider replay`` (what a suite of
them replays): one per problem, up to date with the script that builds it, and kernels that
compile over their whole tuning space, and (on a GPU) validate. (The suite test in
test_ray_cluster.py replays them all.)"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cacao_tui.llm.session_file import read_session_file
from ktt.protocol import TuneSummary
from tests.cluster.suite_helpers import ROOT, RUN_FILES, SHIPPED
from tests.pathenv import child_pythonpath

PROBLEMS = ROOT / "problems"
# Each demo kernel (demo/<stem>.cu) and its tuning space (demo/<stem>.yaml); mmul's own demo is
# covered by tests/engine (its spaces are large: compiling all of them here would be slow).
DEMO_KERNELS = [
    (name, cu.stem)
    for name in SHIPPED
    if name != "mmul"
    for cu in sorted((PROBLEMS / name / "demo").glob("*.cu"))
    if cu.with_suffix(".yaml").is_file()
]


def _run(*argv: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=child_pythonpath())
    return subprocess.run([sys.executable, *argv], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)  # fmt: skip


@pytest.mark.parametrize("name", SHIPPED)
def test_every_shipped_problem_has_a_session_built_by_its_script(name: str) -> None:
    directory = PROBLEMS / name
    entries = read_session_file(directory / "session.jsonl")
    nodes = {key.node for key in entries}
    assert {"analyze", "strategize", "plan", "author", "propose", "decide"} <= nodes
    builder = directory / "demo" / "build_session.py"
    done = _run(str(builder), "--check", cwd=ROOT, timeout=60)
    assert done.returncode == 0, done.stderr  # session.jsonl is what the script writes


def test_every_shipped_problem_but_mmul_has_demo_kernels() -> None:
    assert {name for name, _ in DEMO_KERNELS} == set(SHIPPED) - {"mmul"}


@pytest.mark.parametrize(("name", "stem"), DEMO_KERNELS)
def test_a_recorded_kernel_compiles_over_its_whole_space(name: str, stem: str, tmp_path: Path) -> None:
    demo = PROBLEMS / name / "demo"
    done = _run("-m", "ktt", "check", "--problem", str(PROBLEMS / name), "--kernel", str(demo / f"{stem}.cu"),
                "--spec", str(demo / f"{stem}.yaml"), "--sample", "1000", "--cache-dir", str(tmp_path / "cache"),
                cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    head = done.stdout.splitlines()[0]
    assert head.startswith("check ok: "), head
    words = head.removeprefix("check ok: ").split()  # "N sampled of M of K configurations": M pass the restrictions
    assert words[0] == words[3] and int(words[0]) >= 3, head  # every configuration allowed was compiled


@pytest.mark.gpu
@pytest.mark.parametrize(("name", "stem"), DEMO_KERNELS)
def test_a_recorded_kernel_validates_and_is_timed_on_the_gpu(name: str, stem: str, tmp_path: Path) -> None:
    """What a replay on a GPU tunes: every case gets a valid best, and no configuration computes wrong values."""
    problem = tmp_path / name
    shutil.copytree(PROBLEMS / name, problem, ignore=shutil.ignore_patterns(*RUN_FILES))
    out = tmp_path / "tune"
    done = _run("-m", "ktt", "tune", "--problem", str(problem), "--kernel", str(problem / "demo" / f"{stem}.cu"),
                "--spec", str(problem / "demo" / f"{stem}.yaml"), "--output", str(out), "--duration", "2",
                "--reference-time", str(tmp_path / "reference_time.json"), "--json", cwd=tmp_path)  # fmt: skip
    summary = TuneSummary.model_validate_json((out / "summary.json").read_text())
    assert done.returncode == 0 and summary.ok, (summary.message, done.stderr[-2000:])
    assert summary.valid > 0 and summary.best is not None and summary.speedup is not None
    assert summary.by_status.get("validation_failed", 0) == 0 and summary.by_status.get("runtime_error", 0) == 0, (
        summary.by_status
    )
