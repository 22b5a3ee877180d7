"""The run dialog: provider and model (from the provider registry, with which keys are set),
strategies, max-iter, depth, path budget, timeout, GPUs, budget, dry-run, single-shot.

It returns ``RunOptions`` once they pass the command line's own checks; the home screen
then starts the run as a process of its own (``cacao_tui.runs.launcher``).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from textual import on, work
from textual.app import ComposeResult
from textual.containers import Horizontal, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Checkbox, Input, Label, Select, Static

from cacao_tui.flag_bounds import BY_FLAG, GPU_ORDINAL, OutOfBounds
from cacao_tui.runs.launcher import LaunchRefused, RunOptions, validate
from cacao_tui.runs.providers import ProviderStatus, auto_choice, provider_statuses, run_environment
from cacao_tui.settings import DEFAULTS
from cacao_tui.ui import keymap
from cacao_tui.ui.home.keys import RUN_DIALOG
from cacao_tui.ui.widgets.tick_box import TickBox

AUTO = "auto"


class FieldError(ValueError):
    """A field that is not a number (or list) of the right kind; the message names it."""


def _number(text: str, label: str, flag: str) -> int | float | None:
    """An empty field keeps the default; a number goes through its flag's bounds (cacao_tui.flag_bounds)."""
    if not text.strip():
        return None
    try:
        return BY_FLAG[flag].parse(text)
    except OutOfBounds as exc:
        raise FieldError(f"{label}: {exc}") from None


def _gpus(text: str) -> list[int]:
    parts = [p.strip() for p in text.replace(" ", ",").split(",") if p.strip()]
    if any(not p.isdigit() for p in parts):
        raise FieldError(f"GPUs: expected device ordinals like 0 or 0,1; got {text.strip()!r}")
    gpus = [int(p) for p in parts]
    if any(g > GPU_ORDINAL.high for g in gpus):
        raise FieldError(f"GPUs: a device ordinal must be at most {GPU_ORDINAL.high:g}; got {text.strip()!r}")
    if len(set(gpus)) != len(gpus):
        raise FieldError(f"GPUs: a GPU is listed twice in {text.strip()!r}")
    return gpus


def options_from_fields(values: dict[str, str | bool]) -> RunOptions:
    """The form's strings and ticks -> RunOptions (empty fields keep the defaults)."""

    def text(key: str) -> str:
        value = values.get(key, "")
        return value if isinstance(value, str) else ""

    provider = text("provider")
    return RunOptions(
        provider=None if provider in ("", AUTO) else provider,
        model=text("model").strip() or None,
        strategies=_number(text("strategies"), "strategies", "--strategies"),  # type: ignore[arg-type]
        max_iter=_number(text("max_iter"), "max-iter", "--max-iter"),  # type: ignore[arg-type]
        max_depth=_number(text("max_depth"), "depth", "--max-depth"),  # type: ignore[arg-type]
        path_budget=_number(text("path_budget"), "path budget", "--path-budget"),  # type: ignore[arg-type]
        timeout_s=_number(text("timeout"), "timeout", "--timeout"),
        gpus=_gpus(text("gpus")),
        budget_usd=_number(text("budget"), "budget", "--budget-usd"),
        dry_run=bool(values.get("dry_run")),
        single_shot=bool(values.get("single_shot")),
        resume=bool(values.get("resume")),
    )


def provider_label(status: ProviderStatus) -> str:
    mark = "✓" if status.ready else "✗"
    return f"{mark} {status.name} · {status.note}"


