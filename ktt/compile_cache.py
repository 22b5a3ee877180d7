"""An on-disk cache of NVRTC results, keyed by everything that decides the cubin.

The key hashes the source, the defines, the arch, the compiler options, the NVRTC version
and the text of the headers the source can include from the problem (inputs.hpp and the
problem's own headers) - not the work directory's path, so a second run of the same
kernel, or ``ktt check`` before ``ktt tune``, reuses the cubins. Failed compiles are
cached too: the same input fails the same way; refused ones (an include or an option
outside what a compile may use) are not, and the refusal check runs before every lookup.

Logs and messages are stored as ``ktt.nvrtc.compile_cubin`` returns them, scrubbed of
secret-looking text and capped, and scrubbed again when read: the cache is shared by
every problem and run of the user, so it must never hand one run's secret to another.
Format 2 is the first with scrubbed logs; entries of format 1 are never read.

A define that nothing can read (ktt.macro_use) is left out of the compile and of the key
(``effective_request``): configurations that differ only in such a parameter are one
program, compiled once. A compile cut off at its time limit is not cached (it depends on
the machine's load, not on the input).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import tempfile
from dataclasses import asdict
from pathlib import Path

from ktt.macro_use import identifiers, names_read
from ktt.nvrtc import MAX_LOG_CHARS, CompileDiagnostic, CompileOutput, CompileRequest, compile_cubin, precheck
from ktt.redact import cap, redact
from ktt.toolkit import cuda_include_dirs, nvrtc_version

CACHE_FORMAT = 3  # 3: ptxas messages with a PTX line ("not supported on .target") are parsed


def default_cache_dir() -> Path:
    env = os.environ.get("KTT_CACHE_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "ktt" / "compile"


_READ_MEMO: dict[tuple, frozenset[str] | None] = {}


def effective_request(req: CompileRequest) -> CompileRequest:
    """``req`` without the defines that nothing can read (the same program, and the same cache key).

    A kept define's value may name another define (``-DTILE2=TILE*2``): those are kept too.
    """
    if not req.defines:
        return req
    names = tuple(k for k, _ in req.defines)
    memo_key = (req.source, req.header_texts, names)
    if memo_key not in _READ_MEMO:
        if len(_READ_MEMO) > 64:
            _READ_MEMO.clear()
        read = names_read(names, [req.source, *(t for _, t in req.header_texts)], cuda_include_dirs())
        _READ_MEMO[memo_key] = None if read is None else frozenset(read)
    read = _READ_MEMO[memo_key]
    if read is None or len(read) == len(names):
        return req
    keep = set(read)
    values = dict(req.defines)
    changed = True
    while changed:  # a kept value that names another define keeps that one too
        changed = False
        for name in names:
            if name not in keep and any(name in identifiers(values[k]) for k in keep):
                keep.add(name)
                changed = True
    return dataclasses.replace(req, defines=tuple((k, v) for k, v in req.defines if k in keep))


def cache_key(req: CompileRequest) -> str:
    h = hashlib.sha256()
    parts = [
        f"format={CACHE_FORMAT}",
        f"nvrtc={nvrtc_version()}",
        f"arch={req.arch}",
        "defines=" + json.dumps(req.defines),
        "options=" + json.dumps(req.options),
        "headers=" + json.dumps(req.header_texts),
        "source=" + req.source,
    ]
    if req.output != "cubin":
        parts.insert(0, f"output={req.output}")
    for p in parts:
        h.update(p.encode())
        h.update(b"\0")
    return h.hexdigest()


def _scrubbed(d: CompileDiagnostic) -> CompileDiagnostic:
    return CompileDiagnostic(d.file, d.line, d.column, d.severity, redact(str(d.message)))


class CompileCache:
    def __init__(self, directory: Path | str | None) -> None:
        self.directory = Path(directory) if directory else None
        if self.directory is not None:
            with contextlib.suppress(OSError):
                self.directory.mkdir(parents=True, exist_ok=True)

    def _paths(self, key: str) -> tuple[Path, Path]:
        assert self.directory is not None
        sub = self.directory / key[:2]
        return sub / f"{key}.cubin", sub / f"{key}.json"

    def get(self, key: str) -> CompileOutput | None:
        if self.directory is None:
            return None
        cubin_path, meta_path = self._paths(key)
        try:
            meta = json.loads(meta_path.read_text())
            cubin = cubin_path.read_bytes() if meta["ok"] else None
        except (OSError, ValueError, KeyError):
            return None
        try:
            diags = [_scrubbed(CompileDiagnostic(**d)) for d in meta.get("diagnostics", [])]
        except (TypeError, KeyError):
            return None
        return CompileOutput(
            meta["ok"],
            cubin,
            diags,
            cap(redact(str(meta.get("log", ""))), MAX_LOG_CHARS, "compiler output"),
            meta.get("seconds", 0.0),
            True,
            tuple(meta.get("kernels", [])),
        )

    def put(self, key: str, out: CompileOutput) -> Path | None:
        if self.directory is None:
            return None
        cubin_path, meta_path = self._paths(key)
        try:
            cubin_path.parent.mkdir(parents=True, exist_ok=True)
            if out.ok and out.cubin is not None:
                _atomic_write(cubin_path, out.cubin)
            meta = {
                "ok": out.ok,
                "diagnostics": [asdict(d) for d in out.diagnostics],
                "log": out.log,
                "seconds": out.seconds,
                "kernels": list(out.kernels),
            }
            _atomic_write(meta_path, json.dumps(meta).encode())
        except OSError:
            return None
        return cubin_path

    def cubin_path(self, key: str) -> Path | None:
        if self.directory is None:
            return None
        path = self._paths(key)[0]
        return path if path.exists() else None


def _atomic_write(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def lookup(req: CompileRequest, cache_dir: str | None) -> tuple[CompileOutput, str] | None:
    """What ``compile_cached`` would answer without compiling (a refusal or a cache hit), else None."""
    req = effective_request(req)
    key = cache_key(req)
    refused = precheck(req)
    if refused is not None:
        return refused, key
    hit = CompileCache(cache_dir).get(key)
    return (hit, key) if hit is not None else None


def compile_cached(req: CompileRequest, cache_dir: str | None, pch_dir: str | None = None) -> tuple[CompileOutput, str]:
    """Compile through the cache; returns the output and its key. Safe to call from pool workers.

    ``pch_dir``: a kernel that starts with heavy includes may use (and make) a precompiled
    header there (ktt.pch; the compile pool's private directory).
    """
    found = lookup(req, cache_dir)
    if found is not None:
        return found
    req = effective_request(req)
    key = cache_key(req)
    cache = CompileCache(cache_dir)
    out = compile_cubin(req, pch_dir=pch_dir)
    if not out.timed_out and not out.out_of_memory:  # both depend on the machine, not the source
        cache.put(key, out)
    return out, key
