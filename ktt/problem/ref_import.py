"""Import a python reference in its own process and say whether it can be used.

    python -m ktt.problem.ref_import FILE [FUNCTION]

The original imports ref.py at engine start, so a missing module (torch, say) stops a run
before any work. This does the same without the import's side effects reaching the caller:
the caller runs it as a child with a time limit, bounded output and no secrets in its
environment (``import_reference``). ref.py is loaded as module ``ref`` with its directory
on ``sys.path``; the reference is FUNCTION, else the first public function defined in ref.py
in name order (``prepare_input`` excepted), as the original's runner picks it.

The child prints one line starting with ``MARKER`` and a JSON object: ``{"ok": true,
"function", "prepare_input"}`` or ``{"ok": false, "kind", "message", "module", "line"}``.
"""

from __future__ import annotations

import json
import sys
import tempfile
import traceback
from dataclasses import dataclass
from pathlib import Path

from ktt import procs
from ktt.capped_read import ReadRefused, describe_read_error, module_from_file

MARKER = "KTT-REF-IMPORT "
MODULE_NAME = "ref"
IMPORT_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class ImportResult:
    ok: bool
    function: str | None = None
    prepare_input: bool = False
    kind: str | None = None  # missing_module | error | timeout | no_function | crashed
    message: str = ""
    module: str | None = None
    line: int | None = None
    seconds: float = 0.0


def child_environment() -> dict[str, str]:
    """The allow-listed environment (``procs.child_env``: no keys), without bytecode writes (nothing is written)."""
    return procs.child_env(PYTHONDONTWRITEBYTECODE="1", PYTHONUNBUFFERED="1")


def import_reference(file: Path, function: str | None, timeout_s: float = IMPORT_TIMEOUT_S) -> ImportResult:
    """Import ``file`` in a child process; never raises for what the reference does."""
    cmd = [sys.executable, "-m", "ktt.problem.ref_import", str(file)] + ([function] if function else [])
    with tempfile.TemporaryDirectory(prefix="ktt-ref-import-") as cwd:
        res = procs.run(cmd, timeout_s=timeout_s, env=child_environment(), cwd=cwd, keep_lines=200)
    if res.timed_out:
        return ImportResult(False, kind="timeout", message=f"importing took longer than {timeout_s:g} s",
                            seconds=res.seconds)  # fmt: skip
    for line in reversed(res.stdout.splitlines()):
        if line.startswith(MARKER):
            try:
                data = json.loads(line[len(MARKER) :])
                return ImportResult(**{**data, "seconds": res.seconds})
            except (ValueError, TypeError):
                break
    tail = (res.stderr.strip().splitlines() or [f"exit status {res.returncode}"])[-1]
    return ImportResult(False, kind="crashed", message=tail[:300], seconds=res.seconds)


def _line_in(file: Path, tb: traceback.StackSummary) -> int | None:
    """The line of ``file`` the import failed at (the innermost frame in it)."""
    for frame in reversed(tb):
        if frame.filename and Path(frame.filename).resolve() == file:
            return frame.lineno
    return None


def _pick(module: object, function: str | None) -> str | None:
    if function:
        return function if callable(getattr(module, function, None)) else None
    for name in sorted(dir(module)):
        if name.startswith("_") or name == "prepare_input":
            continue
        obj = getattr(module, name)
        if callable(obj) and getattr(obj, "__module__", None) == MODULE_NAME:
            return name
    return None


def _report(**fields: object) -> int:
    sys.stdout.flush()
    print(MARKER + json.dumps(fields), flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    procs.exit_when_parent_dies()
    sys.dont_write_bytecode = True
    args = sys.argv[1:] if argv is None else argv
    if not args:
        print("usage: python -m ktt.problem.ref_import FILE [FUNCTION]", file=sys.stderr)
        return 2
    file = Path(args[0]).resolve()
    function = args[1] if len(args) > 1 else None
    sys.path.insert(0, str(file.parent))
    try:
        module = module_from_file(MODULE_NAME, file)  # ref.py read capped, a regular file only
        if module.__spec__ is None or module.__spec__.loader is None:
            return _report(ok=False, kind="error", message="cannot be loaded as a Python module")
        sys.modules[MODULE_NAME] = module
        module.__spec__.loader.exec_module(module)
    except ReadRefused as exc:
        return _report(ok=False, kind="error", message=describe_read_error(exc))
    except ModuleNotFoundError as exc:
        tb = traceback.extract_tb(exc.__traceback__)
        return _report(ok=False, kind="missing_module", module=exc.name, message=str(exc), line=_line_in(file, tb))
    except BaseException as exc:  # whatever the import raised (SystemExit included) is reported, not re-raised
        tb = traceback.extract_tb(exc.__traceback__)
        text = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
        return _report(ok=False, kind="error", message=text, line=_line_in(file, tb))
    name = _pick(module, function)
    if name is None:
        what = f"no function {function!r}" if function else "no public function to use as the reference"
        return _report(ok=False, kind="no_function", message=what)
    return _report(ok=True, function=name, prepare_input=callable(getattr(module, "prepare_input", None)))


if __name__ == "__main__":
    sys.exit(main())
