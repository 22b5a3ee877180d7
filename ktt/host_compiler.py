"""Build small host programs with the system compiler: a cpu_c reference, the custom input generators.

Builds are content-addressed: the output is named by a hash of the compiler, its flags and
the source, so a second build of the same thing is a file lookup. Where the output goes is
the caller's choice; ``default_host_cache_dir()`` is outside any problem directory (a
problem directory is never written to).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from ktt import procs
from ktt.expressions import Number

BUILD_TIMEOUT_S = 120.0
MAX_LOG_CHARS = 20_000

# "file:line:col: error: message" (gcc and clang), column optional.
_DIAGNOSTIC = re.compile(r"^(?P<file>[^:\n]+):(?P<line>\d+):(?:(?P<col>\d+):)?\s*(?:fatal )?error:\s*(?P<msg>.*)$")


@dataclass(frozen=True)
class HostDiagnostic:
    file: str
    line: int
    message: str


class HostCompileError(RuntimeError):
    """The compiler refused the source (or could not run). ``str()`` carries the log; ``errors`` parses it."""

    def __init__(self, message: str, log: str = "", errors: list[HostDiagnostic] | None = None) -> None:
        super().__init__(message)
        self.log = log
        self.errors = errors or []


def default_host_cache_dir() -> Path:
    """``$KTT_CACHE_DIR/host``, else ``$XDG_CACHE_HOME/ktt/host`` (``~/.cache/ktt/host``)."""
    env = os.environ.get("KTT_CACHE_DIR")
    if env:
        return Path(env) / "host"
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "ktt" / "host"


def find_compiler(cxx: bool) -> str:
    names = (os.environ.get("CXX"), "c++", "g++", "clang++") if cxx else (os.environ.get("CC"), "cc", "gcc", "clang")
    for name in names:
        if name and shutil.which(name):
            return name
    raise HostCompileError(f"no host {'C++' if cxx else 'C'} compiler found (set {'CXX' if cxx else 'CC'})")


def parse_errors(log: str) -> list[HostDiagnostic]:
    out = []
    for line in log.splitlines():
        m = _DIAGNOSTIC.match(line.strip())
        if m:
            out.append(HostDiagnostic(m.group("file"), int(m.group("line")), m.group("msg").strip()))
    return out


def _build(
    source: str,
    out_dir: Path,
    *,
    cxx: bool,
    flags: list[str],
    link: list[str],
    source_name: str,
    suffix: str,
    timeout_s: float,
) -> Path:
    compiler = find_compiler(cxx)
    digest = hashlib.sha256("\0".join([compiler, *flags, *link, source]).encode()).hexdigest()[:20]
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / f"{digest}{suffix}"
    if target.exists():
        return target
    src = out_dir / f"{digest}_{source_name}"
    src.write_text(source, encoding="utf-8")
    tmp = out_dir / f".{digest}.{os.getpid()}.tmp"
    env = {**os.environ, "LC_ALL": "C", "LANG": "C"}  # plain ASCII quotes in messages
    res = procs.run([compiler, *flags, "-o", str(tmp), str(src), *link], timeout_s=timeout_s, env=env)
    if res.timed_out or res.returncode != 0:
        tmp.unlink(missing_ok=True)
        log = (res.stderr or res.stdout).strip()[-MAX_LOG_CHARS:]
        why = f"timed out after {timeout_s:g} s" if res.timed_out else "failed"
        raise HostCompileError(f"{compiler} {why} on {source_name}:\n{log}", log, parse_errors(log))
    os.replace(tmp, target)
    return target


def build_shared_library(
    source: str,
    out_dir: Path,
    *,
    cxx: bool,
    defines: dict[str, Number],
    include_dirs: list[Path],
    source_name: str,
    timeout_s: float = BUILD_TIMEOUT_S,
) -> Path:
    """Compile ``source`` to ``out_dir/<hash>.so`` (reused when it already exists)."""
    from ktt.nvrtc import macro_value  # the same literals as the kernels' -D values; imported late (cuda.core)

    flags = ["-O2", "-shared", "-fPIC", "-std=c++17" if cxx else "-std=c11"]
    flags += [f"-D{k}={macro_value(v)}" for k, v in sorted(defines.items())]
    flags += [f"-I{d}" for d in include_dirs]
    return _build(
        source, out_dir, cxx=cxx, flags=flags, link=["-lm"], source_name=source_name, suffix=".so", timeout_s=timeout_s
    )


def build_executable(
    source: str, out_dir: Path, *, include_dirs: list[Path], source_name: str, timeout_s: float = BUILD_TIMEOUT_S
) -> Path:
    """Compile a C++ program to ``out_dir/<hash>.exe`` (reused when it already exists)."""
    flags = ["-O2", "-std=c++17", *(f"-I{d}" for d in include_dirs)]
    return _build(
        source, out_dir, cxx=True, flags=flags, link=["-lm"], source_name=source_name, suffix=".exe",
        timeout_s=timeout_s,
    )  # fmt: skip
