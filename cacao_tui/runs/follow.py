"""Follow a run another process owns through its event log (``output/run.jsonl``).

The log holds every event of the run as one JSON line (``cacao_tui.engine.runlog``), so
reading it from the start rebuilds what an in-process subscriber would have seen, and
reading what is appended later keeps the view live. Reads are bounded per poll, a line
that is cut or not an event is skipped (counted), and a log replaced by a new run's
(``output/`` archived) is noticed rather than mixed in.
"""

from __future__ import annotations

import os
from pathlib import Path

from cacao_tui.engine.events import _Event, parse_event

READ_BYTES = 4 * 1024 * 1024  # per poll; a larger backlog is read over the next polls
MAX_LINE = 2 * 1024 * 1024


class RunLogFollower:
    def __init__(self, path: Path, *, read_bytes: int = READ_BYTES) -> None:
        self.path = path
        self.read_bytes = read_bytes
        self.offset = 0
        self.skipped = 0  # lines that were not events
        self.replaced = False  # the file at ``path`` is no longer the one being followed
        self._identity: tuple[int, int] | None = None
        self._partial = b""

    def poll(self) -> list[_Event]:
        """The events appended since the last poll (none while the log does not exist)."""
        if self.replaced:
            return []
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            if self._identity is not None:
                self.replaced = True  # output/ was archived under us
            return []
        try:
            st = os.fstat(fd)
            identity = (st.st_dev, st.st_ino)
            if self._identity is None:
                self._identity = identity
            elif identity != self._identity or st.st_size < self.offset:
                self.replaced = True
                return []
            if st.st_size <= self.offset:
                return []
            data = os.pread(fd, min(self.read_bytes, st.st_size - self.offset), self.offset)
        except OSError:
            return []
        finally:
            os.close(fd)
        self.offset += len(data)
        data = self._partial + data
        lines = data.split(b"\n")
        self._partial = lines.pop()
        if len(self._partial) > MAX_LINE:
            self._partial = b""
            self.skipped += 1
        events = []
        for raw in lines:
            if not raw.strip():
                continue
            try:
                events.append(parse_event(raw.decode("utf-8", errors="replace")))
            except ValueError:
                self.skipped += 1
        return events
