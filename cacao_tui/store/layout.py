"""Where everything of a run lives under a problem's output/ directory (FORMATS.md)."""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from ktt.terminal_text import safe_line

BRANCH_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*\Z")
ITER_DIR = re.compile(r"^iter(\d+)\Z")


@dataclass(frozen=True)
class RunLayout:
    problem_dir: Path

    @property
    def output(self) -> Path:
        return self.problem_dir / "output"

    @property
    def archive(self) -> Path:
        return self.problem_dir / "archive"

    @property
    def context(self) -> Path:
        return self.output / "context.json"

    @property
    def master(self) -> Path:
        return self.output / "master.json"

    @property
    def pool(self) -> Path:
        return self.output / "pool.json"

    @property
    def device(self) -> Path:
        return self.output / "device.json"

    @property
    def final_results(self) -> Path:
        return self.output / "final_results.json"

    @property
    def reference_time(self) -> Path:
        return self.output / "reference_time.json"

    @property
    def run_log(self) -> Path:
        return self.output / "run.jsonl"

    @property
    def master_llm(self) -> Path:
        return self.output / "llm"

    @property
    def branches(self) -> Path:
        return self.output / "branches"

    def branch(self, name: str) -> BranchLayout:
        return BranchLayout(self.branches / name)

    def branch_names(self) -> list[str]:
        if not self.branches.is_dir():
            return []
        return sorted(p.name for p in self.branches.iterdir() if (p / "branch.json").exists())


@dataclass(frozen=True)
class BranchLayout:
    root: Path

    @property
    def name(self) -> str:
        return self.root.name

    @property
    def manifest(self) -> Path:
        return self.root / "branch.json"

    @property
    def config(self) -> Path:
        return self.root / "branch_config.json"

    def iteration(self, index: int) -> IterLayout:
        return IterLayout(self.root / f"iter{index}")

    def iteration_indices(self) -> list[int]:
        if not self.root.is_dir():
            return []
        found = []
        for p in self.root.iterdir():
            m = ITER_DIR.match(p.name)
            if m and (p / "state.json").exists():
                found.append(int(m.group(1)))
        return sorted(found)


@dataclass(frozen=True)
class IterLayout:
    root: Path

    @property
    def state(self) -> Path:
        return self.root / "state.json"

    @property
    def kernel(self) -> Path:
        return self.root / "kernels.cu"

    @property
    def spec(self) -> Path:
        return self.root / "tuning.yaml"

    @property
    def tune_dir(self) -> Path:
        return self.root / "tune"

    @property
    def tune_summary(self) -> Path:
        return self.tune_dir / "summary.json"

    @property
    def tune_results(self) -> Path:
        return self.tune_dir / "results.jsonl"

    @property
    def profile(self) -> Path:
        return self.root / "profile.json"

    @property
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
        if seen > MAX_WALK:
            return
