"""The files an authoring step may see and change.

Writable: this iteration's ``kernels.cu`` and ``tuning.yaml`` (only ``tuning.yaml`` in a
configuration-only iteration). They start as a copy of the files the iteration starts from.
Readable besides: those starting files unchanged (``base/...``), the branch's best when it
differs (``best/...``), earlier iterations of the same branch (``iterN/...``), the reference
source (``reference``) and the generated ``inputs.hpp``. Never another branch's directory.
"""

from __future__ import annotations

import os
import re
import stat
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

from cacao_tui.nodes.context import BranchView, RunDeps
from ktt.capped_read import MAX_KERNEL_BYTES, MAX_SOURCE_BYTES, MAX_SPEC_BYTES, describe_read_error, read_text_capped
from ktt.problem.inputs_hpp import render_inputs_hpp

WRITABLE = ("kernels.cu", "tuning.yaml")
# What the model may write, in UTF-8 bytes (docs/SECURITY.md, "Bounds"): ktt's own cap on a
# kernel it compiles (NVRTC's time grows with the source) and a spec well under its YAML cap.
# Every later step reads these files again through ``read_model_file``, capped the same.
MAX_WRITE_BYTES = {"kernels.cu": MAX_KERNEL_BYTES, "tuning.yaml": MAX_SPEC_BYTES}
CONFIG_ONLY = "this is a configuration-only iteration: kernels.cu stays as it is; change tuning.yaml"
_ITER = re.compile(r"^iter(\d+)/(kernels\.cu|tuning\.yaml)\Z")


class _ReadCache:
    """The text of model files already read, by path, kept while the file is the same one: same
    device, inode, size, modification and change times (``lstat``; a link is never cached).

    Every step of an iteration reads its kernels.cu and tuning.yaml again (a dozen reads an
    iteration); an ``lstat`` replaces each open and read. Whatever writes these files in this
    process does it through ``write_model_file`` or calls ``forget``, so a rewrite within the
    file system's timestamp tick is seen too; a writer outside changes the change time (or the
    inode, or the size). Bounded in files and bytes.
    """

    FILES = 64
    CHARS = 8 * 1024 * 1024

    def __init__(self) -> None:
        self._texts: OrderedDict[str, tuple[tuple[int, ...], str]] = OrderedDict()
        self._chars = 0
        self._lock = threading.Lock()

    @staticmethod
    def identity(st: os.stat_result) -> tuple[int, ...]:
        return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)

    def get(self, key: str, identity: tuple[int, ...]) -> str | None:
        with self._lock:
            hit = self._texts.get(key)
            if hit is None or hit[0] != identity:
                return None
            self._texts.move_to_end(key)
            return hit[1]

    def put(self, key: str, identity: tuple[int, ...], text: str) -> None:
        with self._lock:
            self._drop(key)
            self._texts[key] = (identity, text)
            self._chars += len(text)
            while len(self._texts) > self.FILES or self._chars > self.CHARS:
                self._drop(next(iter(self._texts)))

    def forget(self, key: str) -> None:
        with self._lock:
            self._drop(key)

    def _drop(self, key: str) -> None:
        old = self._texts.pop(key, None)
        if old is not None:
            self._chars -= len(old[1])


_read_cache = _ReadCache()


def read_model_file(path: Path) -> str:
    """An iteration's kernels.cu or tuning.yaml: a regular file within the model's write cap.

    Raises ReadRefused (an OSError whose ``str()`` is one line) for a FIFO, a device, a
    directory or a file over the cap.
    """
    key = os.path.abspath(path)
    try:
        st: os.stat_result | None = os.lstat(key)
    except OSError:
        st = None
    identity = _ReadCache.identity(st) if st is not None and stat.S_ISREG(st.st_mode) else None
    if identity is not None:
        text = _read_cache.get(key, identity)
        if text is not None:
            return text
    text = read_text_capped(path, MAX_WRITE_BYTES.get(path.name, MAX_SOURCE_BYTES), errors="replace")
    if identity is not None:
        _read_cache.put(key, identity, text)
    return text


