"""``--prune-archives``: shrink archived runs by removing only what a tool can make again.

Regenerable: the tuner's compile caches (anything under a ``tune/cache/`` directory),
compiled code (``*.cubin``, ``*.ptx``, ``*.fatbin``, ``*.so``, ``*.o``, and any other ELF
binary such as a compiled driver) and array dumps (``*.npy``, ``*.npz``: input and
reference buffers). And what the original CACAO leaves in its runs: its input and reference
dumps (``cacao_in_*.bin``, ``cacao_ref_*.bin``), Python bytecode (``__pycache__/``, ``*.pyc``)
and its staging directories (``.staging/``). Never touched: kernels and sources, tuning
specs, JSON results and state, logs, prompts — see ``PROTECTED_SUFFIXES``, which wins
everywhere, ``.staging/`` included — and nothing outside ``archive/``. Symbolic links are
neither followed nor removed; directories left empty by the pruning are removed.
"""

from __future__ import annotations

import contextlib
import itertools
import os
from dataclasses import dataclass, field
from pathlib import Path

from cacao_tui.store.layout import RunLayout
from ktt.capped_read import read_head

REGENERABLE_SUFFIXES = frozenset({".cubin", ".ptx", ".fatbin", ".so", ".o", ".npy", ".npz", ".pyc"})
REGENERABLE_PREFIXES = ("cacao_in_", "cacao_ref_")  # the original's dumps: <prefix>*.bin
REGENERABLE_DIRS = frozenset({"__pycache__", ".staging"})  # everything under them (but protected files)
PROTECTED_SUFFIXES = frozenset(
    {".cu", ".cuh", ".c", ".cc", ".cpp", ".h", ".hpp", ".py", ".yaml", ".yml", ".json", ".jsonl", ".log", ".txt", ".md"}
)
ELF_MAGIC = b"\x7fELF"


@dataclass
class PruneReport:
    archive: Path
    removed: list[tuple[Path, int]] = field(default_factory=list)  # (file, bytes)
    per_run: dict[str, int] = field(default_factory=dict)  # archive/<entry> -> bytes freed

    @property
    def bytes_freed(self) -> int:
        return sum(size for _, size in self.removed)


def _in_tune_cache(relative: Path) -> bool:
    parts = relative.parts[:-1]
    return any(a == "tune" and b == "cache" for a, b in itertools.pairwise(parts))


def _in_regenerable_dir(relative: Path) -> bool:
    return _in_tune_cache(relative) or any(part in REGENERABLE_DIRS for part in relative.parts[:-1])


def _is_elf(path: Path) -> bool:
    try:  # a regular file, never a link or a FIFO (which would block the open)
        return read_head(path, 4, follow_links=False)[0] == ELF_MAGIC
    except OSError:
        return False


def is_regenerable(path: Path, relative: Path) -> bool:
    """Whether a file under archive/ (``relative`` to it) may be removed."""
    suffix = path.suffix.lower()
    if suffix in PROTECTED_SUFFIXES or path.name == "kernels.cu":
        return False
    if suffix in REGENERABLE_SUFFIXES or _in_regenerable_dir(relative):
        return True
    if suffix == ".bin" and path.name.startswith(REGENERABLE_PREFIXES):
        return True
    return _is_elf(path)


def prune_archives(problem_dir: Path, dry_run: bool = False) -> PruneReport:
    """Remove regenerable files under ``problem_dir/archive/``; with ``dry_run``, only list them."""
    layout = RunLayout(Path(problem_dir))
    report = PruneReport(layout.archive)
    if not layout.archive.is_dir() or layout.archive.is_symlink():
        return report
    for top, dirs, files in os.walk(layout.archive, topdown=True, followlinks=False):
        dirs.sort()
        here = Path(top)
        for name in sorted(files):
            path = here / name
            if path.is_symlink() or not path.is_file():
                continue
            relative = path.relative_to(layout.archive)
            if not is_regenerable(path, relative):
                continue
            size = path.stat().st_size
            if not dry_run:
                path.unlink()
            report.removed.append((path, size))
            run = relative.parts[0] if len(relative.parts) > 1 else "."
            report.per_run[run] = report.per_run.get(run, 0) + size
    if not dry_run:
        _remove_emptied_caches(layout.archive)
    return report


def _remove_emptied_caches(archive: Path) -> None:
    """Drop tune/cache, __pycache__ and .staging directories that pruning left empty (deepest first)."""
    for top, _dirs, _files in os.walk(archive, topdown=False, followlinks=False):
        here = Path(top)
        if not _in_regenerable_dir(here.relative_to(archive) / "file"):
            continue
        with contextlib.suppress(OSError):
            if not any(here.iterdir()):
                here.rmdir()
