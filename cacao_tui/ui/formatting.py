"""How numbers, times, statuses and untrusted text read on screen: one place so every pane agrees.

Names and messages come from problem files and from the model. Printed raw, an escape
sequence in them drives the terminal (``\x1b]0;...`` retitles it, ``\x1b[2J`` clears it), a NUL
or a C1 control (``\x9b`` is CSI on some terminals) corrupts it, and U+202E reverses the text
after it. ``safe_text`` shows every such character as a visible escape instead (``\x1b``,
``\u202e``); ``safe_event`` applies it to every text field of an engine event, which is how
both the app and the headless renderer take events in.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, TypeVar

from pydantic import BaseModel

from ktt.terminal_text import safe_text as safe_text  # the one helper, re-exported for the app

# Single-width glyphs that every terminal font over SSH draws; no emoji (their width varies).
STATUS_ICONS: dict[str, str] = {
    "pending": "·",
    "running": "▶",
    "paused": "‖",
    "done": "✓",
    "stopped": "■",
    "killed": "✗",
    "failed": "!",
    "interrupted": "■",  # shown only: the run ended (stopped, killed) with the branch on its way
    "waits for the GPU": "◇",  # shown only: a split run's phase (--phase) left it for the GPU phase
    "waits for the model": "◇",  # ... for the model's phase
}
STATUS_STYLES: dict[str, str] = {
    "pending": "dim",
    "running": "bold green",
    "paused": "yellow",
    "done": "cyan",
    "stopped": "dim",
    "killed": "red",
    "failed": "bold red",
    "interrupted": "yellow",
    "waits for the GPU": "magenta",
    "waits for the model": "blue",
}
ITER_STYLES: dict[str, str] = {
    "decided": "cyan",
    "failed": "red",
    "superseded": "dim strike",
    "interrupted": "yellow",
    "killed": "red",
}
LEVEL_LETTERS: dict[str, str] = {"debug": "D", "info": "I", "warning": "W", "error": "E"}
NONE = "—"


def fit_path(path: object, width: int) -> str:
    """A path in at most ``width`` cells, cut at a separator from the left ("…/problems/mmul"):
    wrapped text would split it mid-name, and its end is the part that tells paths apart."""
    text = str(path)
    if len(text) <= width or width < 4:
        return text
    parts = text.split("/")
    kept = parts[-1]
    for part in reversed(parts[:-1]):
        if len(part) + 1 + len(kept) + 2 > width:
            break
        kept = f"{part}/{kept}"
    shown = f"…/{kept}"
    return shown if len(shown) <= width else "…" + text[-(width - 1) :]


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


def fmt_result(speedup: float | None, score: float | None = None) -> str:
    """A best's figure, labelled the same way in every view: with cases the score (the geometric
    mean of the case speedups, which ranks the kernels), else the speedup over the reference."""
    return f"score {fmt_speedup(score)}" if score is not None else fmt_speedup(speedup)


SPARK = "▁▂▃▄▅▆▇█"


def spark_text(values: list[float], width: int | None = None) -> str:
    """One cell per value (the last ``width``), eight levels from the smallest to the largest,
    so 1.29 and 1.21 ms read as different heights (a bar scaled from zero draws them alike)."""
    shown = values[-width:] if width else values
    if not shown:
        return ""
    low, high = min(shown), max(shown)
    if high <= low:
        return SPARK[3] * len(shown)
    top = len(SPARK) - 1
    return "".join(SPARK[round((v - low) / (high - low) * top)] for v in shown)


def fmt_seconds(seconds: float | None) -> str:
    """A duration: 42 s, 12.5 min, 3.2 h."""
    if seconds is None:
        return NONE
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


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


# ---- untrusted text ---------------------------------------------------------------------

# Event fields that hold one name or title: line breaks in them are escaped too.
NAME_FIELDS = frozenset({"problem", "branch", "parent", "title", "provider", "model", "node", "gpu_name", "name"})

E = TypeVar("E")


def safe_block(text: str | None) -> str | None:
    """A multi-line text read from a file (a kernel, a log, a reply) made terminal-safe."""
    return None if text is None else safe_text(text, keep_newlines=True)


def safe_json_line(line: str) -> str:
    """A JSON text with every non-printable character inside its strings written as a \\u escape.

    JSON encoders escape C0 controls but pass U+202E, C1 controls and the like through raw;
    \\u escapes keep the line valid JSON with the same values.
    """
    if line.isprintable():
        return line
    out = []
    for c in line:
        if c.isprintable():
            out.append(c)
            continue
        code = ord(c)
        if code > 0xFFFF:  # a surrogate pair, as JSON writes characters beyond the BMP
            code -= 0x10000
            out.append(f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}")
        else:
            out.append(f"\\u{code:04x}")
    return "".join(out)


def _safe_value(value: Any, keep_newlines: bool) -> Any:
    if isinstance(value, str):
        return safe_text(value, keep_newlines=keep_newlines)
    if isinstance(value, BaseModel):
        return safe_event(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _safe_dataclass(value)
    if isinstance(value, list | tuple):
        items = [_safe_value(v, keep_newlines) for v in value]
        return value if all(a is b for a, b in zip(items, value, strict=True)) else type(value)(items)
    if isinstance(value, dict):
        pairs = [(_safe_value(k, False), _safe_value(v, keep_newlines)) for k, v in value.items()]
        if all(a is k and b is v for (a, b), (k, v) in zip(pairs, value.items(), strict=True)):
            return value
        return dict(pairs)
    return value  # numbers, None, paths (shown through safe_text where a pane prints one)


def _safe_dataclass(value: Any) -> Any:
    updates: dict[str, Any] = {}
    for f in dataclasses.fields(value):
        if not f.init:
            continue
        old = getattr(value, f.name)
        new = _safe_value(old, keep_newlines=f.name not in NAME_FIELDS)
        if new is not old:
            updates[f.name] = new
    return dataclasses.replace(value, **updates) if updates else value


def safe_event(event: E) -> E:
    """The event with every text field made terminal-safe (unchanged, the same object, when it was)."""
    if not isinstance(event, BaseModel):
        return event
    updates: dict[str, Any] = {}
    for field in type(event).model_fields:
        value = getattr(event, field, None)
        new = _safe_value(value, keep_newlines=field not in NAME_FIELDS)
        if new is not value:
            updates[field] = new
    return event.model_copy(update=updates) if updates else event  # type: ignore[return-value]


def safe_value(value: E) -> E:
    """Anything read back from a run's files (a pydantic model, a dataclass of them, a list, a
    dict, a string) with every text in it made terminal-safe; the same object when it was.

    Fields named like names (``NAME_FIELDS``) get line breaks escaped too; other texts keep
    theirs. The app's file-backed panes, the results view and ``--best`` take their data here.
    """
    return _safe_value(value, keep_newlines=True)  # type: ignore[no-any-return]
