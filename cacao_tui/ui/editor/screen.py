"""The problem editor (new and edit): every key of problem.yaml and inputs.yaml, the reference with
syntax highlighting, data files picked from disk, and a live ``--check`` panel.

Every edit changes the in-memory ``ProblemSource`` only; 0.6 s after the last edit a worker
thread stages it in a scratch directory and runs the same checks as ``cacao --check``
(``cacao_tui.problem.writer.check_source``); the panel shows the generated inputs.hpp, the
reference signature the boundary asks for and the report, or the one-line error. Save runs
the check again and writes only what passes, all at once (``save_problem``); Cancel
writes nothing.

    screen = ProblemEditorScreen(Path("problems/saxpy"))               # edit
    screen = ProblemEditorScreen(Path("problems/new-one"), new=True)   # create
    app.push_screen(screen, callback)   # callback(saved directory or None)
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import (
    Button,
    Input,
    Label,
    Select,
    Static,
    TabbedContent,
    TabPane,
    Tabs,
    TextArea,
)
from textual.worker import Worker, WorkerState

from cacao_tui.problem.writer import (
    CheckResult,
    ProblemSource,
    check_data_file,
    check_source,
    default_reference_function,
    is_reference_stub,
    new_source,
    read_problem_source,
    reference_stub,
    save_problem,
)
from cacao_tui.ui import keymap
from cacao_tui.ui.editor.actions import save_cancel
from cacao_tui.ui.editor.args_pane import ArgsPane, data_file_name
from cacao_tui.ui.editor.code import CodeEditor
from cacao_tui.ui.editor.file_picker import FilePickScreen
from cacao_tui.ui.editor.raw_yaml import RawYamlScreen
from cacao_tui.ui.editor.renames import rename_in_problem
from cacao_tui.ui.formatting import safe_text
from cacao_tui.ui.screens.dialogs import ConfirmScreen
from ktt.problem import ProblemError
from ktt.problem.loader import REFERENCE_FILES

CHECK_DELAY_S = 0.6
WIDE_COLUMNS = 140  # from this width the check panel sits beside the tabs as well

EDITOR_KEYS: tuple[keymap.Key, ...] = (
    keymap.Key("ctrl+s", "save", "save", "Save: check, then write the problem (only if --check passes)",
               display="ctrl+s", priority=True, section="Editor"),
    keymap.Key("escape", "cancel", "cancel", "Cancel: leave without writing anything", display="esc",
               section="Editor"),
    keymap.Key("ctrl+r", "recheck", "check", "Run --check now", display="ctrl+r", priority=True,
               section="Editor"),
    keymap.Key("ctrl+t", "next_tab", "next tab", "Next tab (Problem, Args, Reference, Rules & cases, Check)",
               display="ctrl+t", priority=True, section="Editor"),
    keymap.Key("f1", "keys", "keys", "This list of keys (? types a character in the editor's fields)",
               display="f1", priority=True, section="Editor"),
)  # fmt: skip

REFERENCE_TYPES = (("cuda (ref_kernel.cu)", "cuda"), ("cpu_c (ref_cpu.c)", "cpu_c"), ("python (ref.py)", "python"))
SIZE_TYPES = (("cuda: grid counts blocks", "cuda"), ("opencl: grid counts threads", "opencl"))
TABS = ("tab-problem", "tab-args", "tab-reference", "tab-rules", "tab-check")

# Input id -> key path in problem.yaml
PROBLEM_FIELDS: dict[str, tuple[str, ...]] = {
    "ed-name": ("name",),
    "ed-gpu-index": ("gpu", "index"),
    "ed-gpu-cc": ("gpu", "compute_capability"),
    "ed-grid-x": ("grid", "x"),
    "ed-grid-y": ("grid", "y"),
    "ed-grid-z": ("grid", "z"),
    "ed-tolerance": ("validation", "tolerance"),
    "ed-duration": ("tuning", "duration_s"),
    "ed-floor-bytes": ("physical_floor", "bytes"),
    "ed-floor-flops": ("physical_floor", "flops"),
    "ed-ref-file": ("reference", "file"),
    "ed-ref-function": ("reference", "function"),
    "ed-block-x": ("reference", "block", "x"),
    "ed-block-y": ("reference", "block", "y"),
    "ed-block-z": ("reference", "block", "z"),
}
TEXT_KEYS = {"ed-name", "ed-gpu-cc", "ed-ref-file", "ed-ref-function"}  # never read as numbers


def _get(data: dict[str, Any], path: tuple[str, ...]) -> Any:
    node: Any = data
    for key in path:
        if not isinstance(node, dict) or key not in node:
            return None
        node = node[key]
    return node


def set_path(data: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    """Set a nested key; ``None`` removes it, and sections left empty go too."""
    if value is None:
        chain = [data]
        for key in path[:-1]:
            node = chain[-1].get(key)
            if not isinstance(node, dict):
                return
            chain.append(node)
        chain[-1].pop(path[-1], None)
        for depth in range(len(path) - 1, 0, -1):
            if not chain[depth]:
                chain[depth - 1].pop(path[depth - 1], None)
        return
    node = data
    for key in path[:-1]:
        if not isinstance(node.get(key), dict):
            node[key] = {}
        node = node[key]
    node[path[-1]] = value


def _typed(text: str, as_text: bool) -> Any:
    text = text.strip()
    if not text:
        return None
    if as_text:
        return text
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            continue
    return text


def sanitize(text: str) -> Text:
    """Problem files are untrusted: control characters escaped, and never read as markup."""
    return Text(safe_text(text, keep_newlines=True))


def _show(value: Any) -> str:
    return "" if value is None else str(value)


class FormScroll(VerticalScroll, can_focus=False):
    """A tab's form: it scrolls to the focused field, and takes no focus itself (a scroll box that
    is focusable only once it overflows made the number of Tabs to a field depend on timing)."""


def _yaml_block(value: Any) -> str:
    if value in (None, [], {}):
        return ""
    return yaml.safe_dump(value, sort_keys=False, allow_unicode=True, width=100)


class ProblemEditorScreen(Screen[Path | None]):
    """Edit ``directory`` (or, with ``new=True``, create it). Dismissed with the saved directory or None."""

    BINDINGS = keymap.bindings(EDITOR_KEYS)
    DEFAULT_CSS = """
    ProblemEditorScreen #editor-title { height: 1; }
    ProblemEditorScreen #ed-directory-full { height: auto; color: $text-muted; }
    ProblemEditorScreen #editor-body { height: 1fr; }
    ProblemEditorScreen #editor-tabs { width: 1fr; }
    ProblemEditorScreen #check-side { display: none; width: 45%; border-left: solid $primary-darken-2; }
    ProblemEditorScreen.-wide #check-side { display: block; }
    ProblemEditorScreen #editor-status { height: auto; max-height: 3; padding: 0 1; }
    ProblemEditorScreen #editor-status.-ok { color: $success; }
    ProblemEditorScreen #editor-status.-error { color: $error; }
    ProblemEditorScreen #editor-status.-warning { color: $warning; }
    ProblemEditorScreen #editor-status.-busy { color: $text-muted; }
    ProblemEditorScreen #editor-actions { height: 1; }
    ProblemEditorScreen #editor-actions Button { margin-right: 2; }
    ProblemEditorScreen .editor-form { height: 1fr; }
    ProblemEditorScreen .editor-form Label { margin-top: 1; color: $text-muted; }
    ProblemEditorScreen .form-row { height: auto; }
    ProblemEditorScreen .form-row Input { width: 1fr; margin-right: 1; }
    ProblemEditorScreen .form-row Select { width: 1fr; margin-right: 1; }
    ProblemEditorScreen .form-row Checkbox { width: auto; margin-right: 2; }
    ProblemEditorScreen .form-row Label { margin-top: 0; width: auto; margin-right: 1; }
    ProblemEditorScreen #ed-description { height: 4; }
    ProblemEditorScreen #ed-rules { height: 6; }
    ProblemEditorScreen #ed-cases { height: 8; }
    ProblemEditorScreen #ed-headers { height: 3; }
    ProblemEditorScreen #ed-shared-setup { height: 8; }
    ProblemEditorScreen #ed-ref-source { height: 1fr; min-height: 6; }
    ProblemEditorScreen #ed-signature { height: auto; color: $text-muted; }
    ProblemEditorScreen #args-pane { height: 1fr; }
    ProblemEditorScreen #args-table { height: 1fr; min-height: 4; max-height: 12; }
    ProblemEditorScreen .editor-buttons { height: 1; }
    ProblemEditorScreen .editor-buttons Button { margin-right: 1; }
    ProblemEditorScreen #arg-form { height: 1fr; }
    ProblemEditorScreen #arg-scalar-fields, ProblemEditorScreen #arg-buffer-fields { height: auto; }
    ProblemEditorScreen #arg-custom-fields { height: auto; }
    ProblemEditorScreen #arg-body { height: 10; }
    """

    def __init__(self, directory: Path, *, new: bool = False, source: ProblemSource | None = None) -> None:
        super().__init__(classes="editor-screen")
        self.directory = Path(directory).expanduser().absolute()
        # A new problem's *Directory*, when relative, is under the folder it was proposed in (the
        # home screen's problems folder), not the working directory: the list then shows it.
        self.folder = self.directory.parent
        self.new = new
        self.load_error: str | None = None
        if source is not None:
            self.source = source
        elif new:
            self.source = new_source(self.directory.name)
        else:
            try:
                self.source = read_problem_source(self.directory)
            except ProblemError as exc:
                self.load_error = str(exc)
                self.source = ProblemSource(problem={}, inputs={"args": []})
        self.source.inputs.setdefault("args", [])
        self.dirty = False
        self.check: CheckResult | None = None
        self._applied: dict[str, str] = {}  # text field id -> the text last folded into the source
        self.checks_run = 0
        self._generation = 0
        self._check_timer: Timer | None = None
        self._loading = True

    # ---- layout ---------------------------------------------------------------------------------
    def _title(self) -> Text:
        return sanitize(f"{'New problem' if self.new else 'Edit problem'} · {self.directory}")

    def compose(self) -> ComposeResult:
        yield Static(self._title(), id="editor-title", classes="pane-header")
        with Horizontal(id="editor-body"):
            with TabbedContent(id="editor-tabs"):
                with TabPane("Problem", id="tab-problem"), FormScroll(classes="editor-form"):
                    yield from self._problem_fields()
                with TabPane("Args", id="tab-args"):
                    yield ArgsPane(self.source.inputs["args"], id="args-pane")
                with TabPane("Reference", id="tab-reference"), Vertical(classes="editor-form"):
                    yield from self._reference_fields()
                with TabPane("Rules & cases", id="tab-rules"), FormScroll(classes="editor-form"):
                    yield from self._rules_fields()
                with TabPane("Check", id="tab-check"), VerticalScroll():
                    yield Static("", id="check-full")
            with VerticalScroll(id="check-side"):
                yield Static("", id="check-side-body")
        yield from save_cancel("editor")

    def _problem_fields(self) -> ComposeResult:
        p = self.source.problem
        if self.new:
            yield Label(f"Directory (created on save; a relative one goes under {self.folder})")
            yield Input(str(self.directory), id="ed-directory", compact=True)
            yield Static(self._writes_to(), id="ed-directory-full", classes="field-note")
        yield Label("Name")
        yield Input(_show(p.get("name")), id="ed-name", compact=True)
        yield Label("Description (reaches the prompts)")
        yield TextArea(_show(p.get("description")), id="ed-description", soft_wrap=True)
        yield Label("Grid x / y / z (expressions over scalars)")
        with Horizontal(classes="form-row"):
            for axis in "xyz":
                yield Input(_show(_get(p, ("grid", axis))), placeholder="1", id=f"ed-grid-{axis}", compact=True)
        yield Label("global_size_type")
        yield Select(SIZE_TYPES, value=str(p.get("global_size_type") or "cuda"), allow_blank=False,
                     id="ed-size-type", compact=True)  # fmt: skip
        yield Label("GPU index / compute capability (when none is detected)")
        with Horizontal(classes="form-row"):
            yield Input(_show(_get(p, ("gpu", "index"))), placeholder="0", id="ed-gpu-index", compact=True)
            yield Input(_show(_get(p, ("gpu", "compute_capability"))), placeholder="9.0", id="ed-gpu-cc", compact=True)
        yield Label("Tolerance / tuning budget (seconds per iteration and case)")
        with Horizontal(classes="form-row"):
            yield Input(
                _show(_get(p, ("validation", "tolerance"))), placeholder="1e-4", id="ed-tolerance", compact=True
            )
            yield Input(_show(_get(p, ("tuning", "duration_s"))), placeholder="20", id="ed-duration", compact=True)
        yield Label("Physical floor: bytes / flops (expressions over scalars)")
        with Horizontal(classes="form-row"):
            yield Input(_show(_get(p, ("physical_floor", "bytes"))), id="ed-floor-bytes", compact=True)
            yield Input(_show(_get(p, ("physical_floor", "flops"))), id="ed-floor-flops", compact=True)

    def _reference_fields(self) -> ComposeResult:
        p = self.source.problem
        rtype = self.source.reference_type
        with Horizontal(classes="form-row"):
            yield Select(REFERENCE_TYPES, value=rtype, allow_blank=False, id="ed-ref-type", compact=True)
            yield Input(_show(_get(p, ("reference", "file"))), placeholder=REFERENCE_FILES[rtype],
                        id="ed-ref-file", compact=True)  # fmt: skip
            yield Input(_show(_get(p, ("reference", "function"))), placeholder="function", id="ed-ref-function",
                        compact=True)  # fmt: skip
        with Horizontal(classes="form-row", id="ed-block-row"):
            yield Label("block x/y/z")
            for axis in "xyz":
                yield Input(_show(_get(p, ("reference", "block", axis))), placeholder="1", id=f"ed-block-{axis}",
                            compact=True)  # fmt: skip
        yield Static("", id="ed-signature")
        yield CodeEditor(self.source.reference_text or "", kind=rtype, id="ed-ref-source")

    def _rules_fields(self) -> ComposeResult:
        p = self.source.problem
        yield Label("rules (YAML: a string, a list of strings, or {text: ..., forbid: [{pattern, reason}]})")
        yield TextArea(_yaml_block(p.get("rules")), language="yaml", id="ed-rules")
        yield Label("cases (YAML list: name, scalars: {...}, files: {buffer: file under inputs/}, duration_s)")
        yield TextArea(_yaml_block(p.get("cases")), language="yaml", id="ed-cases")
        yield Button("add a data file to inputs/… (for a case's files)", id="ed-add-data", compact=True)
        yield Label("inputs.yaml headers (one per line) and shared_setup (C++ for the custom generators)")
        yield TextArea("\n".join(map(str, self.source.inputs.get("headers") or [])), id="ed-headers")
        yield CodeEditor(_show(self.source.inputs.get("shared_setup")), kind="cpp", id="ed-shared-setup")

    def on_mount(self) -> None:
        self._layout_for(self.size.width)
        self._sync_reference_rows()
        self.call_after_refresh(self._ready)
        if self.load_error:
            self._status(f"✗ {self.load_error}", "error")
            # The fields cannot show what does not load: its text is fixed first, then they open.
            self.app.push_screen(RawYamlScreen(self.directory, self.load_error), self._yaml_fixed)
        else:
            self.schedule_check(0.0)

    async def _yaml_fixed(self, written: bool | None) -> None:
        if not written:
            self.dismiss(None)
            return
        try:
            self.source = read_problem_source(self.directory)
        except ProblemError as exc:
            self.load_error = str(exc)
            self.app.push_screen(RawYamlScreen(self.directory, self.load_error), self._yaml_fixed)
            return
        self.source.inputs.setdefault("args", [])
        self.load_error = None
        self._loading = True
        await self.recompose()
        self._sync_reference_rows()
        self.call_after_refresh(self._ready)
        self.schedule_check(0.0)

    def _ready(self) -> None:
        self._loading = False
        self._applied = {area.id or "": area.text for area in self.query(TextArea)}

    def on_resize(self) -> None:
        self._layout_for(self.size.width)

    def _layout_for(self, width: int) -> None:
        self.set_class(width >= WIDE_COLUMNS, "-wide")

    # ---- edits ----------------------------------------------------------------------------------
    def changed(self) -> None:
        if self._loading:
            return
        self.dirty = True
        self.schedule_check()

    def _target(self, text: str) -> Path:
        """The directory a new problem is written to: a relative one under ``self.folder``."""
        path = Path(text.strip() or ".").expanduser()
        return (path if path.is_absolute() else self.folder / path).absolute()

    def _writes_to(self) -> Text:
        """The full path the save will write, under the field (the field may hold a relative one)."""
        note = sanitize(f"→ {self.directory}")
        if self.directory.parent != self.folder:
            note.append_text(sanitize(f"  (not in {self.folder}: its home list will not show it)"))
            note.stylize("yellow")
        return note

    def _follow(self, wid: str, old: str, new: str) -> None:
        """A field that still holds what ``old`` gave it takes what ``new`` gives (a renamed new
        problem's name, a reference function still named after the old name)."""
        field = self.query_one(f"#{wid}", Input)
        if field.value == old and old != new:
            field.value = new

    @on(Input.Changed)
    def _input(self, event: Input.Changed) -> None:
        wid = event.input.id or ""
        if wid == "ed-directory":
            old = self.directory.name
            self.directory = self._target(event.value)
            self.query_one("#editor-title", Static).update(self._title())
            self.query_one("#ed-directory-full", Static).update(self._writes_to())
            if not self._loading:
                self._follow("ed-name", old, self.directory.name)
            self.changed()
        elif wid in PROBLEM_FIELDS:
            if self._loading:
                return
            if wid == "ed-name":
                old, new = str(self.source.problem.get("name") or ""), event.value
                self._follow("ed-ref-function", default_reference_function(old), default_reference_function(new))
            set_path(self.source.problem, PROBLEM_FIELDS[wid], _typed(event.value, wid in TEXT_KEYS))
            if wid == "ed-ref-function":
                self._restub()
            self.changed()

    @on(Select.Changed, "#ed-size-type")
    def _size_type(self, event: Select.Changed) -> None:
        if self._loading or self.source.problem.get("global_size_type", "cuda") == event.value:
            return
        self.source.problem["global_size_type"] = str(event.value)
        self.changed()

    @on(Select.Changed, "#ed-ref-type")
    def _ref_type(self, event: Select.Changed) -> None:
        rtype = str(event.value)
        if self._loading or rtype == self.source.reference_type:
            return
        ref = self.source.problem.setdefault("reference", {})
        old_type = self.source.reference_type
        ref["type"] = rtype
        if ref.get("file") in (None, REFERENCE_FILES.get(old_type)):
            ref["file"] = REFERENCE_FILES[rtype]
            self.query_one("#ed-ref-file", Input).value = ref["file"]
        if rtype != "cuda":
            ref.pop("block", None)
        editor = self.query_one("#ed-ref-source", CodeEditor)
        editor.set_kind(rtype)
        if (self.new and not self.dirty_reference) or is_reference_stub(editor.text):
            func = ref.get("function") or f"{self.directory.name}_ref"
            editor.load_text(reference_stub(rtype, str(func), self.source.inputs))
            self.source.reference_text = editor.text
        self._sync_reference_rows()
        self.changed()

    @property
    def dirty_reference(self) -> bool:
        return getattr(self, "_reference_edited", False)

    def _sync_reference_rows(self) -> None:
        self.query_one("#ed-block-row").display = self.source.reference_type == "cuda"

    @on(TextArea.Changed)
    def _text_area(self, event: TextArea.Changed) -> None:
        if self._loading:
            return
        if self._apply_text(event.text_area.id or "", event.text_area.text):
            self.changed()

    def _apply_text(self, wid: str, text: str) -> bool:
        """One text field into the source; False when it is not one of the source's fields (or not YAML)."""
        if wid == "ed-description":
            set_path(self.source.problem, ("description",), text if text.strip() else None)
        elif wid == "ed-ref-source":
            self.source.reference_text = text
            self._reference_edited = True
        elif wid in ("ed-rules", "ed-cases"):
            key = "rules" if wid == "ed-rules" else "cases"
            try:
                value = yaml.safe_load(text) if text.strip() else None
            except yaml.YAMLError as exc:
                self._status(f"✗ {key}: not YAML ({str(exc).splitlines()[0]})", "error")
                return False
            set_path(self.source.problem, (key,), value)
        elif wid == "ed-headers":
            self.source.inputs["headers"] = [h.strip() for h in text.splitlines() if h.strip()]
        elif wid == "ed-shared-setup":
            set_path(self.source.inputs, ("shared_setup",), text if text.strip() else None)
        else:
            return False
        self._applied[wid] = text
        return True

    def _catch_up(self) -> bool:
        """Fold in what the fields hold now: keys typed just before ctrl+s may not have posted
        their Changed messages yet, and Save must write what the user sees. False: a YAML field
        does not parse (its line is in the status)."""
        for field in self.query(Input):
            wid = field.id or ""
            if wid == "ed-directory":
                self.directory = self._target(field.value)
            elif wid in PROBLEM_FIELDS and field.value != _show(_get(self.source.problem, PROBLEM_FIELDS[wid])):
                set_path(self.source.problem, PROBLEM_FIELDS[wid], _typed(field.value, wid in TEXT_KEYS))
        ok = True
        for area in self.query(TextArea):
            wid = area.id or ""
            if area.text != self._applied.get(wid) and not self._apply_text(wid, area.text):
                ok = ok and wid not in ("ed-rules", "ed-cases")
        return ok

    @on(ArgsPane.Changed)
    def _args_changed(self) -> None:
        self._restub()
        self.changed()

    @on(ArgsPane.Renamed)
    def _arg_renamed(self, message: ArgsPane.Renamed) -> None:
        """A scalar's new name replaces the old one wherever an expression used it."""
        if not rename_in_problem(self.source, message.old, message.new):
            return
        self.query_one(ArgsPane).refresh_table(select=self.query_one(ArgsPane).current)
        loading, self._loading = self._loading, True  # the fields show the source; not a new edit
        for wid, path in PROBLEM_FIELDS.items():
            for field in self.query(f"#{wid}"):
                if isinstance(field, Input) and field.value != _show(_get(self.source.problem, path)):
                    field.value = _show(_get(self.source.problem, path))
        self.query_one("#ed-cases", TextArea).load_text(_yaml_block(self.source.problem.get("cases")))
        self._applied["ed-cases"] = self.query_one("#ed-cases", TextArea).text
        self.call_after_refresh(lambda: setattr(self, "_loading", loading))

    def _restub(self) -> None:
        """A reference that is still the generated stub follows the args (its signature is theirs)."""
        editor = self.query_one("#ed-ref-source", CodeEditor)
        if not is_reference_stub(editor.text):
            return
        ref = self.source.problem.get("reference") or {}
        func = str(ref.get("function") or f"{self.directory.name}_ref")
        stub = reference_stub(self.source.reference_type, func, self.source.inputs)
        if stub != editor.text:
            editor.load_text(stub)
            self.source.reference_text = stub
            self._applied["ed-ref-source"] = stub

    @on(ArgsPane.PickFile)
    def _pick_for_buffer(self, message: ArgsPane.PickFile) -> None:
        arg = self.source.inputs["args"][message.index]
        name = str(arg.get("name"))

        def picked(path: Path | None) -> None:
            if path is None:
                return
            why = check_data_file(self.source, name, path)
            if why:
                self._status(f"✗ not used: {why}", "error")
                return
            target = data_file_name(path, self._taken_data_names(except_for=arg.get("file_name")))
            self.source.data_files[target] = path
            self.query_one(ArgsPane).set_file_name(message.index, target)
            self.notify(f"{path.name} will be copied to inputs/{target} on save")

        self.app.push_screen(FilePickScreen(self.directory.parent, f"Data file for buffer {name}"), picked)

    @on(Button.Pressed, "#ed-add-data")
    def _add_data(self) -> None:
        def picked(path: Path | None) -> None:
            if path is None:
                return
            why = check_data_file(self.source, "", path)
            if why:
                self._status(f"✗ not used: {why}", "error")
                return
            target = data_file_name(path, self._taken_data_names())
            self.source.data_files[target] = path
            self.notify(f"{path.name} will be copied to inputs/{target} on save; name it in a case's files:")
            self.changed()

        self.app.push_screen(FilePickScreen(self.directory.parent, "Data file for inputs/"), picked)

    def _taken_data_names(self, except_for: Any = None) -> set[str]:
        taken = set(self.source.data_files)
        inputs_dir = self.directory / "inputs"
        if inputs_dir.is_dir():
            taken |= {p.name for p in inputs_dir.iterdir()}
        taken.discard(except_for)
        return taken

    # ---- the live check -------------------------------------------------------------------------
    def schedule_check(self, delay: float = CHECK_DELAY_S) -> None:
        if self._check_timer is not None:
            self._check_timer.stop()
        self._check_timer = self.set_timer(max(delay, 0.01), self._start_check)

    def action_recheck(self) -> None:
        self.schedule_check(0.0)

    def _start_check(self) -> None:
        self._generation += 1
        generation = self._generation
        source = copy.deepcopy(self.source)
        directory, existing = self.directory, not self.new
        self._status("checking…", "busy")

        def work() -> tuple[int, CheckResult]:
            return generation, check_source(source, directory, existing=existing)

        self.run_worker(work, thread=True, group="editor-check", name="check", exit_on_error=False)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        worker = event.worker
        if worker.group == "editor-check" and event.state == WorkerState.SUCCESS:
            generation, result = worker.result  # type: ignore[misc]
            if generation == self._generation:
                self.show_check(result)
        elif worker.group == "editor-check" and event.state == WorkerState.ERROR:
            self._status(f"✗ --check could not run: {worker.error}", "error")
        elif worker.group == "editor-save" and event.state == WorkerState.SUCCESS:
            saved = Path(worker.result)  # type: ignore[arg-type]
            if self.new:  # where it went, in full; and why a list may not show it
                away = "" if saved.parent == self.folder else f" (not in {self.folder}: its list does not show it)"
                self.app.notify(safe_text(f"Saved the new problem to {saved}{away}"), timeout=8)
            self.dismiss(saved)
        elif worker.group == "editor-save" and event.state == WorkerState.ERROR:
            error = worker.error
            line = str(error) if isinstance(error, (ProblemError, OSError)) else f"{type(error).__name__}: {error}"
            self._status(f"✗ not saved: {line}", "error")
            self._saving = False

    def show_check(self, result: CheckResult) -> None:
        self.check = result
        self.checks_run += 1
        text = self._panel_text(result)
        self.query_one("#check-full", Static).update(text)
        self.query_one("#check-side-body", Static).update(text)
        signature = f"expects: {result.signature}" if result.ok else "expects: (fix the error shown below first)"
        if result.ok and result.boundary:  # the reference declares something else: said before a run fails on it
            signature += "".join(f"\n! {line}" for line in result.boundary)
        self.query_one("#ed-signature", Static).update(sanitize(signature))
        if result.ok and is_reference_stub(self.source.reference_text or ""):
            # It compiles and matches the boundary, but it traps: not a problem that can run yet.
            self._status("! the checks pass, but the reference is still the stub (it fails when run): "
                         "write its body on the Reference tab", "warning")  # fmt: skip
        elif result.ok and result.boundary:
            self._status(f"! --check OK, but the reference does not take the boundary: {result.boundary[0]}",
                         "warning")  # fmt: skip
        elif result.ok:
            n = len(result.warnings)
            self._status(f"✓ --check OK{f' ({n} warning' + ('s' if n != 1 else '') + ')' if n else ''}", "ok")
        else:
            self._status(f"✗ {result.error}", "error")

    @staticmethod
    def _panel_text(result: CheckResult) -> str:
        if not result.ok:
            return sanitize(f"--check: ✗ {result.error}")
        parts = [
            "reference signature",
            f"  {result.signature}",
            *(f"  ! {line}" for line in result.boundary),
            "",
            "inputs.hpp (generated)",
            *(f"  {line}" for line in result.inputs_hpp.splitlines()),
            "",
            "--check",
            result.report,
        ]
        return sanitize("\n".join(parts))

    def _status(self, text: str, kind: str) -> None:
        status = self.query_one("#editor-status", Static)
        status.update(sanitize(text))
        status.set_classes(f"-{kind}")

    # ---- save / cancel --------------------------------------------------------------------------
    _saving = False

    def action_save(self) -> None:
        if self._saving:
            return
        if self.load_error and not self.source.problem:
            self._status(f"✗ not saved: {self.load_error}", "error")
            return
        if not self._loading and not self._catch_up():
            return
        self._saving = True
        if self._check_timer is not None:  # the save checks again: a live check in flight is stale
            self._check_timer.stop()
        self._generation += 1
        self._status("saving: checking first…", "busy")
        source = copy.deepcopy(self.source)
        directory, existing = self.directory, not self.new

        def work() -> Path:
            save_problem(source, directory, existing=existing)
            return directory

        self.run_worker(work, thread=True, group="editor-save", name="save", exclusive=True, exit_on_error=False)

    @on(Button.Pressed, "#editor-save")
    def _save_pressed(self) -> None:
        self.action_save()

    @on(Button.Pressed, "#editor-cancel")
    def action_cancel(self) -> None:
        """Esc: leave, asking first when there are edits (they are lost)."""
        if not self.dirty and self._catch_up_clean():
            self.dismiss(None)
            return

        def answered(yes: bool | None) -> None:
            if yes:
                self.dismiss(None)

        what = "the new problem is not created" if self.new else "nothing is written"
        self.app.push_screen(ConfirmScreen("Leave without saving?", f"Your edits are lost; {what}.",
                                           yes="Discard"), answered)  # fmt: skip

    def _catch_up_clean(self) -> bool:
        """No edit is waiting in a field either (typed just before Esc, its message not yet handled)."""
        for field in self.query(Input):
            wid = field.id or ""
            if wid in PROBLEM_FIELDS and field.value != _show(_get(self.source.problem, PROBLEM_FIELDS[wid])):
                return False
        return all(area.text == self._applied.get(area.id or "", area.text) for area in self.query(TextArea))

    def action_keys(self) -> None:
        from cacao_tui.ui.editor.args_pane import ARGS_KEYS
        from cacao_tui.ui.home.help import KeysScreen

        sections = [("Editor", list(EDITOR_KEYS)), ("Args tab (table focused)", list(ARGS_KEYS))]
        self.app.push_screen(KeysScreen(sections, "Tab / shift+tab move between fields."))

    def action_next_tab(self) -> None:
        """The next tab, with the focus on the tab bar: a field left focused in the hidden tab pulled
        the view straight back to its own tab (TabbedContent follows the focus). Tab from the bar
        goes into the tab's first field (the forms themselves take no focus: the order is the same
        however fast the keys come)."""
        tabs = self.query_one("#editor-tabs", TabbedContent)
        i = TABS.index(tabs.active) if tabs.active in TABS else -1
        tabs.active = TABS[(i + 1) % len(TABS)]
        self.set_focus(tabs.query_one(Tabs))
