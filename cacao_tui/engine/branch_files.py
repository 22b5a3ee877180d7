"""The files a branch's worker alone writes, kept in memory as the text last written or read.

One writer per file: while a worker lives, nobody else writes its branch.json or its
iterations' state.json (the engine writes a manifest only before the worker exists or
after it ended, the UI and CLI write branch_config.json and the inbox). So the text the
worker last wrote *is* the file, and a step boundary parses that text instead of opening
the file again; every write still goes to disk at once, atomically (temp file, fsync,
rename). The iteration numbers on disk are tracked the same way: only the worker creates
an iteration's state.json, and nothing removes one while the worker runs.

A fresh worker (a spawn, a ``--resume``) starts with nothing in memory and reads the disk.

Readers that only look (the iteration pool's standings, asked at the end of every iteration of
every branch) take ``peek_*``: the parsed model, kept until the next write, shared and never to
be changed; ``manifest()`` and ``state()`` parse a fresh copy for callers that change and save it.
"""

from __future__ import annotations

import time
from typing import TypeVar

from pydantic import BaseModel

from cacao_tui.store.atomic import StateFileError, parse_model, read_state_text, write_text_atomic
from cacao_tui.store.layout import BranchLayout, RunLayout
from cacao_tui.store.state import BranchManifest, IterState

M = TypeVar("M", bound=BaseModel)


def _timed(st: IterState) -> tuple[bool, float | None]:
    return st.run is not None or st.decision is not None, st.run.best_ms if st.run is not None else None


def _text_of(model: BaseModel) -> str:
    return model.model_dump_json(indent=2) + "\n"  # the same bytes as store.atomic.write_model


class BranchFiles:
    """branch.json and the iterations' state.json of one branch, for its worker."""

    def __init__(self, layout: BranchLayout) -> None:
        self.layout = layout
        self._manifest: str | None = None
        self._states: dict[int, str] = {}
        self._indices: set[int] | None = None
        self._peeked_manifest: BranchManifest | None = None
        self._peeked: dict[int, IterState | None] = {}
        self._timed: dict[int, tuple[bool, float | None]] = {}  # see timed()
        self.version = 0  # counts this object's writes: what was derived from its files at a version holds

    # -- branch.json ---------------------------------------------------------------------------
    def manifest(self) -> BranchManifest:
        """A fresh copy (callers change it and save it)."""
        path = self.layout.manifest
        if self._manifest is None:
            self._manifest = read_state_text(path)
        return parse_model(self._manifest, path, BranchManifest)

    def peek_manifest(self) -> BranchManifest:
        """The manifest to look at, not to change (parsed once per write)."""
        if self._peeked_manifest is None:
            self._peeked_manifest = self.manifest()
        return self._peeked_manifest

    def save_manifest(self, m: BranchManifest) -> None:
        m.updated_at = time.time()
        text = _text_of(m)
        self._manifest = self._peeked_manifest = None  # a failed write leaves the disk as it was: read it again
        self.version += 1
        write_text_atomic(self.layout.manifest, text)
        self._manifest = text

    # -- iterations ----------------------------------------------------------------------------
    def indices(self) -> list[int]:
        """The iterations with a state.json, in order."""
        if self._indices is None:
            self._indices = set(self.layout.iteration_indices())
        return sorted(self._indices)

    def state(self, index: int) -> IterState | None:
        """Iteration ``index``'s state, None when it has none or it cannot be read."""
        text = self._states.get(index)
        path = self.layout.iteration(index).state
        if text is None:
            if not path.exists():
                return None
            try:
                text = read_state_text(path)
                parse_model(text, path, IterState)
            except StateFileError:
                return None
            self._states[index] = text
        return parse_model(text, path, IterState)

    def peek_state(self, index: int) -> IterState | None:
        """Iteration ``index``'s state to look at, not to change (parsed once per write)."""
        if index not in self._peeked:
            self._peeked[index] = self.state(index)
        return self._peeked[index]

    def timed(self, index: int) -> tuple[bool, float | None] | None:
        """(tuned or decided, its best time) of iteration ``index``, None when it has no state:
        what the iteration pool reads of every iteration of every branch at the end of each one,
        noted as each state is written (no parse)."""
        if index not in self._timed:
            st = self.peek_state(index)
            if st is None:
                return None
            self._timed[index] = _timed(st)
        return self._timed[index]

    def save_state(self, st: IterState) -> None:
        st.updated_at = time.time()
        text = _text_of(st)
        self._states.pop(st.index, None)
        self._peeked.pop(st.index, None)
        self._timed.pop(st.index, None)
        self.version += 1
        write_text_atomic(self.layout.iteration(st.index).state, text)
        self._states[st.index] = text
        self._timed[st.index] = _timed(st)
        if self._indices is not None:
            self._indices.add(st.index)


class RunFiles:
    """Every branch's ``BranchFiles`` in the engine process, the one writer of the branch.json files.

    Workers come and go (a finished branch steered again gets a new one); the text they
    wrote stays here, and the nodes' view of the other branches (the sibling index in every
    prompt) reads it instead of every branch.json again. The names are read from disk once,
    then follow the engine's own creations and deletes.
    """

    def __init__(self, layout: RunLayout) -> None:
        self.layout = layout
        self._branches: dict[str, BranchFiles] = {}
        self._names: set[str] | None = None

    def branch(self, name: str) -> BranchFiles:
        files = self._branches.get(name)
        if files is None:
            files = self._branches[name] = BranchFiles(self.layout.branch(name))
        return files

    def names(self) -> list[str]:
        """The run's branches (those with a branch.json), sorted."""
        if self._names is None:
            self._names = set(self.layout.branch_names())
        return sorted(self._names)

    def created(self, name: str, m: BranchManifest) -> None:
        """A new branch: its branch.json written through here (it has no worker yet)."""
        self.branch(name).save_manifest(m)
        if self._names is not None:
            self._names.add(name)

    def forget(self, name: str) -> None:
        """A branch whose directory moved away (a delete)."""
        self._branches.pop(name, None)
        if self._names is not None:
            self._names.discard(name)

    def manifest(self, name: str) -> BranchManifest | None:
        """A branch's manifest, None when it has none or it cannot be read (for prompts)."""
        if name not in self.names():
            return None
        try:
            return self.branch(name).manifest()
        except StateFileError:
            return None

    def peek_manifest(self, name: str) -> BranchManifest | None:
        """``manifest`` to look at, not to change (BranchFiles.peek_manifest)."""
        if name not in self.names():
            return None
        try:
            return self.branch(name).peek_manifest()
        except StateFileError:
            return None
