"""The GPU panel: this machine's GPUs, one row each, read from NVML every second: utilisation,
memory, SM clock, temperature, power, and which job holds the GPU's lock (ktt/gpu_lock.py).

A worker thread reads NVML (cacao_tui.runs.gpu_status); the panel keeps the latest samples for
the status bar too. Without NVML, a driver or a GPU it stays hidden and ``g`` says why. ``g``
shows and hides it; untouched, it shows on terminals of 40 rows or more.
"""

from __future__ import annotations

from collections.abc import Callable

from rich.table import Table
from rich.text import Text
from textual import work
from textual.widgets import Static

from cacao_tui.runs.gpu_status import GpuSample, GpuStatus
from cacao_tui.ui.formatting import NONE

REFRESH_S = 1.0
AUTO_ROWS = 40  # shown by itself from this terminal height (at 80x24 it would take the log's room)
BAR = 8  # cells of the utilisation bar


def util_bar(pct: int | None) -> Text:
    if pct is None:
        return Text(NONE)
    full = max(0, min(BAR, round(pct / 100 * BAR)))
    text = Text(f"{pct:3d}% ", style="bold" if pct >= 50 else "")
    text.append("█" * full, style="green")
    text.append("·" * (BAR - full), style="dim")
    return text


def _gb(n: int | None) -> str:
    return NONE if n is None else f"{n / 1024**3:.0f}"


def gpu_rows(samples: list[GpuSample]) -> Table:
    table = Table(box=None, padding=(0, 1), header_style="bold", expand=False, show_edge=False)
    for name in ("GPU", "util", "memory GB", "SM MHz", "temp", "power W", "held by"):
        table.add_column(name, no_wrap=name != "held by", overflow="ellipsis")
    for s in samples:
        memory = f"{_gb(s.mem_used)}/{_gb(s.mem_total)}" if s.mem_total else NONE
        power = NONE if s.power_w is None else f"{s.power_w:.0f}"
        if s.power_w is not None and s.power_limit_w:
            power += f"/{s.power_limit_w:.0f}"
        table.add_row(
            f"{s.index} {s.name.removeprefix('NVIDIA ')}", util_bar(s.util_pct), memory,
            NONE if s.sm_mhz is None else str(s.sm_mhz),
            NONE if s.temp_c is None else f"{s.temp_c}°C", power,
            Text(s.holder or "free", style="cyan" if s.holder else "dim"),
        )  # fmt: skip
    return table


def gpu_summary(sample: GpuSample) -> str:
    """What the status bar says of one GPU: utilisation, temperature, power."""
    parts = [f"{sample.util_pct}%" if sample.util_pct is not None else None,
             f"{sample.temp_c}°C" if sample.temp_c is not None else None,
             f"{sample.power_w:.0f}W" if sample.power_w is not None else None]  # fmt: skip
    return " ".join(p for p in parts if p)


class GpuPanel(Static):
    DEFAULT_CSS = """
    GpuPanel { height: auto; padding: 0 1; border-top: solid $primary-background; display: none; }
    GpuPanel.-shown { display: block; }
    """

    def __init__(self, *, on_samples: Callable[[list[GpuSample]], None] | None = None, **kwargs: object) -> None:
        super().__init__("", **kwargs)  # type: ignore[arg-type]
        self.status = GpuStatus()
        self.samples: list[GpuSample] = []
        self.wanted: bool | None = None  # None: by the terminal's height; True/False: g chose
        self.on_samples = on_samples
        self.reads = 0

    def on_mount(self) -> None:
        self.set_interval(REFRESH_S, self.read)
        self.read()

    def on_unmount(self) -> None:
        self.status.close()

    def read(self) -> None:
        if self.status.unavailable is None:
            self._read()

    @work(thread=True, exclusive=True, group="gpu-read", exit_on_error=False)
    def _read(self) -> None:
        samples = self.status.sample()  # NVML's calls block: off the event loop
        self.app.call_from_thread(self.show, samples)

    def show(self, samples: list[GpuSample]) -> None:
        self.samples = samples
        self.reads += 1
        if samples:
            self.update(gpu_rows(samples))
        self._place()
        if self.on_samples is not None:
            self.on_samples(samples)

    def on_resize(self) -> None:
        self._place()

    def _place(self) -> None:
        wanted = self.wanted if self.wanted is not None else self.app.size.height >= AUTO_ROWS
        self.set_class(bool(self.samples) and wanted, "-shown")

    def toggle(self) -> str:
        """g: show or hide; the line to tell the user."""
        if not self.samples:
            why = self.status.unavailable or "no figures yet"
            return f"No GPU panel: {why}"
        self.wanted = not self.has_class("-shown")
        self._place()
        return "GPU panel shown (g hides it)" if self.wanted else "GPU panel hidden (g shows it)"
