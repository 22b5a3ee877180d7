"""Hostile Hopper launches (issue 22): a tensor map that runs past its buffer, a TMA store through a
map of a read-only input, a cluster larger than a device allows — refused by ``ktt check`` or
failed at run time, never best.

Here, on the CPU: the refusals of ``python -m ktt check`` (one line naming the tuning.yaml field,
exit 2; or the sampled configuration failing, exit 1), and a tuning run with a FAKE GPU worker
in which configurations whose map overruns are ``launch_failed``. The run-time halves on a real
device (the store into an input caught as *input modified*; a cluster the kernel or the device
cannot take, ``launch_failed``) are in tests/ktt/test_hopper_gpu.py (``pytest -m gpu``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from ktt.cli import main
from ktt.protocol import ConfigResult, TuneSummary
from ktt.tune import TuneOptions, tune

KTT_TESTS = Path(__file__).resolve().parents[1] / "ktt"
HOPPER = KTT_TESTS / "data" / "hopper"
FAKE_WORKER = [sys.executable, str(KTT_TESTS / "fake_worker.py")]
SPEC = (HOPPER / "tuning.yaml").read_text()


def ktt_check(tmp_path: Path, spec_text: str, capsys: pytest.CaptureFixture) -> tuple[int, dict]:
    spec = tmp_path / "tuning.yaml"
    spec.write_text(spec_text)
    args = ["check", "--problem", str(HOPPER), "--kernel", str(HOPPER / "kernels.cu"), "--spec", str(spec)]
    code = main([*args, "--json", "--arch", "sm_90", "--sample", "2", "--cache-dir", str(tmp_path / "cache")])
    out = capsys.readouterr().out.strip().splitlines()
    return code, json.loads(out[-1])


@pytest.mark.parametrize("oob", ["", ", oob_fill: none", ", oob_fill: nan"])
def test_a_map_whose_box_runs_past_the_buffer_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture, oob: str
) -> None:
    """X holds H rows: a map of H + 8 rows would let a box read 8 rows of whatever lies after it."""
    text = SPEC.replace("{tensor_map: X, dims: [W, H], box: [TW, TH], swizzle: SWIZZLE}",
                        f"{{tensor_map: X, dims: [W, H + 8], box: [TW, TH], swizzle: SWIZZLE{oob}}}")  # fmt: skip
    code, report = ktt_check(tmp_path, text, capsys)
    assert code == 2 and not report["ok"] and report["sampled"] == 0
    assert report["message"].startswith(f"{tmp_path / 'tuning.yaml'}: launches[0].args[0].dims: dims [1000, 308] ")
    assert "run past the buffer's end" in report["message"] and "\n" not in report["message"]


def test_a_map_that_overruns_for_a_tune_parameter_fails_that_configuration(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    text = SPEC.replace("SWIZZLE: [0, 128]", "SWIZZLE: [0]\n  EXTRA: [8]").replace(
        "{tensor_map: Y, dims: [W, H]", "{tensor_map: Y, dims: [W, H + EXTRA]"
    )
    code, report = ktt_check(tmp_path, text, capsys)
    assert code == 1 and not report["ok"] and report["sampled"] == 2
    assert all("launches[0].args[1].dims: dims [1000, 308]" in c["error"] for c in report["configs"])


@pytest.mark.parametrize(
    ("cluster", "fragment"),
    [
        (
            "{x: 16}",
            "16 blocks per cluster is above the portable limit of 8; set non_portable: true in the cluster to allow it",
        ),
        ("{x: 32, non_portable: true}", "32 blocks per cluster; no device allows more than 16"),
    ],
)
def test_a_cluster_larger_than_a_device_allows_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture, cluster: str, fragment: str
) -> None:
    code, report = ktt_check(tmp_path, SPEC.replace("cluster: {x: CLUSTER_X}", f"cluster: {cluster}"), capsys)
    assert code == 2 and not report["ok"]
    assert report["message"] == f"{tmp_path / 'tuning.yaml'}: launches[0].cluster: {fragment}"


def test_a_cluster_too_large_for_some_configurations_fails_those(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    text = SPEC.replace("CLUSTER_X: [1, 2, 4]", "CLUSTER_X: [16]").replace(
        "cluster: {x: CLUSTER_X}", "cluster: {x: CLUSTER_X}"
    )
    code, report = ktt_check(tmp_path, text, capsys)
    assert code == 1 and report["configs"]
    assert all(
        "launches[0].cluster: 16 blocks per cluster is above the portable limit" in c["error"]
        for c in report["configs"]
    )


def test_overrunning_maps_are_launch_failed_and_never_best(tmp_path: Path) -> None:
    """A tuning run (FAKE GPU worker): the configurations whose map of Y would run past Y fail before
    the GPU; the others are measured, and the best is one of them."""
    spec = tmp_path / "tuning.yaml"
    text = SPEC.replace("SWIZZLE: [0, 128]", "SWIZZLE: [0]\n  EXTRA: [0, 1]")
    spec.write_text(text.replace("{tensor_map: Y, dims: [W, H]", "{tensor_map: Y, dims: [W, H + EXTRA]"))
    lines: list = []
    opts = TuneOptions(
        problem_dir=HOPPER,
        kernel=HOPPER / "kernels.cu",
        spec=spec,
        output=tmp_path / "out",
        worker_command=FAKE_WORKER,
        arch="sm_90",
        cache_dir=tmp_path / "cache",
        compile_workers=1,
        reference_time=tmp_path / "reference_time.json",
        duration_s=0,
    )  # type: ignore[call-arg]
    code = tune(opts, lines.append)
    summary = next(x for x in lines if isinstance(x, TuneSummary))
    rows = [
        ConfigResult.model_validate_json(ln) for ln in (tmp_path / "out" / "results.jsonl").read_text().splitlines()
    ]
    failed = [r for r in rows if r.config["EXTRA"] == 1]
    assert code == 0 and summary.best is not None and summary.best.config["EXTRA"] == 0
    assert failed and all(r.status == "launch_failed" for r in failed)
    assert all("launches[0].args[1].dims: dims [1000, 301]" in (r.error or "") for r in failed)
    assert all(r.status == "ok" for r in rows if r.config["EXTRA"] == 0)


def test_a_store_into_a_read_only_input_compiles_so_the_run_must_catch_it(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """No static check can see which map a kernel stores through: the hostile kernel compiles, and
    the GPU test (tests/ktt/test_hopper_gpu.py) shows the run catching it as 'input X was modified'."""
    code, report = ktt_check(tmp_path, SPEC.replace("SWIZZLE: [0, 128]", "SWIZZLE: [0, 128]\n  HOSTILE: [1]"), capsys)
    assert code == 0 and report["ok"], report["message"]
