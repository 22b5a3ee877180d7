"""Build small host shared libraries (a cpu_c reference, a custom input initialiser) with the system compiler."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

from ktt import procs
from ktt.expressions import Number
from ktt.nvrtc import macro_value


class HostCompileError(RuntimeError):
    pass


def find_compiler(cxx: bool) -> str:
    names = (os.environ.get("CXX"), "c++", "g++", "clang++") if cxx else (os.environ.get("CC"), "cc", "gcc", "clang")
    for name in names:
        if name and shutil.which(name):
            return name
    raise HostCompileError(f"no host {'C++' if cxx else 'C'} compiler found (set {'CXX' if cxx else 'CC'})")


def build_shared_library(
    source: str,
    out_dir: Path,
    *,
    cxx: bool,
    defines: dict[str, Number],
    include_dirs: list[Path],
    source_name: str,
    timeout_s: float = 120.0,
) -> Path:
    """Compile ``source`` to ``out_dir/lib<hash>.so`` (reused when it already exists)."""
    compiler = find_compiler(cxx)
    flags = ["-O2", "-shared", "-fPIC", "-std=c++17" if cxx else "-std=c11"]
    flags += [f"-D{k}={macro_value(v)}" for k, v in sorted(defines.items())]
    flags += [f"-I{d}" for d in include_dirs]
    digest = hashlib.sha256("\0".join([compiler, *flags, source]).encode()).hexdigest()[:16]
    out_dir.mkdir(parents=True, exist_ok=True)
    lib = out_dir / f"lib{digest}.so"
    if lib.exists():
        return lib
    src = out_dir / f"{digest}_{source_name}"
    src.write_text(source, encoding="utf-8")
    tmp = out_dir / f".{digest}.so.tmp"
    res = procs.run([compiler, *flags, "-o", str(tmp), str(src), "-lm"], timeout_s=timeout_s)
    if res.timed_out or res.returncode != 0:
        detail = (res.stderr or res.stdout).strip()
        raise HostCompileError(f"{compiler} failed on {source_name}:\n{detail}")
    os.replace(tmp, lib)
    return lib
