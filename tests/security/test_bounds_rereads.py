"""Class 2 of issue 10, files read again after loading: a reference, a kernel or a model-written file
read by a later step (the host reference, the GPU worker's cuda reference, --check's compiles, the
import of ref.py, the run's briefing, ktt tune and check, the authoring tools, cacao --clone) is read
as a regular file under its cap. Swapped for a FIFO, linked to /dev/zero or grown past its cap after
the problem loaded, it is one line, never a hang, an endless read or an out-of-memory kill."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from bounds_problem import make_problem, one_line

from cacao_tui.nodes.workspace import read_model_file
from cacao_tui.store.clone import clone_problem
from ktt.candidates import KernelSource
from ktt.capped_read import MAX_KERNEL_BYTES, ReadRefused, describe_read_error
from ktt.host_reference import ReferenceFailure, _reference_source
from ktt.problem import ProblemError, load_problem
from ktt.problem.preflight import _source
from ktt.problem.ref_import import import_reference
from tests.pathenv import child_pythonpath

pytestmark = pytest.mark.timeout(60)


def fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


def dev_zero(path: Path) -> None:
    path.unlink()
    path.symlink_to("/dev/zero")


def oversize(path: Path) -> None:
    with path.open("a") as f:
        f.write("// " + "x" * (5 * 1024 * 1024) + "\n")


HOSTILE: dict[str, Callable[[Path], None]] = {"fifo": fifo, "dev_zero": dev_zero, "oversize": oversize}
REASONS = {"fifo": "a FIFO, not a regular file", "dev_zero": "a character device", "oversize": "larger than the limit"}


@pytest.mark.parametrize("how", sorted(HOSTILE))
def test_a_reference_swapped_after_loading(how: str, tmp_path: Path) -> None:
    """The host reference (ktt.host_reference) and --check's compile (preflight) read it again."""
    root = make_problem(tmp_path)
    problem = load_problem(root)
    HOSTILE[how](problem.reference.file)
    with pytest.raises(ReferenceFailure) as host:
        _reference_source(problem)
    with pytest.raises(ProblemError) as check:
        _source(problem.reference.file)
    for exc in (host.value, check.value):
        assert REASONS[how] in str(exc) and one_line(str(exc))


@pytest.mark.parametrize("how", sorted(HOSTILE))
def test_importing_a_hostile_ref_py_is_one_line(how: str, tmp_path: Path) -> None:
    ref = tmp_path / "ref.py"
    ref.write_text("def ref(x):\n    return x\n")
    HOSTILE[how](ref)
    result = import_reference(ref, None, timeout_s=30)
    # refused as what it is: not the import's time limit (kind "timeout"), not a MemoryError
    assert not result.ok and result.kind == "error" and REASONS[how] in result.message, result


@pytest.mark.parametrize("how", sorted(HOSTILE))
def test_a_kernel_for_ktt_is_a_regular_file_under_the_kernel_cap(how: str, tmp_path: Path) -> None:
    kernel = tmp_path / "kernels.cu"
    kernel.write_text('extern "C" __global__ void k() {}\n')
    HOSTILE[how](kernel)
    with pytest.raises(ReadRefused) as info:
        KernelSource.read(kernel)  # ktt tune and ktt profile
    assert REASONS[how] in describe_read_error(info.value)
    with pytest.raises(ReadRefused):
        read_model_file(kernel)  # the engine's compile check, the authoring tools, propose


def test_a_model_file_over_the_write_cap_is_refused_on_read(tmp_path: Path) -> None:
    kernel = tmp_path / "kernels.cu"
    kernel.write_bytes(b"x" * (MAX_KERNEL_BYTES + 1))
    with pytest.raises(ReadRefused, match="larger than the limit of 262,144"):
        read_model_file(kernel)
    spec = tmp_path / "tuning.yaml"
    spec.write_bytes(b"x" * (64 * 1024 + 1))
    with pytest.raises(ReadRefused, match="larger than the limit of 65,536"):
        read_model_file(spec)
    kernel.write_bytes(b"x" * MAX_KERNEL_BYTES)
    assert len(read_model_file(kernel)) == MAX_KERNEL_BYTES


def test_ktt_tune_on_a_fifo_kernel_is_one_line(tmp_path: Path) -> None:
    root = make_problem(tmp_path)
    fifo(root / "kernels.cu")
    argv = [sys.executable, "-m", "ktt", "tune", "--problem", str(root), "--kernel", str(root / "kernels.cu"),
            "--spec", str(root / "tuning.yaml"), "--output", str(tmp_path / "out")]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": child_pythonpath()}
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=50, env=env)
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = [ln for ln in proc.stdout.splitlines() + proc.stderr.splitlines() if "kernels.cu" in ln]
    assert lines and "FIFO" in lines[-1] and "Traceback" not in proc.stderr


def test_clone_copies_links_as_links(tmp_path: Path) -> None:
    """A header linked to /dev/zero or a directory linked to / is not copied byte by byte."""
    root = make_problem(tmp_path)
    (root / "zero.h").symlink_to("/dev/zero")
    (root / "everything").symlink_to("/")
    shared = tmp_path / "shared.yaml"
    shared.write_text((root / "problem.yaml").read_text())
    (root / "problem.yaml").unlink()
    (root / "problem.yaml").symlink_to(shared)
    before = shared.read_text()
    start = time.monotonic()
    cloned = clone_problem(root, "copy")
    assert time.monotonic() - start < 20
    assert os.readlink(cloned.target / "zero.h") == "/dev/zero"
    assert os.readlink(cloned.target / "everything") == "/"
    assert shared.read_text() == before  # the clone wrote nothing through the link (a verbatim copy)
    assert os.readlink(cloned.target / "problem.yaml") == str(shared)


@pytest.mark.parametrize("how", ["fifo", "dev_zero"])
def test_a_hostile_replay_session_file_is_one_line(how: str, tmp_path: Path) -> None:
    """session.jsonl sits in the problem directory (``--provider replay`` reads it)."""
    from cacao_tui.llm.errors import LLMError
    from cacao_tui.llm.session_file import read_session_file

    session = tmp_path / "session.jsonl"
    session.write_text("")
    HOSTILE[how](session)
    with pytest.raises(LLMError) as info:
        read_session_file(session)
    assert REASONS[how] in str(info.value) and one_line(str(info.value))
