"""output/reference_time.json: the speedup denominators, one per scored shape, and where each came from.

Two forms are read. The original CACAO's, in microseconds::

    {"reference_time_us": 411.28, "cases": {"t100": null, "t127": null}}

where the top-level value is the primary shape's (the first case, or the only shape) and
``cases`` holds the others by name. ``null`` means "this shape has no baseline", as in the
original (utils/ref_timing.py, utils/results.py): it is never timed, never overwritten, the
shape's speedup is null and so is the score. A shape the file does not name at all is
measured and recorded. And ktt's earlier
form, in milliseconds: ``{"ms": 3.14, "source": "measured", "cases": {"small": 0.0077}, ...}``
(recognised by an ``ms`` key and no ``reference_time_us``).

Provenance is kept per value under ``provenance``, a key the original ignores, mirroring the
layout of the values (``{"reference_time_us": {...}, "cases": {"t100": {...}}}``): a value ktt
measured records ``source: measured``, the device, the date and the method. A value without
such a record was not measured by ktt (written by hand, or carried from elsewhere): it is a
seed. A value timed by wall clock (a cpu_c or CPU python reference) also records ``samples``,
``min_ms`` and ``max_ms``: it is the median of that many calls, which took that range. A seed
(and a null) is never overwritten nor relabelled; only missing values are measured and filled
in, in the file's own form and unit, so the original can still read the file.

A file that cannot be read or does not have this shape is an error that names the file and
the field (``ReferenceTimeError``); it is never silently replaced.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ktt.capped_read import describe_read_error, finite_number, parse_json, read_bytes_capped
from ktt.results import write_json_atomic
from ktt.terminal_text import safe_line

MAX_BYTES = 1024 * 1024
ORIGINAL_KEY = "reference_time_us"
LEGACY_KEY = "ms"

Form = Literal["original", "legacy"]
Source = Literal["measured", "seeded", "no baseline"]
NO_BASELINE: Source = "no baseline"  # the source of an explicit null: the shape has no baseline
SPREAD_WARN = 0.10  # a measured value whose timed calls spread more than this is warned about (ktt.host_reference)


class ReferenceTimeError(Exception):
    """reference_time.json cannot be used; ``str()`` is one line naming the file (and field)."""


@dataclass(frozen=True)
class ReferenceTime:
    """One shape's denominator. ``ms`` None with ``source`` NO_BASELINE: the file says null (no
    baseline, never measured); ``ms`` None with no source: the file does not name it (measure it)."""

    ms: float | None
    source: Source | None = None
    device: str | None = None
    measured_at: str | None = None
    method: str | None = None
    samples: int | None = None  # how many timed calls the value is the median of (measured by ktt)
    min_ms: float | None = None  # the fastest and the slowest of them
    max_ms: float | None = None

    @property
    def spread(self) -> float | None:
        """(slowest - fastest) / median of the timed calls, where they were recorded."""
        if self.ms is None or self.ms <= 0 or self.min_ms is None or self.max_ms is None:
            return None
        return (self.max_ms - self.min_ms) / self.ms

    def samples_text(self) -> str:
        """'median of 3 calls, 3,700 to 3,900 ms (5.4 % spread)', or '' where not recorded."""
        if not self.samples or self.min_ms is None or self.max_ms is None:
            return ""
        spread = self.spread
        over = f" (over {SPREAD_WARN:.0%})" if spread is not None and spread > SPREAD_WARN else ""
        how = f", {spread:.1%} spread{over}" if spread is not None else ""
        return f"median of {self.samples} calls, {self.min_ms:.4g} to {self.max_ms:.4g} ms{how}"

    @property
    def no_baseline(self) -> bool:
        return self.ms is None and self.source == NO_BASELINE

    @property
    def to_measure(self) -> bool:
        return self.ms is None and self.source is None

    def describe(self) -> str:
        """For --check: 'seeded 1.773 ms', 'measured 0.41 ms (NVIDIA H200)', 'no baseline (null)', ..."""
        if self.no_baseline:
            return "no baseline (null): never timed; its speedup and the score are null"
        if self.ms is None:
            return "to be measured on the first tuning (then recorded here)"
        where = f" ({self.device})" if self.source == "measured" and self.device else ""
        calls = self.samples_text()
        return f"{self.source} {self.ms:.4g} ms{where}" + (f", {calls}" if calls else "")


@dataclass(frozen=True)
class Measurement:
    """A reference time ktt has just measured, to be recorded where the file has none."""

    ms: float
    device: str | None
    method: str
    reference_type: str
    samples: int | None = None  # the timed calls ``ms`` is the median of, and their range
    min_ms: float | None = None
    max_ms: float | None = None

    def provenance(self) -> dict[str, Any]:
        record: dict[str, Any] = {
            "source": "measured",
            "device": self.device,
            "measured_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "method": self.method,
            "reference_type": self.reference_type,
        }
        if self.samples is not None:
            record.update(samples=self.samples, min_ms=self.min_ms, max_ms=self.max_ms)
        return record


@dataclass
class ReferenceTimes:
    """The parsed file (or an empty one when it does not exist)."""

    path: Path
    primary: str
    form: Form
    raw: dict[str, Any]
    exists: bool

    @property
    def scale(self) -> float:
        """Milliseconds per unit of the file's values."""
        return 1e-3 if self.form == "original" else 1.0

    @property
    def top_key(self) -> str:
        return ORIGINAL_KEY if self.form == "original" else LEGACY_KEY

    def _slot(self, name: str) -> tuple[Any, Any, bool]:
        """(value, provenance record, whether the file names the shape at all) of one shape."""
        prov = self.raw.get("provenance") if isinstance(self.raw.get("provenance"), dict) else {}
        cases = self.raw.get("cases") if isinstance(self.raw.get("cases"), dict) else {}
        prov_cases = prov.get("cases") if isinstance(prov.get("cases"), dict) else {}
        if name == self.primary and self.raw.get(self.top_key) is not None:
            return self.raw.get(self.top_key), prov.get(self.top_key), True
        if name in cases:
            return cases[name], prov_cases.get(name), True
        if name == self.primary:
            return self.raw.get(self.top_key), prov.get(self.top_key), self.top_key in self.raw
        return None, None, False

    def get(self, name: str) -> ReferenceTime:
        value, record, named = self._slot(name)
        if value is None:
            return ReferenceTime(None, NO_BASELINE if named else None)
        ms = float(value) * self.scale
        if isinstance(record, dict) and record.get("source") == "measured":
            samples = finite_number(record.get("samples"))
            return ReferenceTime(
                ms,
                "measured",
                _text(record.get("device")),
                _text(record.get("measured_at")),
                _text(record.get("method")),
                int(samples) if samples is not None and 1 <= samples < 1e9 else None,
                _positive(record.get("min_ms")),
                _positive(record.get("max_ms")),
            )
        if self.form == "legacy" and not isinstance(record, dict) and self.raw.get("source") == "measured":
            # ktt's earlier form: one file-level record for every value in it.
            return ReferenceTime(ms, "measured", _text(self.raw.get("device")), _text(self.raw.get("measured_at")))
        return ReferenceTime(ms, "seeded")


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _positive(value: Any) -> float | None:
    number = finite_number(value)
    return number if number is not None and number > 0 else None