class RunDialog(ModalScreen[RunOptions | None]):
    """Dismissed with the checked options, or None (nothing started, nothing archived)."""

    BINDINGS = keymap.bindings(RUN_DIALOG)
    # Its own look (not .dialog/.form): one line per field, so it fits 80x24.
    DEFAULT_CSS = """
    RunDialog { align: center middle; background: $background 60%; }
    RunDialog > #run-dialog {
        width: 90; max-width: 100%; height: auto; max-height: 100%;
        padding: 0 1; border: thick $primary; background: $surface;
    }
    RunDialog #run-title { text-style: bold; }
    RunDialog #run-note { color: $text-muted; margin-bottom: 1; }
    RunDialog .run-row { height: 1; }
    RunDialog .run-row Label { width: 13; margin: 0; }
    RunDialog Input { height: 1; border: none; padding: 0 1; width: 1fr; background: $boost; }
    RunDialog Input:focus { border: none; background: $primary 40%; }
    RunDialog Select { width: 1fr; height: 1; }
    RunDialog Select > SelectCurrent { border: none; height: 1; padding: 0 1; background: $boost; }
    RunDialog Select:focus > SelectCurrent { border: none; background: $primary 40%; }
    RunDialog Select > SelectOverlay { max-height: 8; }
    RunDialog Checkbox { border: none; height: 1; padding: 0; width: 1fr; background: transparent; }
    RunDialog Checkbox:focus { border: none; background: $primary 40%; }
    RunDialog #run-errors { height: auto; color: $error; }
    RunDialog #run-buttons { height: 1; margin-top: 1; align-horizontal: center; }
    RunDialog #run-buttons Button { height: 1; border: none; min-width: 16; margin: 0 1; }
    RunDialog .spacer { width: 1fr; }
    """

    def __init__(self, problem_dir: Path, *, title: str = "Run", preset: RunOptions | None = None) -> None:
        super().__init__()
        self._problem_dir = problem_dir
        self._title = title
        self._preset = preset or RunOptions()
        self._env = run_environment(problem_dir)
        self._statuses = provider_statuses(self._env)

    def compose(self) -> ComposeResult:
        p = self._preset
        auto = f"auto · {auto_choice(self._env)}"
        choices = [(auto, AUTO), *((provider_label(s), s.name) for s in self._statuses)]
        with VerticalScroll(id="run-dialog"):
            phase = f" · --phase {p.phase} (the split run's next part)" if p.phase and p.resume else ""
            yield Static(f"{self._title} · {self._problem_dir.name}{phase}", id="run-title")
            yield Static("A process of its own: quitting the app or SSH does not stop it.", id="run-note")
            with Horizontal(classes="run-row"):
                yield Label("Provider")
                yield Select(choices, value=p.provider or AUTO, allow_blank=False, id="provider")
            with Horizontal(classes="run-row"):
                yield Label("Model")
                yield Input(p.model or "", placeholder=self._default_model(p.provider), id="model")
            with Horizontal(classes="run-row"):
                yield Label("Strategies")
                yield self._number("strategies", p.strategies, DEFAULTS.n_strategies)
                yield Label(" Max iter")
                yield self._number("max_iter", p.max_iter, DEFAULTS.max_iter)
            with Horizontal(classes="run-row"):
                yield Label("Depth")
                yield self._number("max_depth", p.max_depth, DEFAULTS.max_depth)
                yield Label(" Path budget")
                yield self._number("path_budget", p.path_budget, "0 = off")
            with Horizontal(classes="run-row"):
                yield Label("Timeout s")
                yield self._number("timeout", p.timeout_s, "tuning.duration_s")
                yield Label(" GPUs")
                yield Input(",".join(map(str, p.gpus)), placeholder="gpu.index, e.g. 0,1", id="gpus")
            with Horizontal(classes="run-row"):
                yield Label("Budget $")
                yield self._number("budget", p.budget_usd, "no cap")
                yield Label("")
                yield Static("", classes="spacer")
            with Horizontal(classes="run-row"):
                yield TickBox("Dry run (no GPU)", p.dry_run, id="dry_run")
                yield TickBox("Single-shot", p.single_shot, id="single_shot")
                yield TickBox("Resume", p.resume, id="resume")
            yield Static("", id="run-errors")
            with Horizontal(id="run-buttons"):
                yield Button("Start (ctrl+s)", variant="primary", id="run-start")
                yield Button("Cancel (esc)", id="run-cancel")

    @staticmethod
    def _number(key: str, value: float | int | None, placeholder: object) -> Input:
        shown = "" if value is None else (f"{value:g}" if isinstance(value, float) else str(value))
        return Input(shown, placeholder=str(placeholder), id=key)

    def _default_model(self, provider: str | None) -> str:
        for s in self._statuses:
            if s.name == provider:
                return s.default_model
        return "the provider's default"

    def on_mount(self) -> None:
        self.query_one("#provider", Select).focus()

    @on(Select.Changed, "#provider")
    def _provider_changed(self, event: Select.Changed) -> None:
        value = event.value if isinstance(event.value, str) else None
        self.query_one("#model", Input).placeholder = self._default_model(value)

    def values(self) -> dict[str, str | bool]:
        out: dict[str, str | bool] = {w.id: w.value for w in self.query(Input) if w.id}
        out.update({w.id: w.value for w in self.query(Checkbox) if w.id})
        provider = self.query_one("#provider", Select).value
        out["provider"] = provider if isinstance(provider, str) else AUTO
        return out

    @on(Input.Submitted)
    @on(Button.Pressed, "#run-start")
    def _start_pressed(self) -> None:
        self.action_start()

    @on(Button.Pressed, "#run-cancel")
    def _cancel_pressed(self) -> None:
        self.dismiss(None)

    def action_close(self) -> None:
        self.dismiss(None)

    def action_start(self) -> None:
        self.check_and_start()

    @work(exclusive=True, group="run-dialog")
    async def check_and_start(self) -> None:
        errors = self.query_one("#run-errors", Static)
        try:
            options = options_from_fields(self.values())
        except FieldError as exc:
            errors.update(f"✗ {exc}")
            return
        if options.resume:
            options.phase = self._preset.phase  # a split run goes on with the phase it waits for
        errors.update("checking…")
        try:
            await asyncio.to_thread(validate, self._problem_dir, options)
        except LaunchRefused as exc:
            errors.update(f"✗ {exc}")
            return
        self.dismiss(options)
