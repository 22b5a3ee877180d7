"""An on-disk cache of NVRTC results, keyed by everything that decides the cubin.

The key hashes the source, the defines, the arch, the compiler options, the NVRTC version
and the text of the headers the source can include from the problem (inputs.hpp and the
problem's own headers) - not the work directory's path, so a second run of the same
kernel, or ``ktt check`` before ``ktt tune``, reuses the cubins. Failed compiles are
cached too: the same input fails the same way.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from dataclasses import asdict
from pathlib import Path

from ktt.nvrtc import CompileDiagnostic, CompileOutput, CompileRequest, compile_cubin
from ktt.toolkit import nvrtc_version

CACHE_FORMAT = 1


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
        diags = [CompileDiagnostic(**d) for d in meta.get("diagnostics", [])]
        return CompileOutput(
            meta["ok"],
            cubin,
            diags,
            meta.get("log", ""),
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
    cache = CompileCache(cache_dir)
    key = cache_key(req)
    hit = cache.get(key)
    if hit is not None:
        return hit, key
    out = compile_cubin(req)
    cache.put(key, out)
    return out, key
