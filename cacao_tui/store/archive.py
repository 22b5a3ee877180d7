"""Archiving earlier runs: ``output/`` becomes ``archive/output_N``; nothing is ever deleted.

The engine calls ``prepare_output`` once at the start of a run, before it writes anything.
It holds the directory's run lock first (``run_lock``): archiving another run's live
output/ is what two concurrent runs did to each other. output/ and archive/ must be real
directories of the problem (``layout.check_contained``): never a link to elsewhere.

The hand-seeded ``reference_time.json`` survives a kill at any point: it is copied (a
regular file, never through a link) into ``.cacao-output-next/`` before output/ is moved
aside, and that directory is then renamed to be the new output/. A start that finds it
left behind finishes the move (output/ missing) or drops it (output/ still there).
A resumed run's output/ is cleaned of the temp files a killed writer left.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from cacao_tui.store.atomic import remove_crash_leftovers, write_text_atomic
from cacao_tui.store.earlier_run import set_aside
from cacao_tui.store.layout import RunLayout, UnsafeLayout, check_contained
from cacao_tui.store.run_lock import RunLocked, acquire_run_lock
from ktt.capped_read import read_bytes_capped
from ktt.reference_times import MAX_BYTES as MAX_SEED_BYTES

ARCHIVE_ENTRY = re.compile(r"^output_(\d+)\Z")
# Files that alone do not make output/ a run worth archiving: a hand-seeded reference time.
SEED_FILES = frozenset({"reference_time.json"})
NEXT_OUTPUT = ".cacao-output-next"  # the new output/, with the seed in it, until it is renamed into place


class ArchiveError(Exception):
    """output/ could not be moved aside; the message is one line for the user."""


@dataclass(frozen=True)
class PreparedOutput:
    layout: RunLayout
    archived_to: Path | None  # where the earlier output/ went, when it was archived
    kept: bool  # output/ was left as it was (--resume, --no-clean, or nothing to archive)
    reference_time_carried: bool  # reference_time.json was copied into the new output/


def archived_runs(layout: RunLayout) -> list[tuple[int, Path]]:
    """(N, path) of every archive/output_N, oldest first."""
    if not layout.archive.is_dir():
        return []
    found = []
    for entry in layout.archive.iterdir():
        m = ARCHIVE_ENTRY.match(entry.name)
        if m and entry.is_dir():
            found.append((int(m.group(1)), entry))
    return sorted(found)


def next_archive_path(layout: RunLayout) -> Path:
    """archive/output_N with N one more than the largest there (1 for the first), so N follows time."""
    taken = []
    if layout.archive.is_dir():  # a stray *file* named output_N takes its number too
        taken = [int(m.group(1)) for p in layout.archive.iterdir() if (m := ARCHIVE_ENTRY.match(p.name))]
    return layout.archive / f"output_{max(taken, default=0) + 1}"


def has_run(layout: RunLayout) -> bool:
    """True when output/ holds anything beyond the files a user may seed by hand."""
    if not layout.output.is_dir():
        return False
    return any(entry.name not in SEED_FILES for entry in layout.output.iterdir())


def archive_output(layout: RunLayout) -> Path | None:
    """Move output/ to archive/output_N and return that path; None when there is nothing to move.

    A rename, so it is atomic and instant on one file system. If a concurrent archive takes
    the same N, the next number is tried; an existing entry is never replaced.
    """
    if not layout.output.is_dir() or not any(layout.output.iterdir()):
        return None
    layout.archive.mkdir(parents=True, exist_ok=True)
    for _ in range(100):
        target = next_archive_path(layout)
        try:
            # mkdir first: rename() would silently replace an *empty* directory of that name.
            target.mkdir()
        except FileExistsError:
            continue
        try:
            os.rename(layout.output, target)
        except OSError as exc:
            if exc.errno == errno.EXDEV:  # output/ is a mount point: copy, then remove (links are refused)
                target.rmdir()
                shutil.move(str(layout.output), str(target))
                return target
            target.rmdir()
            raise ArchiveError(f"{layout.output}: cannot move to {target}: {exc.strerror}") from None
        return target
    raise ArchiveError(f"{layout.archive}: no free output_N name after 100 tries")


def prepare_output(problem_dir: Path, resume: bool, no_clean: bool) -> PreparedOutput:
    """Make ``problem_dir/output/`` ready for a run; call once, before the run writes anything.

    - ``resume``: output/ is left exactly as it is; the engine continues the run in it.
    - ``no_clean`` (a fresh run): output/ stays and the new run writes into it; an earlier
      run's files there are first moved, as they are, into ``output/earlier_N/``
      (``store.earlier_run``; returned as ``archived_to``), so nothing of it is lost.
    - otherwise (a fresh run): an output/ that holds an earlier run is renamed to
      ``archive/output_N`` (N = next free number; nothing is deleted) and a new, empty
      output/ is created. ``reference_time.json`` — a seeded or measured reference time, the
      speedup denominator — is copied into the new output/ so it survives archiving.

    An output/ holding only ``reference_time.json`` (seeded by hand before a first run) is not
    archived. output/ exists when this returns. Raises ``ArchiveError`` when output/ cannot
    be moved aside, when another run holds the directory, or when output/ or archive/ is a
    link out of the problem.
    """
    layout = RunLayout(Path(problem_dir))
    try:
        acquire_run_lock(layout.problem_dir)  # held already when the launcher took it; idempotent
        check_contained(layout, walk_output=resume or no_clean)
    except (RunLocked, UnsafeLayout) as exc:
        raise ArchiveError(str(exc)) from None
    _finish_interrupted_move(layout)
    if resume or no_clean or not has_run(layout):
        layout.output.mkdir(parents=True, exist_ok=True)
        if resume or no_clean:
            remove_crash_leftovers(layout.output)
        aside = set_aside(layout) if no_clean and not resume else None
        return PreparedOutput(layout, aside, True, False)
    seed = _seed(layout)
    staging = layout.problem_dir / NEXT_OUTPUT
    if seed is not None:  # copied before output/ moves: a kill at any point leaves it somewhere we look
        staging.mkdir()
        write_text_atomic(staging / layout.reference_time.name, seed.decode("utf-8", errors="replace"))
    archived = archive_output(layout)
    if seed is not None:
        os.rename(staging, layout.output)
    layout.output.mkdir(parents=True, exist_ok=True)
    return PreparedOutput(layout, archived, False, seed is not None)


def _seed(layout: RunLayout) -> bytes | None:
    """output/reference_time.json's bytes to carry: a regular file within its cap, never through a
    link (a link to a host JSON file is not copied; a run refuses it before this, see launch)."""
    try:
        return read_bytes_capped(layout.reference_time, MAX_SEED_BYTES, follow_links=False)
    except OSError:
        return None


def _finish_interrupted_move(layout: RunLayout) -> None:
    """A start killed between moving output/ aside and renaming the new one in left NEXT_OUTPUT."""
    staging = layout.problem_dir / NEXT_OUTPUT
    if staging.is_symlink() or (staging.exists() and not staging.is_dir()):
        raise ArchiveError(f"{staging}: is not a directory cacao made; remove it (it is where a new output/ is made)")
    if not staging.is_dir():
        return
    if not layout.output.exists() and not layout.output.is_symlink():
        os.rename(staging, layout.output)  # the seed it holds is the new output/'s
        return
    seed = staging / layout.reference_time.name
    if layout.output.is_dir() and not layout.reference_time.exists() and seed.is_file() and not seed.is_symlink():
        os.rename(seed, layout.reference_time)
    shutil.rmtree(staging, ignore_errors=True)
