"""De-duplication of kernels across a run: the same kernel and tuning space is tuned once.

Two fingerprints of an iteration's files:

- the source fingerprint: kernels.cu without comments and with whitespace runs collapsed,
  and tuning.yaml parsed and written back in one canonical form (key order, quoting and
  comments do not matter);
- the binary fingerprint: the canonical tuning.yaml and the hash of the compiled code of
  each configuration ``check_compilation`` sampled (the same seed samples the same
  configurations of the same space), so a rename or a reformatting that compiles to the
  same machine code is the same kernel too.

``TunedKernels`` is the run's index of what was tuned under which fingerprint (built from
the iteration states on disk when the engine starts, extended after every tuning).
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from cacao_tui.store.state import ProfileOutcome, TuneOutcome
from ktt.csource import strip_c_comments
from ktt.problem import ProblemError
from ktt.problem.yaml_io import parse_yaml_mapping
from ktt.protocol import CheckReport


@functools.lru_cache(maxsize=32)  # the same tuning.yaml is fingerprinted twice an iteration
def _canonical_spec(spec: str) -> str:
    try:
        data = parse_yaml_mapping(spec, "tuning.yaml")
    except ProblemError:
        return " ".join(spec.split())
    return json.dumps(data, sort_keys=True, default=str, separators=(",", ":"))


def source_fingerprint(kernel: str, spec: str) -> str:
    """Equal for files that differ only in comments, whitespace and YAML layout."""
    h = hashlib.sha256()
    h.update(" ".join(strip_c_comments(kernel).split()).encode("utf-8", errors="replace"))
    h.update(b"\0")
    h.update(_canonical_spec(spec).encode("utf-8", errors="replace"))
    return "src:" + h.hexdigest()[:32]


def binary_fingerprint(spec: str, report: CheckReport) -> str | None:
    """Equal for files whose sampled configurations compile to the same code (None: nothing compiled)."""
    compiled = sorted(
        (json.dumps(c.config, sort_keys=True), c.shape, c.binary_sha256)
        for c in report.configs
        if c.ok and c.binary_sha256
    )
    if not compiled or len(compiled) != len(report.configs):
        return None
    h = hashlib.sha256(_canonical_spec(spec).encode("utf-8", errors="replace"))
    for item in compiled:
        h.update("\0".join(item).encode())
    return "bin:" + h.hexdigest()[:32]


@dataclass
class Tuned:
    """One tuned iteration: where it is and what it measured (its profile once it has one)."""

    where: str  # "branch iteration N", for prompts
    outcome: TuneOutcome
    root: Path  # its iteration directory (tune/, profile.json)
    profile: ProfileOutcome | None = None


@dataclass
class TunedKernels:
    """The run's tuned iterations by fingerprint (both kinds share one index), and the
    tunings in flight: a branch about to tune what another is tuning waits for it instead."""

    _by: dict[str, Tuned] = field(default_factory=dict)
    _inflight: dict[str, asyncio.Future[None]] = field(default_factory=dict)

    def in_flight(self, fingerprints: list[str | None]) -> asyncio.Future[None] | None:
        """The tuning of the same files under way elsewhere (await it, then ``find``), else None."""
        for fp in fingerprints:
            if fp and fp in self._inflight and not self._inflight[fp].done():
                return self._inflight[fp]
        return None

    def starting(self, fingerprints: list[str | None]) -> None:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        for fp in fingerprints:
            if fp:
                self._inflight[fp] = future

    def finished(self, fingerprints: list[str | None]) -> None:
        for fp in fingerprints:
            future = self._inflight.pop(fp, None) if fp else None
            if future is not None and not future.done():
                future.set_result(None)

    def add(self, fingerprints: list[str | None], tuned: Tuned) -> None:
        for fp in fingerprints:
            if fp and fp not in self._by:
                self._by[fp] = tuned

    def find(self, fingerprints: list[str | None]) -> Tuned | None:
        for fp in fingerprints:
            if fp and fp in self._by:
                return self._by[fp]
        return None

    def __len__(self) -> int:
        return len(self._by)


MAX_COPY_BYTES = 64 * 1024 * 1024  # a results file or profile copied for a duplicate


def copy_bounded(source: Path, target: Path, limit: int = MAX_COPY_BYTES) -> bool:
    """Copy a regular file of at most ``limit`` bytes; False when there was none to copy."""
    try:
        if source.is_symlink() or not source.is_file() or source.stat().st_size > limit:
            return False
        try:
            shutil.copyfile(source, target)
        except FileNotFoundError:
            if target.parent.is_dir():
                raise
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)
        return True
    except OSError:
        return False

