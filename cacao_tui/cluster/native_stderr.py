"""Ray's core library logs each failed attempt to join a cluster straight to file descriptor 2
(a line a second for about 20 s, past Python's logging), so an unreachable or refusing cluster
would bury the one line cacao prints. While joining, fd 2 goes to a private temporary file; the
text is kept (capped) for the error message's hint and is otherwise dropped."""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass

KEEP_BYTES = 64 * 1024  # the tail of what was written: enough for the last errors


@dataclass
class Captured:
    text: str = ""


@contextlib.contextmanager
def native_stderr_captured() -> Iterator[Captured]:
    """fd 2 (and so ``sys.stderr``) writes into a temporary file until the block ends."""
    captured = Captured()
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.flush()
    try:
        saved = os.dup(2)
    except OSError:  # no fd 2 to redirect: nothing to keep quiet
        yield captured
        return
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield captured
        finally:
            with contextlib.suppress(OSError, ValueError):
                sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            size = sink.seek(0, os.SEEK_END)
            sink.seek(max(0, size - KEEP_BYTES))
            captured.text = sink.read().decode("utf-8", "replace")