def _check_value(path: Path, field: str, value: Any, unit: str) -> None:
    number = finite_number(value)
    if value is not None and (number is None or number <= 0):
        raise ReferenceTimeError(
            f"{path}: {field}: {short_json(value)} is not a positive number of {unit} (or null: no baseline)"
        )


def short_json(value: Any) -> str:
    """At most 40 characters of a value from the file, on one terminal-safe line (deep or huge values too)."""
    try:
        text = json.dumps(value) if not isinstance(value, int) or abs(value) < 10**40 else f"{str(value)[:20]}..."
    except (ValueError, RecursionError, TypeError):
        text = f"<{type(value).__name__}>"
    return safe_line(text[:40])


def parse_reference_times(path: Path, text: str, primary: str) -> ReferenceTimes:
    try:
        raw = parse_json(text, strict=True)  # a number no float holds is one line, not "no seed"
    except ValueError as exc:
        raise ReferenceTimeError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(raw, dict):
        raise ReferenceTimeError(f'{path}: expected a JSON object such as {{"{ORIGINAL_KEY}": 120.5}}')
    form: Form = "legacy" if LEGACY_KEY in raw and ORIGINAL_KEY not in raw else "original"
    unit = "microseconds" if form == "original" else "milliseconds"
    top = ORIGINAL_KEY if form == "original" else LEGACY_KEY
    _check_value(path, top, raw.get(top), unit)
    cases = raw.get("cases", {})
    if cases is None:
        cases = {}
    if not isinstance(cases, dict):
        raise ReferenceTimeError(f"{path}: cases: expected an object of case name -> {unit} (or null)")
    for name, value in cases.items():
        _check_value(path, f"cases.{name}", value, unit)
    if "provenance" in raw and not isinstance(raw["provenance"], dict):
        raise ReferenceTimeError(f"{path}: provenance: expected an object")
    if "source" in raw and raw["source"] not in ("measured", "seeded"):
        raise ReferenceTimeError(f"{path}: source: {short_json(raw['source'])} is neither measured nor seeded")
    raw["cases"] = cases
    return ReferenceTimes(path, primary, form, raw, exists=True)


