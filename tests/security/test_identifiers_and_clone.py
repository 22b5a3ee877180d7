"""Issue 23, items 13 and 14: identifiers are anchored with ``\\Z`` (a trailing newline is no longer
accepted by ``^...$`` with ``match``), and ``--clone`` is bounded and sparse-aware.

Before: ``ktt/spec.py``, ``ktt/problem/loader.py`` and ``store/inbox.py`` accepted ``"name\\n"``;
``--clone`` (and ``C`` on the home screen) copied a sparse file densely, with no size bound.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest
from bounds_problem import make_problem

from cacao_tui.problem.names import PLAIN_NAME
from cacao_tui.store import clone as clone_module
from cacao_tui.store.clone import CloneError, clone_problem
from cacao_tui.store.inbox import _ID
from cacao_tui.store.layout import BRANCH_NAME, ITER_DIR
from ktt.problem import ProblemError, load_problem
from ktt.problem.loader import CASE_NAME
from ktt.problem.loader import IDENTIFIER as PROBLEM_IDENTIFIER
from ktt.spec import IDENTIFIER, SpecError, load_spec_text

ID = "01234567890123456789-4242-abcdef"


@pytest.mark.parametrize(
    ("pattern", "good"),
    [
        (IDENTIFIER, "BLOCK"),
        (PROBLEM_IDENTIFIER, "N"),
        (CASE_NAME, "t100"),
        (_ID, ID),
        (BRANCH_NAME, "b1-tiled"),
        (ITER_DIR, "iter3"),
        (PLAIN_NAME, "mmul_v2"),
    ],
)
def test_a_trailing_newline_is_not_an_identifier(pattern: object, good: str) -> None:
    assert pattern.match(good) and pattern.fullmatch(good)  # type: ignore[attr-defined]
    assert pattern.match(good + "\n") is None  # type: ignore[attr-defined]


def test_a_tune_parameter_or_an_arg_named_with_a_newline_is_refused(tmp_path: Path) -> None:
    root = make_problem(tmp_path)
    with pytest.raises(SpecError):
        load_spec_text('tune_params: {"BLOCK\\n": [32]}\nlaunches: []\n', load_problem(root))
    text = (root / "inputs.yaml").read_text()
    (root / "inputs.yaml").write_text(text.replace("name: N", 'name: "N\\n"', 1))
    with pytest.raises(ProblemError, match="not a valid C identifier"):
        load_problem(root)


def test_a_command_file_named_with_a_newline_is_not_read(tmp_path: Path) -> None:
    from cacao_tui.store.inbox import has_pending, pending_commands
    from cacao_tui.store.layout import RunLayout
    from cacao_tui.store.state import ControlCommand

    branch = RunLayout(tmp_path).branch("b1")
    (branch.root / "inbox").mkdir(parents=True)
    forged = ControlCommand(id=ID + "\n", kind="message", text="from a name with a newline")
    (branch.root / "inbox" / f"{ID}\n.json").write_text(forged.model_dump_json())
    inbox = pending_commands(branch, [])
    assert not inbox.commands and not inbox.unreadable and not has_pending(branch, [])  # ignored, never shown


def _problem_with(tmp_path: Path) -> Path:
    root = make_problem(tmp_path)
    (root / "inputs").mkdir(exist_ok=True)
    return root


def test_a_sparse_file_is_cloned_sparse_and_fast(tmp_path: Path) -> None:
    root = _problem_with(tmp_path)
    big = root / "inputs" / "huge.bin"
    with open(big, "wb") as f:
        f.truncate(64 * 1024**3)  # 64 GiB apparent, a few bytes of data
        f.seek(40 * 1024**3)
        f.write(b"data in the middle")
    started = time.monotonic()
    cloned = clone_problem(root, "copy")
    assert time.monotonic() - started < 30  # before: 64 GiB written, byte by byte
    copy = cloned.target / "inputs" / "huge.bin"
    assert copy.stat().st_size == big.stat().st_size
    assert copy.stat().st_blocks * 512 < 16 * 1024**2, "the holes were filled in"
    with open(copy, "rb") as f:
        f.seek(40 * 1024**3)
        assert f.read(18) == b"data in the middle"


def test_a_clone_over_its_data_bound_copies_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _problem_with(tmp_path)
    (root / "inputs" / "data.bin").write_bytes(os.urandom(256 * 1024))
    monkeypatch.setattr(clone_module, "MAX_CLONE_BYTES", 128 * 1024)
    with pytest.raises(CloneError, match="more than"):
        clone_problem(root, "copy")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["problem"]  # no target, no staging left


@pytest.mark.parametrize("kind", ["fifo", "socket"])
def test_a_special_file_in_the_problem_is_refused_in_one_line(kind: str, tmp_path: Path) -> None:
    root = _problem_with(tmp_path)
    special = root / "inputs" / "pipe"
    if kind == "fifo":
        os.mkfifo(special)
    else:
        import socket

        sock = socket.socket(socket.AF_UNIX)
        sock.bind(str(special))
        sock.close()
    started = time.monotonic()
    with pytest.raises(CloneError) as info:
        clone_problem(root, "copy")
    assert time.monotonic() - started < 5 and "\n" not in str(info.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["problem"]


def test_links_stay_links(tmp_path: Path) -> None:
    root = _problem_with(tmp_path)
    os.symlink("/dev/zero", root / "zero.h")
    os.symlink("/", root / "everything")
    cloned = clone_problem(root, "copy")
    assert os.readlink(cloned.target / "zero.h") == "/dev/zero"
    assert os.readlink(cloned.target / "everything") == "/"
    shutil.rmtree(cloned.target)
