"""``--clone NAME``: copy a problem's definition to a sibling directory, without its runs.

Everything in the problem directory is copied (problem.yaml, inputs.yaml, the reference,
inputs/, example/, notes) except ``output/``, ``archive/``, the run lock and Python caches. The copy is
made in a hidden staging directory and renamed into place, so a failure leaves nothing
half-written, and an existing target is never touched.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import yaml

from cacao_tui.problem.names import directory_name_error
from ktt.capped_read import MAX_YAML_BYTES, read_text_capped

NOT_COPIED = ("output", "archive", "output.lock", "__pycache__", "*.pyc")
_NAME_LINE = re.compile(r"^name:[ \t]*(?P<value>[^\n#>|]*?)[ \t]*(?P<comment>#[^\n]*)?$", re.MULTILINE)


class CloneError(Exception):
    """A clone that cannot be made; the message is one line for the user."""


@dataclass(frozen=True)
class ClonedProblem:
    source: Path
    target: Path
    files: int
    renamed: bool  # problem.yaml's top-level name: was changed to the new name


def _rename_in_problem_yaml(path: Path, name: str) -> bool:
    """Point a top-level ``name:`` line at the clone, keeping the rest of the file (and its comments)."""
    text = read_text_capped(path, MAX_YAML_BYTES)  # a regular file within the YAML cap (ReadRefused otherwise)
    m = _NAME_LINE.search(text)
    if m is None or not m.group("value"):
        return False  # no name: the loader uses the directory name, which is already right
    comment = f"  {m.group('comment')}" if m.group("comment") else ""
    value = name if yaml.safe_load(name) == name else f"'{name}'"  # "2024" or "true" must stay text
    path.unlink()  # a link copied as a link: the clone gets its own file, the link's target is untouched
    path.write_text(text[: m.start()] + f"name: {value}{comment}" + text[m.end() :], encoding="utf-8")
    return True


def clone_problem(source: Path, name: str) -> ClonedProblem:
    """Copy the problem at ``source`` to ``source.parent / name``."""
    source = Path(source).expanduser().resolve()
    why = directory_name_error(name)
    if why:
        raise CloneError(f"--clone: {why}")
    if not (source / "problem.yaml").is_file():
        raise CloneError(f"{source}: not a problem directory (no problem.yaml)")
    target = source.parent / name
    if target.exists() or target.is_symlink():
        raise CloneError(f"{target}: already exists; choose another name (nothing was copied)")
    staging = Path(tempfile.mkdtemp(prefix=f".{name}.clone-", dir=source.parent))
    try:
        shutil.copystat(source, staging)
        ignore = shutil.ignore_patterns(*NOT_COPIED)
        skipped = set(ignore(str(source), [p.name for p in source.iterdir()]))
        for entry in sorted(source.iterdir()):
            if entry.name in skipped:
                continue
            # Links are copied as links, never followed: a header linked to /dev/zero or a
            # directory linked to / would otherwise be copied byte by byte without end.
            if entry.is_dir() and not entry.is_symlink():
                shutil.copytree(entry, staging / entry.name, ignore=ignore, symlinks=True)
            else:
                shutil.copy2(entry, staging / entry.name, follow_symlinks=False)
        renamed = _rename_in_problem_yaml(staging / "problem.yaml", name)
        files = sum(len(f) for _, _, f in os.walk(staging))
        if target.exists():
            raise CloneError(f"{target}: already exists; choose another name (nothing was copied)")
        os.rename(staging, target)
    except BaseException:
        with contextlib.suppress(OSError):
            shutil.rmtree(staging)
        raise
    return ClonedProblem(source, target, files, renamed)