def write_model_file(path: Path, data: str | bytes) -> None:
    """Write an iteration's kernels.cu or tuning.yaml (its directory made on the first write)."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    try:
        path.write_bytes(raw)
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(raw)
    finally:
        forget_model_file(path)


def remove_model_file(path: Path) -> None:
    try:
        path.unlink()
    finally:
        forget_model_file(path)


def forget_model_file(path: Path) -> None:
    """Drop what ``read_model_file`` kept of ``path`` (a writer that does not use ``write_model_file``)."""
    _read_cache.forget(os.path.abspath(path))


class WorkspaceError(Exception):
    """A tool asked for something it may not have; returned to the model as a tool error."""


@dataclass
class Workspace:
    deps: RunDeps
    branch: BranchView
    notes_shown: list[str] = field(default_factory=list)  # the note sets the step's prompt carries

    def writable(self) -> tuple[str, ...]:
        return ("tuning.yaml",) if self.branch.mode == "configure" else WRITABLE

    def readable(self) -> list[str]:
        """What read_file can read now (the workspace's files only once they exist)."""
        names = [n for n in WRITABLE if (self.branch.it.root / n).exists()]
        if self.branch.base_kernel:
            names.append("base/kernels.cu")
        if self.branch.base_spec:
            names.append("base/tuning.yaml")
        best = self.branch.best_files
        if best is not None and best.kernel is not None:
            names.append("best/kernels.cu")
        if best is not None and best.spec is not None:
            names.append("best/tuning.yaml")
        for i in self.branch.layout.iteration_indices():
            if i < self.branch.iteration and self.branch.layout.iteration(i).kernel.exists():
                names.append(f"iter{i}/kernels.cu")
        return [*names, "reference", "inputs.hpp"]

    def read(self, name: str) -> str:
        name = name.strip().lstrip("./")
        it = self.branch.it
        if name in WRITABLE:
            path = it.root / name
            if not path.exists():
                raise WorkspaceError(f"{name} does not exist yet; write it with write_file")
            return self._read_file(name, path)
        if name == "base/kernels.cu" and self.branch.base_kernel:
            return self.branch.base_kernel
        if name == "base/tuning.yaml" and self.branch.base_spec:
            return self.branch.base_spec
        best = self.branch.best_files
        if name == "best/kernels.cu" and best is not None and best.kernel is not None:
            return best.kernel
        if name == "best/tuning.yaml" and best is not None and best.spec is not None:
            return best.spec
        if name == "reference":
            try:
                return read_text_capped(self.deps.problem.reference.file, MAX_SOURCE_BYTES, errors="replace")
            except OSError as exc:
                raise WorkspaceError(f"cannot read the reference: {exc}") from None
        if name == "inputs.hpp":
            return render_inputs_hpp(self.deps.problem)
        m = _ITER.match(name)
        if m and int(m.group(1)) < self.branch.iteration:
            path = self.branch.layout.iteration(int(m.group(1))).root / m.group(2)
            if path.exists():
                return self._read_file(name, path)
        raise WorkspaceError(f"cannot read {name[:120]!r}; readable files: {', '.join(self.readable())}")

    @staticmethod
    def _read_file(name: str, path: Path) -> str:
        try:
            return read_model_file(path)
        except OSError as exc:
            raise WorkspaceError(f"cannot read {name}: {describe_read_error(exc)}") from None

    def write(self, name: str, content: str) -> str:
        name = name.strip().lstrip("./")
        if name == "kernels.cu" and self.branch.mode == "configure":
            raise WorkspaceError(CONFIG_ONLY)
        if name not in WRITABLE:
            raise WorkspaceError(f"only {' and '.join(self.writable())} can be written, not {name[:80]!r}")
        data = content.encode("utf-8", errors="replace")  # a lone surrogate from JSON becomes '?'
        if len(data) > MAX_WRITE_BYTES[name]:
            raise WorkspaceError(
                f"{name} is too large ({len(data):,} bytes; at most {MAX_WRITE_BYTES[name]:,}): nothing written"
            )
        path = self.branch.it.root / name
        write_model_file(path, data)
        return f"wrote {name} ({_line_count(content)} lines)"

    def edit(self, name: str, old: str, new: str) -> str:
        clean = name.strip().lstrip("./")
        if clean == "kernels.cu" and self.branch.mode == "configure":
            raise WorkspaceError(CONFIG_ONLY)
        text = self.read(name) if clean in WRITABLE else None
        if text is None:
            raise WorkspaceError(f"only {' and '.join(self.writable())} can be edited")
        count = text.count(old) if old else 0
        if count == 0:
            raise WorkspaceError(f"the text to replace was not found in {name}; read_file it and copy it exactly")
        if count > 1:
            raise WorkspaceError(f"the text to replace occurs {count} times in {name}; include more context")
        at = text.index(old)
        first = text.count("\n", 0, at) + 1
        old_lines, new_lines = old.count("\n") + 1, new.count("\n") + 1
        updated = text.replace(old, new, 1)
        self.write(name, updated)
        was = f"lines {first}-{first + old_lines - 1}" if old_lines > 1 else f"line {first}"
        now = f"lines {first}-{first + new_lines - 1}" if new_lines > 1 else f"line {first}"
        change = f"{was} removed" if not new else f"{was} replaced, now {now}"
        return f"edited {clean}: {change}; the file has {_line_count(updated)} lines"


def _line_count(text: str) -> int:
    return text.count("\n") + (0 if text.endswith("\n") or not text else 1)


def seed_workspace(branch: BranchView) -> bool:
    """Put the starting files in the iteration directory (overwriting a crashed attempt's edits).

    Returns whether there was anything to seed; a first iteration starts empty.
    """
    start = branch.start
    it = branch.it
    it.root.mkdir(parents=True, exist_ok=True)
    seeded = False
    for path, text in ((it.kernel, start.kernel if start else None), (it.spec, start.spec if start else None)):
        if text is not None:
            write_model_file(path, text)
            seeded = True
        elif path.exists():
            remove_model_file(path)
    return seeded
