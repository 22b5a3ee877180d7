"""Where everything of a run lives under a problem's output/ directory (FORMATS.md).

A branch's directory is named by its branch name, whoever gave it: the model (a strategy's
name, slugged), the engine (``b1-``, ``.2-``), or a file read back (master.json's strategies,
a decision's sub-strategies, a branch.json). Every one is checked by the same rule before it
becomes a path (``is_branch_name``; ``RunLayout.branch`` refuses any other), so a name read
back from a tampered file (``x/../../../pwn``) is an error, never a directory outside output/.
"""

from __future__ import annotations

import functools
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

from pydantic import AfterValidator

from ktt.terminal_text import safe_line

BRANCH_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*\Z")
MAX_BRANCH_NAME = 255  # characters (a file name's limit); a child adds ".N-<strategy>" to its parent's
# A strategy's name as a branch name's last part: what ``nodes.strategize.slug`` makes of the
# model's names (letters, digits, '-', '_'), within 64 characters.
STRATEGY_NAME = re.compile(r"\A[A-Za-z0-9_-]{1,64}\Z")
ITER_DIR = re.compile(r"^iter(\d+)\Z")


class UnsafeName(ValueError):
    """A name that cannot be a branch's directory; ``str()`` is one line."""


def is_branch_name(name: object) -> bool:
    return isinstance(name, str) and 0 < len(name) <= MAX_BRANCH_NAME and BRANCH_NAME.match(name) is not None


def check_branch_name(name: str) -> str:
    if not is_branch_name(name):
        raise UnsafeName(
            f"{safe_line(str(name), 80)!r} is not a branch name (letters, digits, '.', '-', '_', "
            f"at most {MAX_BRANCH_NAME} characters, starting with a letter or digit)"
        )
    return name


def check_strategy_name(name: str) -> str:
    if not STRATEGY_NAME.match(name):
        raise UnsafeName(
            f"{safe_line(name, 80)!r} is not a strategy name (letters, digits, '-', '_', at most 64 characters)"
        )
    return name


def check_run_path(path: str) -> str:
    """A path a run's file records (a kernel, a summary; relative to output/, or absolute as older
    runs wrote them): never '..', no NUL. Where one is used to read, ``RunLayout.within_output``."""
    if ".." in path.split("/") or "\x00" in path or len(path) > 4096:  # PurePosixPath(path).parts, faster
        raise UnsafeName(f"{safe_line(path, 80)!r} is not a path of a run's file (no '..')")
    return path


BranchName = Annotated[str, AfterValidator(check_branch_name)]
StrategyName = Annotated[str, AfterValidator(check_strategy_name)]
RunPath = Annotated[str, AfterValidator(check_run_path)]


# The layouts keep the paths they derive (each is a few Path joins, asked for thousands of times a
# run) and the branch and iteration layouts they hand out, up to this many of each.
LAYOUT_CACHE = 4096


@dataclass(frozen=True)
class RunLayout:
    problem_dir: Path

    @functools.cached_property
    def output(self) -> Path:
        return self.problem_dir / "output"

    @functools.cached_property
    def archive(self) -> Path:
        return self.problem_dir / "archive"

    @functools.cached_property
    def context(self) -> Path:
        return self.output / "context.json"

    @functools.cached_property
    def master(self) -> Path:
        return self.output / "master.json"

    @functools.cached_property
    def pool(self) -> Path:
        return self.output / "pool.json"

    @functools.cached_property
    def device(self) -> Path:
        return self.output / "device.json"

    @functools.cached_property
    def final_results(self) -> Path:
        return self.output / "final_results.json"

    @functools.cached_property
    def reference_time(self) -> Path:
        return self.output / "reference_time.json"

    @functools.cached_property
    def run_log(self) -> Path:
        return self.output / "run.jsonl"

    @functools.cached_property
    def master_llm(self) -> Path:
        return self.output / "llm"

    @functools.cached_property
    def branches(self) -> Path:
        return self.output / "branches"

    def within_output(self, recorded: str) -> Path | None:
        """A path a run's file records (relative to output/ or absolute), when it lies inside output/;
        None otherwise (a tampered branch.json pointing at ``/home/u/.ssh`` is not read)."""
        path = Path(os.path.normpath(self.output / recorded))
        return path if path.is_relative_to(Path(os.path.normpath(self.output))) else None

    def branch(self, name: str) -> BranchLayout:
        """The branch's directory; UnsafeName for a name that is not a branch name."""
        known: dict[str, BranchLayout] = self.__dict__.setdefault("_branch_layouts", {})
        found = known.get(name)
        if found is None:
            found = BranchLayout(self.branches / check_branch_name(name))
            if len(known) < LAYOUT_CACHE:
                known[name] = found
        return found

    def branch_names(self) -> list[str]:
        """The branches on disk: directories of branch names (never a link) holding a branch.json."""
        if not self.branches.is_dir():
            return []
        return sorted(
            p.name
            for p in self.branches.iterdir()
            if is_branch_name(p.name) and not p.is_symlink() and (p / "branch.json").exists()
        )