def read_reference_times(path: Path, primary: str) -> ReferenceTimes:
    """The file at ``path`` (an empty one, in the original's form, when there is none)."""
    try:
        data = read_bytes_capped(path, MAX_BYTES, follow_links=False)  # a link to a host file is never read
    except FileNotFoundError:
        return ReferenceTimes(path, primary, "original", {}, exists=False)
    except OSError as exc:
        raise ReferenceTimeError(f"{path}: cannot be read ({describe_read_error(exc)})") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ReferenceTimeError(f"{path}: not UTF-8 text") from None
    return parse_reference_times(path, text, primary)


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    """Tunings on several GPUs may fill in the same file: one read-modify-write at a time."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = path.parent / f".{path.name}.lock"
    try:  # never through a link, never blocking on a FIFO
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        raise ReferenceTimeError(f"{lock}: cannot lock ({exc.strerror}); remove it if it is not a plain file") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def record_measurements(path: Path, primary: str, measured: dict[str, Measurement]) -> ReferenceTimes:
    """Fill in the shapes the file does not name; every value already there (a null too) stays as it is.

    The file is read again under a lock right before the write, so a value written meanwhile
    (another tuning, a person) wins. Returns the file as written (or as found, if nothing was new).
    """
    with _file_lock(path):
        current = read_reference_times(path, primary)
        raw = current.raw
        prov = raw.setdefault("provenance", {})
        changed = False
        for name, m in measured.items():
            if not current.get(name).to_measure:
                continue  # a value, or null: no baseline
            value = m.ms / current.scale
            if name == primary and not (isinstance(raw.get("cases"), dict) and name in raw["cases"]):
                raw[current.top_key] = value
                prov[current.top_key] = m.provenance()
            else:
                raw.setdefault("cases", {})[name] = value
                prov.setdefault("cases", {})[name] = m.provenance()
            changed = True
        if not changed:
            return current
        if not raw.get("cases"):
            raw.pop("cases", None)
        ordered = {k: raw[k] for k in (current.top_key, "cases") if k in raw}
        ordered.update({k: v for k, v in raw.items() if k not in ordered})
        write_json_atomic(path, ordered)
        return ReferenceTimes(path, primary, current.form, ordered, exists=True)
