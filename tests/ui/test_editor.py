"""Pilot tests of the problem editor (cacao_tui.ui.editor): new, edit, a refused save, cancel."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from textual.widgets import Input, TabbedContent, Tabs, TextArea
from ui_helpers import until

from cacao_tui.ui.editor import EditorApp, ProblemEditorScreen
from cacao_tui.ui.editor.args_pane import ArgsPane, ArgsTable
from cacao_tui.ui.editor.code import CodeEditor, highlighting_available
from cacao_tui.ui.editor.raw_yaml import RawYamlScreen
from cacao_tui.ui.screens.dialogs import ConfirmScreen
from ktt.problem import load_problem

COMPAT = Path(__file__).resolve().parents[1] / "compat" / "problems"


def _settled_listing(parent: Path) -> list[str]:
    """The folder's entries once a check still running in its thread has removed its scratch copy."""
    for _ in range(200):
        names = sorted(p.name for p in parent.iterdir())
        if not any(n.startswith(".cacao-check-") for n in names):
            return names
        time.sleep(0.05)
    return names


def _tree(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


async def _editor(pilot) -> ProblemEditorScreen:
    await until(pilot, lambda: isinstance(pilot.app.screen, ProblemEditorScreen), "the editor did not open")
    return pilot.app.screen


async def _checked(pilot, screen: ProblemEditorScreen, after: int = 0) -> None:
    """Wait for a --check result newer than ``after`` checks."""
    await until(pilot, lambda: screen.checks_run > after and not screen.workers, "no --check result", timeout=80.0)


async def _closed(pilot, tries: int = 1600) -> None:
    """Wait (up to ``tries`` pauses of 50 ms) for the editor app to leave; its callers assert what it left."""
    for _ in range(tries):
        await pilot.pause(0.05)
        if not pilot.app.is_running:
            return


async def _type(pilot, screen: ProblemEditorScreen, selector: str, text: str) -> None:
    """Set a field and wait until its Changed message has bubbled up to the screen: each idle pause
    handles what was queued when it began, so one pause per level between the field and the app
    (a fixed 50 ms pause was too short on a loaded machine)."""
    widget = screen.query_one(selector, Input)
    widget.value = text
    for _ in widget.ancestors_with_self:
        await pilot.pause()


async def test_new_problem_is_written_only_after_check(tmp_path: Path) -> None:
    target = tmp_path / "scale"
    app = EditorApp(target, new=True)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await _editor(pilot)
        await _checked(pilot, screen)
        assert screen.check is not None and screen.check.ok, screen.check
        assert "#define LEN 1048576" in screen.check.inputs_hpp
        assert not target.exists()  # checking writes nothing
        await pilot.press("ctrl+s")
        for _ in range(1600):
            await pilot.pause(0.05)
            if app.return_value is not None or not app.is_running:
                break
    assert app.return_value == target.absolute()
    problem = load_problem(target)
    assert [a.name for a in problem.args] == ["LEN", "x", "y"]
    assert _settled_listing(tmp_path) == ["scale"]


async def test_edit_args_table_and_save(tmp_path: Path) -> None:
    shutil.copytree(COMPAT / "softmax_rows_py", tmp_path / "p")
    app = EditorApp(tmp_path / "p")
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await _editor(pilot)
        await _checked(pilot, screen)
        screen.query_one(TabbedContent).active = "tab-args"
        await pilot.pause(0.1)
        table = screen.query_one(ArgsTable)
        table.focus()
        assert table.row_count == 4
        await pilot.press("s")  # a scalar after the first row
        await pilot.pause(0.1)
        assert table.row_count == 5
        assert screen.source.inputs["args"][1]["name"] == "SCALAR1"
        await pilot.press("J")  # move it down one
        await pilot.pause(0.1)
        assert [a["name"] for a in screen.source.inputs["args"]][:3] == ["ROWS", "COLS", "SCALAR1"]
        await pilot.press("x")  # and remove it again
        await pilot.pause(0.1)
        assert [a["name"] for a in screen.source.inputs["args"]] == ["ROWS", "COLS", "inp", "out"]
        # the form edits the highlighted arg: COLS becomes 1024
        table.move_cursor(row=1)
        await pilot.pause(0.1)
        await _type(pilot, screen, "#arg-value", "1024")
        assert screen.source.inputs["args"][1]["value"] == 1024
        await _type(pilot, screen, "#ed-tolerance", "0.001")
        done = screen.checks_run
        await pilot.press("ctrl+r")
        await _checked(pilot, screen, done)
        assert screen.check is not None and screen.check.ok, screen.check
        await pilot.press("ctrl+s")
        await _closed(pilot)
    problem = load_problem(tmp_path / "p")
    assert problem.primary.scalars["COLS"] == 1024
    assert problem.tolerance == 0.001
    assert problem.reference.type == "python"


async def test_save_refused_leaves_the_disk_untouched(tmp_path: Path) -> None:
    shutil.copytree(COMPAT / "terrain_custom", tmp_path / "p")
    before = _tree(tmp_path / "p")
    app = EditorApp(tmp_path / "p")
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await _editor(pilot)
        await _checked(pilot, screen)
        screen.query_one(TabbedContent).active = "tab-reference"
        await pilot.pause(0.1)
        editor = screen.query_one("#ed-ref-source", CodeEditor)
        editor.load_text(editor.text.replace("<= LEVEL", "<= LEVEL +"))  # a syntax error in the reference
        await pilot.pause(0.1)
        await pilot.press("ctrl+s")
        for _ in range(1600):
            await pilot.pause(0.05)
            status = str(screen.query_one("#editor-status").render())
            if "not saved" in status:
                break
        assert "not saved" in status and "ref_cpu.c" in status, status
        assert app.is_running and app.screen is screen  # still editing
    assert _tree(tmp_path / "p") == before
    assert _settled_listing(tmp_path) == ["p"]


async def test_cancel_writes_nothing(tmp_path: Path) -> None:
    shutil.copytree(COMPAT / "spmv_files", tmp_path / "p")
    before = _tree(tmp_path / "p")
    app = EditorApp(tmp_path / "p")
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await _editor(pilot)
        await _type(pilot, screen, "#ed-grid-x", "NROWS * 2")
        assert screen.dirty
        await pilot.press("escape")  # edits: it asks first (it used to discard them at once)
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the question")
        assert app.is_running
        await pilot.press("n")  # back to the edits
        await until(pilot, lambda: app.screen is screen, "back in the editor")
        assert screen.query_one("#ed-grid-x", Input).value == "NROWS * 2"
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the question again")
        await pilot.press("y")
        await _closed(pilot, 100)
    assert app.return_value is None
    assert _tree(tmp_path / "p") == before
    assert _settled_listing(tmp_path) == ["p"]


async def test_data_file_picked_for_a_buffer(tmp_path: Path) -> None:
    shutil.copytree(COMPAT / "softmax_rows_py", tmp_path / "p")
    data = tmp_path / "inp.f32"
    data.write_bytes(b"\0" * 4 * 512 * 1000)
    app = EditorApp(tmp_path / "p")
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await _editor(pilot)
        await _checked(pilot, screen)
        screen.query_one(TabbedContent).active = "tab-args"
        await pilot.pause(0.1)
        pane = screen.query_one(ArgsPane)
        screen.query_one(ArgsTable).move_cursor(row=2)
        await pilot.pause(0.1)
        pane.post_message(ArgsPane.PickFile(2))
        await pilot.pause(0.2)
        path_box = app.screen.query_one("#picker-path", Input)
        path_box.value = str(data)
        await pilot.press("enter")
        await pilot.pause(0.2)
        assert screen.source.data_files == {"inp.f32": data.resolve()}
        assert screen.source.inputs["args"][2]["init"] == "file"
        done = screen.checks_run
        await pilot.press("ctrl+r")
        await _checked(pilot, screen, done)
        assert screen.check is not None and screen.check.ok, screen.check.error
        await pilot.press("ctrl+s")
        await _closed(pilot)
    assert (tmp_path / "p" / "inputs" / "inp.f32").stat().st_size == 4 * 512 * 1000
    assert load_problem(tmp_path / "p").primary.files["inp"].name == "inp.f32"


def test_highlighting_for_cuda_c_and_python() -> None:
    assert highlighting_available("cuda")
    assert highlighting_available("cpu_c")
    assert highlighting_available("python")


def test_editor_snapshot(snap_compare) -> None:
    # A fixed folder, not tmp_path: the editor shows the problem's absolute path, which must not
    # change from one run to the next (pytest-of-root/pytest-N differs every session).
    fixed = Path("/tmp/cacao-editor-snapshot")
    shutil.rmtree(fixed, ignore_errors=True)
    shutil.copytree(COMPAT / "spmv_files", fixed / "spmv_files")

    async def before(pilot) -> None:
        screen = await _editor(pilot)
        await _checked(pilot, screen)
        screen.query_one(TabbedContent).active = "tab-args"
        await pilot.pause(0.2)
        screen.query_one("#editor-title").update("Edit problem · problems/spmv_files")

    try:
        assert snap_compare(EditorApp(fixed / "spmv_files"), terminal_size=(150, 40), run_before=before)
    finally:
        shutil.rmtree(fixed, ignore_errors=True)


async def test_f1_lists_the_editors_keys(tmp_path: Path) -> None:
    app = EditorApp(tmp_path / "keys", new=True)
    async with app.run_test(size=(100, 30)) as pilot:
        await _editor(pilot)
        await pilot.press("f1")
        await pilot.pause(0.2)
        from cacao_tui.ui.home.help import KeysScreen

        assert isinstance(app.screen, KeysScreen)
        shown = app.export_screenshot().replace("&#160;", " ")
        expected = ("ctrl+s", "ctrl+r", "ctrl+t", "f1", "Cancel: leave without writing", "move the highlighted")
        for text in expected:
            assert text in shown, text
        await pilot.press("escape")
        await pilot.pause(0.1)
        assert isinstance(app.screen, ProblemEditorScreen)
    assert not (tmp_path / "keys").exists()


async def test_save_of_a_never_run_problem_writes_its_definition_only(tmp_path: Path) -> None:
    """No output/, no output.lock: the save's run lock is taken, and its file removed, when there was none."""
    shutil.copytree(COMPAT / "softmax_rows_py", tmp_path / "p")
    before = sorted(p.name for p in (tmp_path / "p").iterdir())
    app = EditorApp(tmp_path / "p")
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await _editor(pilot)
        await _checked(pilot, screen)
        await _type(pilot, screen, "#ed-tolerance", "0.002")
        await pilot.press("ctrl+s")
        await _closed(pilot)
    assert load_problem(tmp_path / "p").tolerance == 0.002
    assert sorted(p.name for p in (tmp_path / "p").iterdir()) == before
    assert _settled_listing(tmp_path) == ["p"]


async def test_what_was_typed_just_before_ctrl_s_is_saved(tmp_path: Path) -> None:
    """Keys typed into a field and ctrl+s at once: the field's Changed message may come after the
    save began; Save folds in what the fields show."""
    shutil.copytree(COMPAT / "softmax_rows_py", tmp_path / "p")
    app = EditorApp(tmp_path / "p")
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await _editor(pilot)
        await _checked(pilot, screen)
        screen.query_one(TabbedContent).active = "tab-rules"
        await pilot.pause(0.1)
        cases = screen.query_one("#ed-cases", TextArea)
        with screen.prevent(TextArea.Changed):  # as if its message had not arrived yet
            cases.text = "[{name: a}, {name: b, scalars: {ROWS: 8}}]"
        tolerance = screen.query_one("#ed-tolerance", Input)
        with screen.prevent(Input.Changed):
            tolerance.value = "0.003"
        await pilot.press("ctrl+s")
        await _closed(pilot)
    problem = load_problem(tmp_path / "p")
    assert [s.name for s in problem.shapes] == ["a", "b"] and problem.shapes[1].scalars["ROWS"] == 8
    assert problem.tolerance == 0.003


async def test_escape_without_edits_leaves_at_once(tmp_path: Path) -> None:
    shutil.copytree(COMPAT / "spmv_files", tmp_path / "p")
    app = EditorApp(tmp_path / "p")
    async with app.run_test(size=(80, 24)) as pilot:
        await _editor(pilot)
        await pilot.press("escape")
        await _closed(pilot, 100)
    assert app.return_value is None and not app.is_running


async def test_ctrl_t_moves_to_the_next_tab_from_inside_a_field(tmp_path: Path) -> None:
    """The focus in a field of the Problem tab: ctrl+t shows the Args tab, the focus on the tab bar
    (the field kept the focus before, and the tabs followed it straight back); Tab: its first field."""
    shutil.copytree(COMPAT / "spmv_files", tmp_path / "p")
    app = EditorApp(tmp_path / "p")
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await _editor(pilot)
        tabs = screen.query_one("#editor-tabs", TabbedContent)
        name = screen.query_one("#ed-name", Input)
        name.focus()
        await until(pilot, lambda: app.focused is name, "the focus in the name field")
        for expected in ("tab-args", "tab-reference", "tab-rules", "tab-check", "tab-problem"):
            await pilot.press("ctrl+t")
            await until(pilot, lambda expected=expected: tabs.active == expected, expected)
            assert isinstance(app.focused, Tabs)
        await pilot.press("ctrl+t", "ctrl+t", "ctrl+t", "tab")  # Rules & cases, then its first field
        rules = screen.query_one("#ed-rules", TextArea)
        await until(pilot, lambda: app.focused is rules, "the focus in the rules field")
        assert tabs.active == "tab-rules"


async def test_renaming_a_scalar_renames_its_uses_and_the_stub_follows_the_args(tmp_path: Path) -> None:
    """A new problem: LEN renamed to N (keystroke by keystroke, through an empty name) renames the
    sizes and the grid that used it; the reference, still the stub, takes the args' signature;
    the status never says a plain --check OK while the reference is the stub; the header shows
    the directory being typed."""
    target = tmp_path / "scale"
    app = EditorApp(target, new=True)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await _editor(pilot)
        await _checked(pilot, screen)
        status = str(screen.query_one("#editor-status").render())
        assert "still the stub" in status and "--check OK" not in status, status
        await _type(pilot, screen, "#ed-directory", str(tmp_path / "saxpy"))
        assert str(tmp_path / "saxpy") in str(screen.query_one("#editor-title").render())
        screen.query_one(TabbedContent).active = "tab-args"
        table = screen.query_one(ArgsTable)
        await until(pilot, lambda: table.is_mounted and table.row_count > 0, "the args table")
        table.move_cursor(row=0)
        await until(pilot, lambda: table.cursor_row == 0, "the first arg")
        for name in ("LE", "L", "", "N"):
            await _type(pilot, screen, "#arg-name", name)
        args = screen.source.inputs["args"]
        assert [a["name"] for a in args] == ["N", "x", "y"]
        assert [a.get("size") for a in args[1:]] == ["N", "N"]
        assert screen.source.problem["grid"]["x"] == "(N + 255) / 256"
        assert screen.query_one("#ed-grid-x", Input).value == "(N + 255) / 256"
        table.focus()
        table.move_cursor(row=2)
        await pilot.press("b")  # a buffer after y: the stub's signature follows
        source = screen.query_one("#ed-ref-source", CodeEditor)
        await until(pilot, lambda: "(const float* x, float* y, const float* buf1)" in source.text, "the new signature")
        stub = source.text
        assert "__trap()" in stub
        assert screen.source.reference_text == stub
        done = screen.checks_run
        await pilot.press("ctrl+r")
        await _checked(pilot, screen, done)
        assert screen.check is not None and screen.check.ok, screen.check.error
        assert "still the stub" in str(screen.query_one("#editor-status").render())


async def test_a_problem_whose_yaml_does_not_parse_opens_its_text_to_fix(tmp_path: Path) -> None:
    shutil.copytree(COMPAT / "spmv_files", tmp_path / "p")
    problem_yaml = tmp_path / "p" / "problem.yaml"
    good = problem_yaml.read_text()
    problem_yaml.write_text(good.replace("name:", "name: [unclosed", 1))
    app = EditorApp(tmp_path / "p")
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: isinstance(app.screen, RawYamlScreen), "the text view", timeout=5.0)
        raw = app.screen
        assert isinstance(raw, RawYamlScreen)
        area = raw.query_one("#raw-problem", TextArea)
        assert "name: [unclosed" in area.text  # the text, not blank fields
        assert "✗" in str(raw.query_one("#raw-status").render())
        await pilot.press("ctrl+s")  # still broken: nothing is written (the save runs in the key's handler)
        await pilot.pause()
        assert problem_yaml.read_text() != good and app.screen is raw
        area.load_text(good)
        status = raw.query_one("#raw-status")
        await until(pilot, lambda: "both files parse" in str(status.render()), "the text parsing again")
        await pilot.press("ctrl+s")
        screen = await _editor(pilot)
        await _checked(pilot, screen)
        assert screen.query_one("#ed-name", Input).value == load_problem(tmp_path / "p").name
        assert screen.check is not None and screen.check.ok
    assert problem_yaml.read_text() == good
    assert not (tmp_path / "p" / "output.lock").exists()  # a never-run problem keeps its definition only
