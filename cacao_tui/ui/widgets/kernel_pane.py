"""The Kernel tab: the iteration's kernels.cu, highlighted, or its diff against the previous
iteration (or the parent branch's kernel for a branch's first iteration)."""

from __future__ import annotations

from rich.syntax import Syntax
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static

from cacao_tui.ui.disk import IterationDetails
from cacao_tui.ui.kernel_diff import kernel_diff
from cacao_tui.ui.widgets.scroll_pane import ScrollPane
from cacao_tui.ui.widgets.text_line import TextLine


class KernelPane(Vertical):
    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.mode = "source"  # or "diff"
        self._details: IterationDetails | None = None
        self._rendered: tuple[object, ...] | None = None

    def compose(self) -> ComposeResult:
        yield TextLine("Kernel", id="kernel-header", classes="pane-header")
        with ScrollPane(id="kernel-scroll"):
            yield Static("", id="kernel-body")

    def show(self, details: IterationDetails | None) -> None:
        self._details = details
        self._draw()

    def toggle_mode(self) -> str:
        self.mode = "diff" if self.mode == "source" else "source"
        self._draw()
        return self.mode

    def _draw(self) -> None:
        d = self._details
        key = (self.mode, d and d.branch, d and d.index, d and d.kernel, d and d.base_kernel)
        if key == self._rendered:
            return  # same text: no repaint
        self._rendered = key
        header = self.query_one("#kernel-header", TextLine)
        body = self.query_one("#kernel-body", Static)
        if d is None or d.kernel is None:
            where = f"{d.branch}/iter{d.index}" if d else "the run"
            header.update(f"Kernel · {where}")
            body.update(Text("No kernels.cu yet for this selection.", style="dim"))
            return
        name = f"{d.branch}/iter{d.index}/kernels.cu"
        lines = d.kernel.count("\n") + 1
        if self.mode == "diff":
            if d.base_kernel is None:
                header.update(f"Kernel diff: nothing earlier to compare with · {name} · d: source")
                body.update(Text("This is the first kernel of a root branch.", style="dim"))
                return
            diff = kernel_diff(d.base_kernel, d.kernel, d.base_label or "before", f"iter{d.index}")
            header.update(f"Kernel diff vs {d.base_label} ({diff.summary}) · {name} · d: source")
            body.update(diff.text)
        else:
            vs = f" · d: diff vs {d.base_label}" if d.base_kernel is not None else ""
            header.update(f"Kernel · {name} · {lines} lines{vs}")
            body.update(Syntax(d.kernel, "cuda", theme="ansi_dark", line_numbers=True, word_wrap=False))
