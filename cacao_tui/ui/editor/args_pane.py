"""The args table of the problem editor: the inputs.yaml ``args`` list, one row per arg, and a form
for the highlighted one (kind, dtype, placements, size, init with its fields, validate).

The pane edits the list of mappings it is given in place, key by key, so keys it has no field
for (or that the user never touched) are written back as they were read.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.widgets import Button, Checkbox, DataTable, Input, Label, Select, Static

from cacao_tui.ui import keymap
from cacao_tui.ui.editor.code import CodeEditor
from cacao_tui.ui.editor.renames import NAME
from cacao_tui.ui.widgets.tick_box import TickBox
from ktt.half_types import DTYPE_ALIASES
from ktt.problem.files import DTYPES

DTYPE_CHOICES = tuple((d, d) for d in DTYPES)  # every inputs.yaml dtype: one left out would be saved as float
KIND_CHOICES = (("scalar", "scalar"), ("buffer", "buffer"))
ACCESS_CHOICES = (("read", "read"), ("write", "write"), ("readwrite", "readwrite"))
INIT_CHOICES = (("random", "random"), ("normal", "normal"), ("zeros", "zeros"), ("custom", "custom"), ("file", "file"))
PLACEMENTS = ("host", "define", "runtime")
COLUMNS = ("#", "kind", "name", "dtype", "value / size", "placements / access", "init", "validate")

# No footer labels: the buttons under the table name these keys, and at 80 columns the footer
# keeps the editor's own (ctrl+s, esc, ctrl+r, ctrl+t, f1) in view.
ARGS_KEYS: tuple[keymap.Key, ...] = (
    keymap.Key("s", "add('scalar')", "", "Args: add a scalar after the highlighted row", section="Editor"),
    keymap.Key("b", "add('buffer')", "", "Args: add a buffer after the highlighted row", section="Editor"),
    keymap.Key("delete,x", "remove", "", "Args: remove the highlighted arg", display="x", section="Editor"),
    keymap.Key("K", "move(-1)", "", "Args: move the highlighted arg up", section="Editor"),
    keymap.Key("J", "move(1)", "", "Args: move the highlighted arg down", section="Editor"),
    keymap.Key("j", "cursor_down", "", "next", section="Editor"),
    keymap.Key("k", "cursor_up", "", "previous", section="Editor"),
)


def _text(value: Any) -> str:
    return "" if value is None else str(value)


def row_cells(index: int, arg: dict[str, Any]) -> tuple[object, ...]:
    kind = str(arg.get("kind", "?"))
    if kind == "scalar":
        amount = _text(arg.get("value"))
        where = ", ".join(arg.get("placements") or ["host", "define"])
        init = ""
        validate = ""
    else:
        amount = _text(arg.get("size"))
        where = _text(arg.get("access") or "read")
        init = _text(arg.get("init") or "random")
        if init == "file":
            init += f" {_text(arg.get('file_name') or arg.get('file'))}"
        validate = "✓" if arg.get("validate") else ""
    dtype = _text(arg.get("dtype") or ("int" if kind == "scalar" else "float"))
    return (str(index), kind, Text(_text(arg.get("name")), style="bold"), dtype, amount, where, init, validate)


class ArgsTable(DataTable):
    BINDINGS = keymap.bindings(ARGS_KEYS)

    def action_add(self, kind: str) -> None:
        self.post_message(ArgsPane.Request("add", kind))

    def action_remove(self) -> None:
        self.post_message(ArgsPane.Request("remove", ""))

    def action_move(self, step: int) -> None:
        self.post_message(ArgsPane.Request("move", str(step)))


class ArgsPane(Vertical):
    """Edits ``args`` (a list of mappings) in place; posts ``ArgsPane.Changed`` after every edit."""

    class Changed(Message):
        pass

    class Request(Message):
        def __init__(self, what: str, detail: str) -> None:
            super().__init__()
            self.what = what
            self.detail = detail

    class Renamed(Message):
        """A scalar's name changed from ``old`` (its last valid name) to ``new``."""

        def __init__(self, old: str, new: str) -> None:
            super().__init__()
            self.old = old
            self.new = new

    class PickFile(Message):
        """The user asked to pick the data file of buffer ``index`` from disk."""

        def __init__(self, index: int) -> None:
            super().__init__()
            self.index = index

    def __init__(self, args: list[dict[str, Any]], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.args = args
        self._loading = False
        self._good_name: str | None = None  # the highlighted scalar's last valid name (renames)

    def compose(self) -> ComposeResult:
        yield ArgsTable(id="args-table", cursor_type="row", zebra_stripes=True)
        # Tab goes from the table to the form's fields: the buttons are the table's keys (s b x K J)
        # for the mouse, not five Tab stops (nor is the form's scroll container one).
        with Horizontal(classes="editor-buttons"):
            buttons = (("+ scalar (s)", "arg-add-scalar"), ("+ buffer (b)", "arg-add-buffer"),
                       ("remove (x)", "arg-remove"), ("up (K)", "arg-up"), ("down (J)", "arg-down"))  # fmt: skip
            for label, wid in buttons:
                button = Button(label, id=wid, compact=True)
                button.can_focus = False
                yield button
        with VerticalScroll(id="arg-form", classes="editor-form", can_focus=False):
            with Horizontal(classes="form-row"):
                yield Select(KIND_CHOICES, allow_blank=False, id="arg-kind", compact=True)
                yield Input(placeholder="name", id="arg-name", compact=True)
                yield Select(DTYPE_CHOICES, allow_blank=False, id="arg-dtype", compact=True)
            with Vertical(id="arg-scalar-fields"):
                yield Label("value (a number or an expression over earlier scalars)")
                yield Input(id="arg-value", compact=True)
                with Horizontal(classes="form-row"):
                    for p in PLACEMENTS:
                        yield TickBox(p, id=f"arg-place-{p}", compact=True)
            with Vertical(id="arg-buffer-fields"):
                yield Label("size (elements; an expression over scalars)")
                yield Input(id="arg-size", compact=True)
                with Horizontal(classes="form-row"):
                    yield Select(ACCESS_CHOICES, allow_blank=False, id="arg-access", compact=True)
                    yield Select(INIT_CHOICES, allow_blank=False, id="arg-init", compact=True)
                    yield TickBox("validate", id="arg-validate", compact=True)
                with Horizontal(classes="form-row", id="arg-random-fields"):
                    yield Input(placeholder="min", id="arg-min", compact=True)
                    yield Input(placeholder="max", id="arg-max", compact=True)
                    yield Input(placeholder="seed", id="arg-seed", compact=True)
                with Horizontal(classes="form-row", id="arg-file-fields"):
                    yield Input(placeholder="file_name under inputs/", id="arg-file-name", compact=True)
                    yield Button("pick file…", id="arg-pick", compact=True)
                with Vertical(id="arg-custom-fields"):
                    yield Label("body: a C++ function body returning std::vector<dtype>")
                    yield CodeEditor("", kind="cpp", id="arg-body")
            yield Static("", id="arg-empty")

    def on_mount(self) -> None:
        table = self.query_one(ArgsTable)
        table.add_columns(*COLUMNS)
        self.refresh_table()

    # ---- the table ------------------------------------------------------------------------
    @property
    def current(self) -> int | None:
        table = self.query_one(ArgsTable)
        if not self.args or table.row_count == 0:
            return None
        return min(table.cursor_row, len(self.args) - 1)

    def refresh_table(self, select: int | None = None) -> None:
        table = self.query_one(ArgsTable)
        keep = self.current if select is None else select
        table.clear()
        for i, arg in enumerate(self.args):
            table.add_row(*row_cells(i, arg), key=str(i))
        if self.args:
            table.move_cursor(row=max(0, min(keep or 0, len(self.args) - 1)))
        self.load_form()

    def _refresh_row(self, index: int) -> None:
        table = self.query_one(ArgsTable)
        for column, value in zip(table.columns, row_cells(index, self.args[index]), strict=True):
            table.update_cell(str(index), column, value)

    @on(DataTable.RowHighlighted, "#args-table")
    def _highlighted(self) -> None:
        self.load_form()

    @on(Button.Pressed, "#arg-add-scalar")
    def _add_scalar(self) -> None:
        self.request("add", "scalar")

    @on(Button.Pressed, "#arg-add-buffer")
    def _add_buffer(self) -> None:
        self.request("add", "buffer")

    @on(Button.Pressed, "#arg-remove")
    def _remove(self) -> None:
        self.request("remove", "")

    @on(Button.Pressed, "#arg-up")
    def _up(self) -> None:
        self.request("move", "-1")

    @on(Button.Pressed, "#arg-down")
    def _down(self) -> None:
        self.request("move", "1")

    @on(Request)
    def _on_request(self, message: Request) -> None:
        message.stop()
        self.request(message.what, message.detail)

    def request(self, what: str, detail: str) -> None:
        at = self.current
        if what == "add":
            names = {a.get("name") for a in self.args}
            base = "SCALAR" if detail == "scalar" else "buf"
            n = 1
            while f"{base}{n}" in names:
                n += 1
            new: dict[str, Any] = (
                {"kind": "scalar", "name": f"{base}{n}", "dtype": "int", "value": 1}
                if detail == "scalar"
                else {"kind": "buffer", "name": f"{base}{n}", "dtype": "float", "size": 1, "access": "read"}
            )
            where = len(self.args) if at is None else at + 1
            self.args.insert(where, new)
            self.refresh_table(where)
        elif what == "remove" and at is not None:
            del self.args[at]
            self.refresh_table(max(0, at - 1))
        elif what == "move" and at is not None:
            to = at + int(detail)
            if not 0 <= to < len(self.args):
                return
            self.args[at], self.args[to] = self.args[to], self.args[at]
            self.refresh_table(to)
        else:
            return
        self.post_message(self.Changed())

    # ---- the form -------------------------------------------------------------------------
    def load_form(self) -> None:
        i = self.current
        self._loading = True
        try:
            self.query_one("#arg-empty", Static).update("" if i is not None else "No args yet: press s or b.")
            for part in ("#arg-scalar-fields", "#arg-buffer-fields"):
                self.query_one(part).display = False
            if i is None:
                return
            arg = self.args[i]
            kind = "scalar" if arg.get("kind") == "scalar" else "buffer"
            self._good_name = arg.get("name") if kind == "scalar" and isinstance(arg.get("name"), str) else None
            self.query_one("#arg-kind", Select).value = kind
            self.query_one("#arg-name", Input).value = _text(arg.get("name"))
            dtype = str(arg.get("dtype") or ("int" if kind == "scalar" else "float"))
            dtype = DTYPE_ALIASES.get(dtype, dtype)
            self.query_one("#arg-dtype", Select).value = dtype if dtype in dict(DTYPE_CHOICES) else "float"
            if kind == "scalar":
                self.query_one("#arg-value", Input).value = _text(arg.get("value"))
                placements = arg.get("placements") or ["host", "define"]
                for p in PLACEMENTS:
                    self.query_one(f"#arg-place-{p}", Checkbox).value = p in placements
            else:
                self.query_one("#arg-size", Input).value = _text(arg.get("size"))
                self.query_one("#arg-access", Select).value = str(arg.get("access") or "read")
                self.query_one("#arg-init", Select).value = str(arg.get("init") or "random")
                self.query_one("#arg-validate", Checkbox).value = bool(arg.get("validate"))
                for key in ("min", "max", "seed"):
                    self.query_one(f"#arg-{key}", Input).value = _text(arg.get(key))
                self.query_one("#arg-file-name", Input).value = _text(arg.get("file_name") or arg.get("file"))
                self.query_one("#arg-body", CodeEditor).load_text(_text(arg.get("body")))
            self._show_sections(arg)
        finally:
            self.call_after_refresh(self._loaded)

    def _loaded(self) -> None:
        self._loading = False

    def _show_sections(self, arg: dict[str, Any]) -> None:
        buffer = arg.get("kind") != "scalar"
        self.query_one("#arg-scalar-fields").display = not buffer
        self.query_one("#arg-buffer-fields").display = buffer
        init = str(arg.get("init") or "random")
        self.query_one("#arg-random-fields").display = init == "random"
        self.query_one("#arg-file-fields").display = init == "file"
        self.query_one("#arg-custom-fields").display = init == "custom"

    def _set(self, key: str, value: Any) -> None:
        """Set (or, for None, remove) one key of the highlighted arg; redraw its row; tell the editor."""
        i = self.current
        if i is None or self._loading:
            return
        arg = self.args[i]
        if value is None:
            if key not in arg:
                return
            arg.pop(key)
        else:
            if arg.get(key) == value:
                return
            arg[key] = value
        self._refresh_row(i)
        self._show_sections(arg)
        self.post_message(self.Changed())

    @staticmethod
    def _number_or_text(text: str) -> Any:
        text = text.strip()
        if not text:
            return None
        for kind in (int, float):
            try:
                return kind(text)
            except ValueError:
                continue
        return text

    @on(Select.Changed, "#arg-kind")
    def _kind(self, event: Select.Changed) -> None:
        i = self.current
        if i is None or self._loading or self.args[i].get("kind") == event.value:
            return
        name = self.args[i].get("name")
        self.args[i] = (
            {"kind": "scalar", "name": name, "dtype": "int", "value": 1}
            if event.value == "scalar"
            else {"kind": "buffer", "name": name, "dtype": "float", "size": 1, "access": "read"}
        )
        self._refresh_row(i)
        self.load_form()
        self.post_message(self.Changed())

    @on(Input.Changed, "#arg-name")
    def _name(self, event: Input.Changed) -> None:
        i = self.current
        new = event.value.strip()
        before = self.args[i].get("name") if i is not None else None
        self._set("name", new)
        if i is None or self._loading or self.args[i].get("kind") != "scalar":
            return
        # Renamed keystroke by keystroke: the expressions follow from the last name that was a
        # name of its own (not empty, not another arg's), so "N" -> "" -> "M" renames N to M.
        if self._good_name is None and isinstance(before, str) and NAME.match(before):
            self._good_name = before
        others = {a.get("name") for k, a in enumerate(self.args) if k != i}
        if self._good_name and NAME.match(new) and new not in others and new != self._good_name:
            old, self._good_name = self._good_name, new
            self.post_message(self.Renamed(old, new))

    @on(Select.Changed, "#arg-dtype")
    def _dtype(self, event: Select.Changed) -> None:
        self._set("dtype", str(event.value))

    @on(Input.Changed, "#arg-value")
    def _value(self, event: Input.Changed) -> None:
        self._set("value", self._number_or_text(event.value) if event.value.strip() else "")

    @on(Checkbox.Changed)
    def _checkbox(self, event: Checkbox.Changed) -> None:
        wid = event.checkbox.id or ""
        if wid == "arg-validate":
            self._set("validate", True if event.value else None)
        elif wid.startswith("arg-place-"):
            chosen = [p for p in PLACEMENTS if self.query_one(f"#arg-place-{p}", Checkbox).value]
            self._set("placements", chosen)

    @on(Input.Changed, "#arg-size")
    def _size(self, event: Input.Changed) -> None:
        self._set("size", self._number_or_text(event.value) if event.value.strip() else "")

    @on(Select.Changed, "#arg-access")
    def _access(self, event: Select.Changed) -> None:
        self._set("access", str(event.value))

    @on(Select.Changed, "#arg-init")
    def _init(self, event: Select.Changed) -> None:
        self._set("init", str(event.value))

    @on(Input.Changed, "#arg-min")
    @on(Input.Changed, "#arg-max")
    @on(Input.Changed, "#arg-seed")
    def _range(self, event: Input.Changed) -> None:
        key = (event.input.id or "").removeprefix("arg-")
        self._set(key, self._number_or_text(event.value))

    @on(Input.Changed, "#arg-file-name")
    def _file_name(self, event: Input.Changed) -> None:
        i = self.current
        key = "file" if i is not None and "file" in self.args[i] and "file_name" not in self.args[i] else "file_name"
        self._set(key, event.value.strip() or None)

    @on(CodeEditor.Changed, "#arg-body")
    def _body(self, event: CodeEditor.Changed) -> None:
        self._set("body", event.text_area.text or None)

    @on(Button.Pressed, "#arg-pick")
    def _pick(self) -> None:
        if self.current is not None:
            self.post_message(self.PickFile(self.current))

    def set_file_name(self, index: int, name: str) -> None:
        """After a file was picked: point the buffer at it (under inputs/)."""
        arg = self.args[index]
        arg.pop("file", None)
        arg["init"] = "file"
        arg["file_name"] = name
        self.refresh_table(index)
        self.post_message(self.Changed())


def data_file_name(picked: Path, taken: set[str]) -> str:
    """A name under inputs/ for a picked file: its own name, numbered if another file has it."""
    name = picked.name
    stem, suffix = picked.stem, picked.suffix
    n = 2
    while name in taken:
        name = f"{stem}-{n}{suffix}"
        n += 1
    return name
