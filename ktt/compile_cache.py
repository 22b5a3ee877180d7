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
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from dataclasses import asdict
from pathlib import Path

from ktt.nvrtc import MAX_LOG_CHARS, CompileDiagnostic, CompileOutput, CompileRequest, compile_cubin, precheck
from ktt.redact import cap, redact
from ktt.toolkit import nvrtc_version

CACHE_FORMAT = 2


def default_cache_dir() -> Path:
    env = os.environ.get("KTT_CACHE_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "ktt" / "compile"


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


def compile_cached(req: CompileRequest, cache_dir: str | None) -> tuple[CompileOutput, str]:
    """Compile through the cache; returns the output and its key. Safe to call from pool workers."""
    key = cache_key(req)
    refused = precheck(req)
    if refused is not None:
        return refused, key
    cache = CompileCache(cache_dir)
    hit = cache.get(key)
    if hit is not None:
        return hit, key
    out = compile_cubin(req)
    cache.put(key, out)
    return out, key
