"""How numbers, times and statuses read on screen: one place so every pane agrees."""

from __future__ import annotations

import time

# Single-width glyphs that every terminal font over SSH draws; no emoji (their width varies).
STATUS_ICONS: dict[str, str] = {
    "pending": "·",
    "running": "▶",
    "paused": "‖",
    "done": "✓",
    "stopped": "■",
    "killed": "✗",
    "failed": "!",
}
STATUS_STYLES: dict[str, str] = {
    "pending": "dim",
    "running": "bold green",
    "paused": "yellow",
    "done": "cyan",
    "stopped": "dim",
    "killed": "red",
    "failed": "bold red",
}
ITER_STYLES: dict[str, str] = {"decided": "cyan", "failed": "red"}
LEVEL_LETTERS: dict[str, str] = {"debug": "D", "info": "I", "warning": "W", "error": "E"}
NONE = "—"


def status_icon(status: str) -> str:
    return STATUS_ICONS.get(status, "?")


def fmt_ms(ms: float | None) -> str:
    if ms is None:
        return NONE
    if ms >= 100:
        return f"{ms:.0f} ms"
    if ms >= 0.1:
        return f"{ms:#.3g} ms"
    return f"{ms * 1000:#.3g} µs"


def fmt_speedup(x: float | None) -> str:
    return NONE if x is None else f"×{x:.3g}" if x < 100 else f"×{x:.0f}"


def fmt_count(n: int | float) -> str:
    n = float(n)
    for limit, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(n) >= limit:
            return f"{n / limit:.3g}{suffix}"
    return f"{n:.0f}"


def fmt_cost(usd: float | None) -> str:
    if usd is None:
        return NONE
    return f"${usd:.2f}" if usd >= 0.01 or usd == 0 else f"${usd:.4f}"


def fmt_elapsed(seconds: float) -> str:
    seconds = max(0, int(seconds))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m:02d}:{s:02d}"


def fmt_clock(ts: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(ts))


def fmt_value(value: float | int | str | None, unit: str = "") -> str:
    """An NCU metric value with its unit, short."""
    if value is None:
        return NONE
    if isinstance(value, str):
        return f"{value} {unit}".strip()
    if isinstance(value, int) or float(value).is_integer():
        text = f"{int(value):,}" if abs(value) < 1e15 else f"{value:.3g}"
    else:
        text = f"{value:.4g}"
    return f"{text} {unit}".strip()


def fmt_change(new: float | int | str | None, old: float | int | str | None) -> str:
    """Relative change of a numeric metric against the previous iteration."""
    if not isinstance(new, int | float) or not isinstance(old, int | float):
        return ""
    if old == 0:
        return "" if new == 0 else "new"
    change = (new - old) / abs(old) * 100
    if abs(change) < 0.05:
        return "="
    return f"{change:+.1f}%"


def fmt_config(config: dict[str, int | float | str] | None) -> str:
    if not config:
        return NONE
    return " ".join(f"{k}={v}" for k, v in config.items())


def fmt_gpus(gpus: list[int], name: str | None) -> str:
    ids = ",".join(str(g) for g in gpus) or "-"
    return f"GPU {ids}" + (f" {name}" if name else "")
