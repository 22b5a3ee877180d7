"""Issue 23, item 2: the problem editor stages only inside its staging directory.

Before, the editor wrote the typed reference to whatever path ``reference.file`` named, relative
traversal or absolute, deleting the target first, in the live check 0.6 s after a keystroke and
even when the user then pressed Esc; the loader's refusal came only after the write. Now every
path the edited files name is checked before anything is written (``writer._staged``).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from cacao_tui.problem.writer import ProblemSource, check_source, read_problem_source, save_problem
from ktt.problem import ProblemError

ROOT = Path(__file__).resolve().parents[2]


def _problem(tmp_path: Path) -> Path:
    target = tmp_path / "mmul"
    shutil.copytree(ROOT / "problems" / "mmul", target, ignore=shutil.ignore_patterns("output", "archive", "demo"))
    return target


def _victims(tmp_path: Path) -> dict[str, Path]:
    outside = tmp_path / "outside"
    outside.mkdir()
    victims = {"relative": tmp_path / "victim.txt", "absolute": outside / "victim.txt"}
    for path in victims.values():
        path.write_text("precious\n")
    return victims


def _hostile(source: ProblemSource, name: str) -> ProblemSource:
    source.problem["reference"]["file"] = name
    source.reference_text = 'extern "C" __global__ void x() {}\n'
    return source


def _names(victims: dict[str, Path]) -> dict[str, str]:
    # The live check stages in <parent>/.cacao-check-*/<name>/: two levels up is the problem's parent.
    return {"relative": "../../victim.txt", "absolute": str(victims["absolute"]), "deep": "../../" * 8 + "tmp/x"}


@pytest.mark.parametrize("how", ["relative", "absolute", "deep"])
def test_the_live_check_never_writes_outside(how: str, tmp_path: Path) -> None:
    target = _problem(tmp_path)
    victims = _victims(tmp_path)
    name = _names(victims)[how]
    result = check_source(_hostile(read_problem_source(target), name), target, existing=True, preflight=lambda p: [])
    assert not result.ok and result.error is not None
    assert "reference.file" in result.error and "\n" not in result.error
    for victim in victims.values():
        assert victim.read_text() == "precious\n", f"{victim} was touched"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mmul", "outside", "victim.txt"]  # scratch removed


def test_a_save_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    target = _problem(tmp_path)
    victims = _victims(tmp_path)
    before = {p.name: p.read_bytes() for p in target.iterdir() if p.is_file()}
    for name in ("../victim.txt", str(victims["absolute"]), "output/ref.cu", "output.lock"):
        with pytest.raises(ProblemError) as info:
            save_problem(_hostile(read_problem_source(target), name), target, existing=True, preflight=lambda p: [])
        assert all(v.read_text() == "precious\n" for v in victims.values()), f"{name}: a file outside was written"
        assert info.value.field == "reference.file"
    assert {p.name: p.read_bytes() for p in target.iterdir() if p.is_file()} == before


def test_a_link_inside_the_problem_is_not_written_through(tmp_path: Path) -> None:
    target = _problem(tmp_path)
    victims = _victims(tmp_path)
    os.symlink(victims["absolute"].parent, target / "refs")  # refs/ -> a directory outside
    source = _hostile(read_problem_source(target), "refs/victim.txt")
    result = check_source(source, target, existing=True, preflight=lambda p: [])
    assert not result.ok and "link" in (result.error or "")
    with pytest.raises(ProblemError):
        save_problem(source, target, existing=True, preflight=lambda p: [])
    assert victims["absolute"].read_text() == "precious\n"


def test_a_data_file_name_cannot_leave_inputs(tmp_path: Path) -> None:
    target = _problem(tmp_path)
    victims = _victims(tmp_path)
    picked = tmp_path / "data.bin"
    picked.write_bytes(b"\0" * 16)
    for name in ("../../victim.txt", str(victims["absolute"])):
        source = read_problem_source(target)
        source.data_files = {name: picked}
        result = check_source(source, target, existing=True, preflight=lambda p: [])
        assert not result.ok and "file_name" in (result.error or "")
    assert all(v.read_text() == "precious\n" for v in victims.values())


async def test_typing_a_hostile_path_then_esc_writes_nothing(tmp_path: Path) -> None:
    from cacao_tui.ui.editor import EditorApp
    from tests.ui.test_editor import _checked, _closed, _editor, _settled_listing, _type

    target = _problem(tmp_path)
    victims = _victims(tmp_path)
    before = {p.name: p.read_bytes() for p in target.iterdir() if p.is_file()}
    app = EditorApp(target)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await _editor(pilot)
        await _checked(pilot, screen)
        checks = screen.checks_run
        await _type(pilot, screen, "#ed-ref-file", "../../victim.txt")  # the live check stages two levels down
        await _checked(pilot, screen, after=checks)  # the live check ran on the hostile path
        status = str(screen.query_one("#editor-status").render())
        assert "reference.file" in status, status
        await pilot.press("escape")
        await _closed(pilot, 100)
    assert app.return_value is None
    assert victims["relative"].read_text() == "precious\n"
    assert {p.name: p.read_bytes() for p in target.iterdir() if p.is_file()} == before
    assert _settled_listing(tmp_path) == ["mmul", "outside", "victim.txt"]
