"""The one-line status bar: problem, provider and model, tokens and cost, elapsed time, GPUs."""

from __future__ import annotations

import time
from collections.abc import Callable

from rich.text import Text

from cacao_tui.llm.usage import ILLUSTRATIVE, is_illustrative
from cacao_tui.runs.gpu_status import GpuSample
from cacao_tui.ui.formatting import fmt_cost, fmt_count, fmt_elapsed, fmt_gpus, fmt_ms, fmt_result
from cacao_tui.ui.run_view import RunView
from cacao_tui.ui.widgets.gpu_panel import gpu_summary
from cacao_tui.ui.widgets.text_line import TextLine


class StatusBar(TextLine):
    """Redrawn by the flush timer when the run changes, and once a second for the clock."""

    def __init__(self, view: RunView, clock: Callable[[], float] = time.time, **kwargs: object) -> None:
        super().__init__("", **kwargs)  # type: ignore[arg-type]
        self._view = view
        self._clock = clock
        self._started = clock()
        self.gpu_samples: list[GpuSample] = []  # NVML's latest (the GPU panel reads them)

    def on_mount(self) -> None:
        self.set_interval(1.0, self.update_bar)
        self.update_bar()

    def segments(self) -> list[tuple[int, Text]]:
        """(priority, text) pieces of the bar; the lowest priorities go first when it is narrow."""
        v = self._view
        out: list[tuple[int, Text]] = [(9, Text(" cacao ", style="bold reverse"))]
        if v.info is not None:
            problem = Text(v.info.problem, style="bold")
            if v.info.dry_run:
                problem.append(" dry-run", style="yellow")
            out.append((9, problem))
        out.append((8, Text(v.phase, style="bold red" if v.ended_at is not None else "cyan")))
        start = v.info.ts if v.info is not None else self._started
        end = v.finished.ts if v.finished is not None else v.ended_at or self._clock()
        out.append((8, Text(fmt_elapsed(end - start))))
        tokens = Text(f"{fmt_count(v.input_tokens)}↑ {fmt_count(v.output_tokens)}↓ {fmt_cost(v.cost_usd)}")
        spent = v.input_tokens or v.output_tokens or v.cost_usd
        if spent and v.info is not None and is_illustrative(v.info.provider):  # a replay's recorded figures
            tokens.append(f" {ILLUSTRATIVE}", style="italic")
        if v.llm_errors:
            tokens.append(f" ({v.llm_errors} err)", style="red")
        out.append((7, tokens))
        if v.best_ms is not None:
            out.append((6, Text(f"best {fmt_ms(v.best_ms)} {fmt_result(v.best_speedup, v.best_score)}", style="green")))
        if v.info is not None:
            if not v.info.dry_run:  # a dry run uses no GPU (and may run where there is none): no GPU figure
                gpus = Text(fmt_gpus(v.info.gpus, None))
                live = {g.index: g for g in self.gpu_samples}
                for index in v.info.gpus:
                    if index in live:
                        gpus.append(f" {gpu_summary(live[index])}", style="bold" if len(v.info.gpus) == 1 else "")
                out.append((5, gpus))
            out.append((4, Text(f"{v.info.provider}/{v.info.model}")))
            if v.info.gpu_name and not v.info.dry_run:
                out.append((3, Text(v.info.gpu_name, style="dim")))
        return out

    def bar_text(self, width: int | None = None) -> Text:
        parts = self.segments()
        width = width if width is not None else (self.size.width or 200)
        sep = " · "
        while len(parts) > 2 and sum(p.cell_len for _, p in parts) + len(sep) * (len(parts) - 1) > width:
            lowest = min(range(len(parts)), key=lambda i: (parts[i][0], -i))
            parts.pop(lowest)
        text = Text(no_wrap=True, overflow="ellipsis")
        for i, (_, part) in enumerate(parts):
            text.append(" " if i == 1 else sep if i else "")
            text.append_text(part)
        return text

    def on_resize(self) -> None:
        self.update_bar()

    def update_bar(self) -> None:
        self.update(self.bar_text())
