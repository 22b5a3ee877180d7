"""--cluster's value, Ray missing, a cluster that cannot be reached: one line, exit 2, nothing written.
(No Ray cluster is started here; these run with or without the [cluster] extra.)"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import shutil
import sys
import types
from pathlib import Path

import pytest

from cacao_tui import cli
from cacao_tui.cluster import ray_backend, spec
from cacao_tui.cluster.bundle import BundleError, problem_bundle, safe_relative
from cacao_tui.cluster.placement import Placement, branch_of
from cacao_tui.cluster.spec import ClusterError, parse_cluster

ROOT = Path(__file__).resolve().parents[2]
AUTH_NOISE = (
    b"[2026-12-01 08:43:19,907 W 12355 12355] gcs_client.cc:210: Failed to get cluster ID from GCS server: "
    b"Unauthenticated: RPC error: InvalidAuthToken: Authentication token is missing or incorrect\n"
)


@pytest.fixture
def problem(tmp_path: Path) -> Path:
    target = tmp_path / "mmul"
    shutil.copytree(ROOT / "problems" / "mmul", target, ignore=shutil.ignore_patterns("output", "archive"))
    return target


@pytest.mark.parametrize(
    ("text", "kind", "address"),
    [(None, "local", None), ("local", "local", None), ("ray", "ray", None),
     ("ray://head:10001", "ray", "ray://head:10001"), ("ray:10.0.0.1:6379", "ray", "10.0.0.1:6379")],
)  # fmt: skip
def test_cluster_values(text: str | None, kind: str, address: str | None) -> None:
    choice = parse_cluster(text)
    assert (choice.kind, choice.address) == (kind, address)


@pytest.mark.parametrize("text", ["slurm", "ray://", "ray:", "ray://a b"])
def test_bad_cluster_values(text: str) -> None:
    with pytest.raises(ClusterError, match="--cluster"):
        parse_cluster(text)


def test_without_ray_the_flag_says_how_to_install_it(
    problem: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(spec.importlib.util, "find_spec", lambda name, *a: None if name == "ray" else real(name, *a))
    code = cli.main(["--dir", str(problem), "--cluster", "ray", "--no-ui", "--provider", "replay"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "pip install -e '.[cluster]'" in err[0]
    assert not (problem / "output").exists()
    assert cli.main(["suite", str(problem), "--cluster", "ray", "--dry-run"]) == 2
    assert "pip install -e '.[cluster]'" in capsys.readouterr().err


def test_an_unreachable_cluster_is_one_line_and_exit_2(problem: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["--dir", str(problem), "--cluster", "ray:127.0.0.1:1", "--no-ui", "--provider", "replay"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) in (1, 2) and "Traceback" not in "".join(err)
    if importlib.util.find_spec("ray") is not None:
        assert err == ["cacao: --cluster: cannot reach the Ray cluster at 127.0.0.1:1 (Connection refused); "
                       "start it with 'ray start --head' (docs/CLUSTER.md)"]  # fmt: skip
    assert not (problem / "output").exists()


@pytest.mark.parametrize(("noise", "hint"), [(AUTH_NOISE, True), (b"[W] connection reset\n", False)])
def test_a_refused_join_is_one_line_and_rays_own_log_stays_off_the_terminal(
    noise: bytes, hint: bool, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """Ray's core logs each failed attempt to fd 2 (here a FAKE ray that does so, then gives up)."""

    def init(**kwargs: object) -> None:
        for _ in range(3):
            os.write(2, noise)
        raise ConnectionError("Failed to connect to Ray cluster at 10.0.0.5:6379")

    fake = types.ModuleType("ray")
    fake.__spec__ = importlib.machinery.ModuleSpec("ray", None)
    fake.is_initialized = lambda: False  # type: ignore[attr-defined]
    fake.init = init  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "ray", fake)
    monkeypatch.setattr(ray_backend, "_probe", lambda address: None)  # the port "answers"
    with pytest.raises(ClusterError) as raised:
        ray_backend.connect(parse_cluster("ray:10.0.0.5:6379"))
    message = str(raised.value)
    assert message.startswith("--cluster: cannot join the Ray cluster at 10.0.0.5:6379: Failed to connect")
    assert "\n" not in message and ("RAY_AUTH_MODE=token" in message) == hint
    assert capfd.readouterr().err == ""  # nothing of Ray's reached the terminal
    os.write(2, b"after\n")  # and fd 2 is the terminal's again
    assert capfd.readouterr().err == "after\n"


def test_bundle_refuses_escapes_and_oversized_files(problem: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for bad in ["../x", "/etc/passwd", "a/../../b", ""]:
        with pytest.raises(BundleError):
            safe_relative(bad)
    monkeypatch.setattr("cacao_tui.cluster.bundle.MAX_FILE_BYTES", 10)
    with pytest.raises(BundleError, match=r"(problem|inputs)\.yaml|README\.md"):
        problem_bundle(problem)


def test_placement_names_branch_and_iteration(tmp_path: Path) -> None:
    out = tmp_path / "output"
    kernel = out / "branches" / "b2-tiles" / "iter3" / "kernels.cu"
    assert branch_of(kernel, out) == ("b2-tiles", 3)
    assert branch_of(tmp_path / "kernels.cu", out) == (None, None)
    p = Placement("tune", kernel, "gpu-host-2", "4f1c9a0b77", "1", attempt=2)
    assert p.describe() == "tune on gpu-host-2 (node 4f1c9a0b) GPU 1, attempt 2"
    assert Placement("profile", kernel, "box", "local", "0").describe() == "profile on box GPU 0"
