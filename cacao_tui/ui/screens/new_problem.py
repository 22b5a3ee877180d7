"""The new-problem dialog: a form → a validated problem directory (cacao_tui.problem.template).

Mistakes come back as the same one-line errors ``cacao --check`` prints and are shown under
the form; nothing is written until the whole problem loads.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import yaml
from textual import on, work
from textual.app import ComposeResult
from textual.containers import Horizontal, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Select, Static, TextArea

from cacao_tui.ui import keymap

EXAMPLE_ARGS = """\
# inputs.yaml args, in kernel-parameter order
- {kind: buffer, name: X, dtype: float, size: N, access: read}
- {kind: buffer, name: Y, dtype: float, size: N, access: write, validate: true}
- {kind: scalar, name: N, dtype: int, value: 1048576}
"""
REFERENCE_TYPES = (("CUDA kernel (ref_kernel.cu)", "cuda"), ("C function (ref_cpu.c)", "cpu_c"),
                   ("Python function (ref.py)", "python"))  # fmt: skip


def _number(text: str, default: float) -> float | str:
    text = text.strip()
    if not text:
        return default
    try:
        return float(text)
    except ValueError:
        return text  # let the model say what is wrong with it


def collect_fields(values: dict[str, str]) -> dict[str, Any]:
    """Form strings → the fields of cacao_tui.problem.template.NewProblem."""
    args = yaml.safe_load(values.get("args") or "[]")
    fields: dict[str, Any] = {
        "name": values.get("name", "").strip(),
        "description": values.get("description", "").strip(),
        "args": args if isinstance(args, list) else [],
        "grid": {k: values.get(f"grid_{k}", "").strip() or 1 for k in "xyz"},
        "reference_type": values.get("reference_type") or "cuda",
        "tolerance": _number(values.get("tolerance", ""), 1e-4),
        "duration_s": _number(values.get("duration_s", ""), 20.0),
    }
    if fields["reference_type"] == "cuda":
        fields["block"] = {k: values.get(f"block_{k}", "").strip() or 1 for k in "xyz"}
    return fields


def create_problem(parent: Path, values: dict[str, str]) -> tuple[Path, str]:
    """Validate and write; returns (directory, the --check summary). Raises ProblemError / ValueError."""
    from cacao_tui.problem.summary import render_check
    from cacao_tui.problem.template import new_problem_from_fields, write_problem

    try:
        fields = collect_fields(values)
    except yaml.YAMLError as exc:
        raise ValueError(f"arguments: not YAML ({str(exc).splitlines()[0]})") from None
    new = new_problem_from_fields(fields, parent / (fields["name"] or "?") / "problem.yaml")
    target, problem = write_problem(new, parent)
    return target, render_check(problem)


class NewProblemScreen(ModalScreen[Path | None]):
    """Dismissed with the new problem's directory, or None when cancelled."""

    BINDINGS = keymap.bindings(keymap.FORM)

    def __init__(self, parent_dir: Path) -> None:
        super().__init__(classes="dialog-screen")
        self._parent_dir = parent_dir
        self.created: Path | None = None

    def compose(self) -> ComposeResult:
        with VerticalScroll(classes="dialog form", id="new-problem"):
            yield Static("New problem", classes="dialog-title")
            yield Label("Create in")
            yield Input(str(self._parent_dir), id="parent")
            yield Label("Name (letters, digits, - and _)")
            yield Input(placeholder="saxpy", id="name")
            yield Label("Description (reaches the prompts)")
            yield Input(placeholder="Y = a*X + Y over N floats", id="description")
            yield Label("Arguments (inputs.yaml args)")
            yield TextArea(EXAMPLE_ARGS, language="yaml", id="args")
            yield Label("Grid x / y / z (expressions over scalars)")
            with Horizontal(classes="form-row"):
                yield Input("N / 256", id="grid_x")
                yield Input("1", id="grid_y")
                yield Input("1", id="grid_z")
            yield Label("Reference")
            yield Select(REFERENCE_TYPES, value="cuda", allow_blank=False, id="reference_type")
            yield Label("Reference block x / y / z (cuda)")
            with Horizontal(classes="form-row"):
                yield Input("256", id="block_x")
                yield Input("1", id="block_y")
                yield Input("1", id="block_z")
            yield Label("Tolerance / tuning seconds")
            with Horizontal(classes="form-row"):
                yield Input("1e-4", id="tolerance")
                yield Input("20", id="duration_s")
            yield Static("", classes="form-errors", id="form-errors")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Create", variant="primary", id="create")
                yield Button("Cancel (esc)", id="cancel")

    def on_mount(self) -> None:
        self.query_one("#name", Input).focus()

    def values(self) -> dict[str, str]:
        out = {w.id: w.value for w in self.query(Input) if w.id}
        out["args"] = self.query_one("#args", TextArea).text
        out["reference_type"] = str(self.query_one("#reference_type", Select).value)
        return out

    @on(Button.Pressed, "#create")
    def _create_pressed(self) -> None:
        self.create()

    @on(Button.Pressed, "#cancel")
    def _cancel_pressed(self) -> None:
        self.dismiss(None)

    def action_close(self) -> None:
        self.dismiss(None)

    @work(exclusive=True, group="new-problem")
    async def create(self) -> None:
        errors = self.query_one("#form-errors", Static)
        values = self.values()
        errors.update("checking…")
        try:
            target, summary = await asyncio.to_thread(create_problem, Path(values.pop("parent")), values)
        except Exception as exc:  # ProblemError lines, YAML errors: shown, never raised
            errors.update(f"✗ {exc}")
            return
        self.created = target
        self.app.notify(f"Created {target}\n{summary.splitlines()[0] if summary else ''}", timeout=8)
        self.dismiss(target)