@dataclass(frozen=True)
class BranchLayout:
    root: Path

    @functools.cached_property
    def name(self) -> str:
        return self.root.name

    @functools.cached_property
    def manifest(self) -> Path:
        return self.root / "branch.json"

    @functools.cached_property
    def config(self) -> Path:
        return self.root / "branch_config.json"

    def iteration(self, index: int) -> IterLayout:
        known: dict[int, IterLayout] = self.__dict__.setdefault("_iteration_layouts", {})
        found = known.get(index)
        if found is None:
            found = IterLayout(self.root / f"iter{index}")
            if len(known) < LAYOUT_CACHE:
                known[index] = found
        return found

    def iteration_indices(self) -> list[int]:
        if not self.root.is_dir():
            return []
        found = []
        for p in self.root.iterdir():
            m = ITER_DIR.match(p.name)
            if m and len(p.name) <= 12 and not p.is_symlink() and (p / "state.json").exists():
                found.append(int(m.group(1)))
        return sorted(found)


@dataclass(frozen=True)
class IterLayout:
    root: Path

    @functools.cached_property
    def state(self) -> Path:
        return self.root / "state.json"

    @functools.cached_property
    def kernel(self) -> Path:
        return self.root / "kernels.cu"

    @functools.cached_property
    def spec(self) -> Path:
        return self.root / "tuning.yaml"

    @functools.cached_property
    def tune_dir(self) -> Path:
        return self.root / "tune"

    @functools.cached_property
    def tune_summary(self) -> Path:
        return self.tune_dir / "summary.json"

    @functools.cached_property
    def tune_results(self) -> Path:
        return self.tune_dir / "results.jsonl"

    @functools.cached_property
    def profile(self) -> Path:
        return self.root / "profile.json"

    @functools.cached_property
    def llm(self) -> Path:
        return self.root / "llm"


class UnsafeLayout(Exception):
    """output/ or archive/ is not a plain directory of the problem; the message is one line."""


MAX_WALK = 200_000  # entries of output/ looked at for links before a resume


def check_contained(layout: RunLayout, *, walk_output: bool = False) -> None:
    """Refuse a run whose writes could land outside the problem directory.

    ``output/`` and ``archive/`` must each be absent or a real directory (a symbolic link
    would make the run write, or archive, wherever it points). With ``walk_output`` (a
    run that writes into an existing output/: --resume, --no-clean), every entry inside
    output/ must be a regular file or a directory: no link, FIFO, device or socket. The run
    itself makes none, and the model's tools write only kernels.cu and tuning.yaml, so one
    there was put there by someone else.
    """
    for path in (layout.output, layout.archive):
        if path.is_symlink():
            target = safe_line(os.readlink(path), 200)  # a link's text is anyone's: shown escaped
            raise UnsafeLayout(
                f"{safe_line(path)}: is a symbolic link (to {target}); a run writes only into a real directory "
                f"inside the problem directory: remove the link (or move {path.name}/ back into the problem)"
            )
        if path.exists() and not path.is_dir():
            raise UnsafeLayout(f"{path}: is not a directory; move it away so the run can use {path.name}/")
    if not walk_output or not layout.output.is_dir():
        return
    seen = 0
    for root, dirs, files in os.walk(layout.output, followlinks=False):
        for name in (*dirs, *files):
            seen += 1
            full = os.path.join(root, name)
            try:
                mode = os.lstat(full).st_mode
            except OSError:
                continue
            if stat.S_ISLNK(mode):
                raise UnsafeLayout(
                    f"{safe_line(full)}: is a symbolic link inside output/; a run never makes links there: remove it"
                )
            if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):  # a FIFO would hang the run's first write or read
                raise UnsafeLayout(
                    f"{safe_line(full)}: is not a regular file or a directory (a FIFO, a device or a socket); "
                    "a run never makes one inside output/: remove it"
                )
        if seen > MAX_WALK:  # not looked at is not checked: past the bound the answer is no
            raise UnsafeLayout(
                f"{safe_line(str(layout.output))}: holds more than {MAX_WALK:,} entries; a run checks every one "
                "for links before it writes there, so it does not continue this one: move output/ away "
                "(or remove what does not belong to the run)"
            )
