"""Which -D macros a compile can read: the ones the kernel, its headers or the CUDA headers name.

Two compile speed-ups rest on this. A define that nothing can read does not change the
program, so configurations that differ only in it compile once (``effective_request`` in
ktt.compile_cache). And a define that no header of a kernel's leading includes can read may
move below those includes, so the includes can come from a precompiled header (ktt.pch).

The answer must never be "unused" for a macro that is used: a name counts as read when it
appears as an identifier anywhere in the given texts (comments and strings included), in
any file under the CUDA/CCCL header directories, or when it looks like a name the toolkit
or NVRTC's built-in headers reserve. Token pasting (``##``) in the given texts can build
any name, so then every name counts as read. The scans are linear (substring search, no
backtracking) and the CUDA headers are read once per process.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterable

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Names the toolkit's own (and NVRTC's built-in) headers test: never judged unused.
_RESERVED = re.compile(r"_|(?:CUDA|CU|NV|NVRTC|CUB|THRUST|CCCL|LIBCUDACXX|CUTLASS|CUTE)_|NDEBUG$|DEBUG$")
SHORT_NAME = 2  # names this short are everywhere; they count as read
MAX_HEADER_BYTES = 4 * 1024 * 1024


@functools.lru_cache(maxsize=64)
def identifiers(text: str) -> frozenset[str]:
    return frozenset(_IDENT.findall(text))


def _ident_char(b: int) -> bool:
    return b == 95 or 48 <= b <= 57 or 65 <= b <= 90 or 97 <= b <= 122


def _has_identifier(data: bytes, name: bytes) -> bool:
    start = data.find(name)
    n = len(name)
    while start >= 0:
        before = data[start - 1] if start > 0 else 32
        after = data[start + n] if start + n < len(data) else 32
        if not _ident_char(before) and not _ident_char(after):
            return True
        start = data.find(name, start + 1)
    return False


_trusted_answers: dict[tuple[str, tuple[str, ...]], bool] = {}


def _files_under(dirs: tuple[str, ...]) -> Iterable[str]:
    seen: set[str] = set()
    for d in dirs:
        real = os.path.realpath(d)
        if real in seen or not os.path.isdir(real):
            continue
        seen.add(real)
        for root, subdirs, files in os.walk(real):
            subdirs[:] = [s for s in subdirs if os.path.realpath(os.path.join(root, s)) not in seen]
            for f in files:
                yield os.path.join(root, f)


def read_by_cuda_headers(names: Iterable[str], trusted_dirs: tuple[str, ...]) -> set[str]:
    """The names among ``names`` that appear as identifiers in any file under ``trusted_dirs``.

    One pass over the headers for all the names not answered before (answers are kept).
    """
    wanted = [n for n in dict.fromkeys(names) if (n, trusted_dirs) not in _trusted_answers]
    if wanted:
        found: set[str] = set()
        encoded = {n: n.encode() for n in wanted}
        for path in _files_under(trusted_dirs):
            if len(found) == len(wanted):
                break
            try:
                if os.path.getsize(path) > MAX_HEADER_BYTES:
                    continue
                with open(path, "rb") as f:
                    data = f.read(MAX_HEADER_BYTES + 1)
            except OSError:
                continue
            for n in wanted:
                if n not in found and _has_identifier(data, encoded[n]):
                    found.add(n)
        for n in wanted:
            _trusted_answers[(n, trusted_dirs)] = n in found
    return {n for n in names if _trusted_answers[(n, trusted_dirs)]}


def reserved(name: str) -> bool:
    return len(name) <= SHORT_NAME or _RESERVED.match(name) is not None


def names_read(names: Iterable[str], texts: Iterable[str], trusted_dirs: tuple[str, ...]) -> set[str] | None:
    """The names among ``names`` that the texts or the CUDA headers may read; None: all of them (``##``)."""
    names = list(names)
    texts = list(texts)
    if any("##" in t or "%:%:" in t for t in texts):
        return None
    seen: set[str] = set()
    for t in texts:
        seen |= identifiers(t)
    used = {n for n in names if n in seen or reserved(n)}
    rest = [n for n in names if n not in used]
    if rest:
        used |= read_by_cuda_headers(rest, trusted_dirs)
    return used
