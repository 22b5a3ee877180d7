"""``cacao import``'s work for one module: probe it in a contained child, then write the problem.

The child (``probe.py``) runs the module's code behind ``contain.py``'s walls, with a time limit,
the allow-listed environment, no GPU and its own process group, and reports through stdout; the
report is untrusted (``report.py`` bounds it) and every data file it names is checked against its
tensor's shape. The problem is written into a staging folder beside the target, loaded as any
problem is (``ktt.problem.load_problem``: every file and size checked), and only then renamed into
place: a module that fails anywhere leaves nothing behind.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from cacao_tui.kernelbench import writer
from cacao_tui.kernelbench.probe import MARKER
from cacao_tui.kernelbench.report import ProbeReport, TensorInfo
from cacao_tui.problem.names import directory_name_error
from ktt import procs
from ktt.capped_read import MAX_SOURCE_BYTES, read_bytes_capped
from ktt.problem import ProblemError, load_problem

TIMEOUT_S = 300.0  # one module's probe: torch's import, the model, get_inputs(), the shapes
MEMORY_GB = 16.0  # the probe's address space (RLIMIT_AS): torch itself maps under 1 GiB


class ImportRefused(Exception):
    """One module not imported; ``str()`` is the one line to show (it names the file)."""


@dataclass(frozen=True)
class Imported:
    source: Path
    directory: Path
    inputs: int
    params: int
    outputs: int
    files: int  # inputs/ data files
    notes: tuple[str, ...] = ()


def problem_name(file: Path, level: int | None) -> str:
    stem = "".join(c if c.isalnum() or c in "_-." else "_" for c in file.stem).strip("._-") or "module"
    name = f"level{level}_{stem}" if level is not None else stem
    return name[:100]


def probe_module(file: Path, work: Path, timeout_s: float, memory_bytes: int) -> ProbeReport:
    """Run the probe child on ``file`` with ``work`` as its output folder; its validated report."""
    cmd = [sys.executable, "-m", "cacao_tui.kernelbench.probe", str(file), str(work), str(memory_bytes)]
    env = procs.child_env(PYTHONDONTWRITEBYTECODE="1", PYTHONUNBUFFERED="1")
    env["CUDA_VISIBLE_DEVICES"] = ""  # the probe needs no GPU, and must not take one
    env["PYTHONPATH"] = os.pathsep.join(p for p in [_package_root(), env.get("PYTHONPATH", "")] if p)
    with tempfile.TemporaryDirectory(prefix="cacao-import-cwd-") as cwd:
        res = procs.run(cmd, timeout_s=timeout_s, env=env, cwd=cwd, keep_lines=200)
    where = file.name
    if res.timed_out:
        raise ImportRefused(f"{where}: took longer than {timeout_s:g} s to import (stopped; --timeout raises it)")
    for line in reversed(res.stdout.splitlines()):
        if line.startswith(MARKER):
            try:
                return ProbeReport.model_validate(json.loads(line[len(MARKER) :]))
            except (ValueError, ValidationError) as exc:
                first = str(exc).splitlines()
                why = first[-1][:200] if first else exc
                raise ImportRefused(f"{where}: its probe's report is not valid ({why})") from None
    tail = (res.stderr.strip().splitlines() or [f"exit status {res.returncode}"])[-1]
    if res.returncode is not None and res.returncode < 0:
        tail = f"killed by signal {-res.returncode} ({tail[:200]})"
    raise ImportRefused(f"{where}: the import stopped without a report: {tail[:300]}")


def _package_root() -> str:
    """The folder holding cacao_tui and ktt, so the child finds this code however cacao was started."""
    return str(Path(__file__).resolve().parents[2])


def _refusal(file: Path, report: ProbeReport) -> ImportRefused:
    at = f"line {report.line}: " if report.line else ""
    return ImportRefused(f"{file.name}: {at}{report.message or report.kind or 'failed'}")


def _check_data(report: ProbeReport, lay: writer.Layout, work: Path) -> dict[Path, str]:
    """Each data file the layout needs (probe name -> buffer file name), present with its exact size."""
    moves: dict[Path, str] = {}
    wanted: list[tuple[str, str, TensorInfo]] = []
    for i, (name, t) in enumerate(lay.inputs):
        if isinstance(t, TensorInfo) and (t.init is None or t.init.kind == "file" or t.dtype == "bool"):
            wanted.append((f"input{i}.bin", name, t))
    wanted += [(f"param{i}.bin", name, t) for i, (name, t) in enumerate(lay.params)]
    for probe_name, name, t in wanted:
        path = work / "inputs" / probe_name
        nbytes = t.elements * t.itemsize
        try:
            st = path.lstat()
        except OSError:
            raise ImportRefused(f"the probe wrote no data for {t.source} ({probe_name})") from None
        if not path.is_file() or path.is_symlink() or st.st_size != nbytes:
            raise ImportRefused(f"the probe's data for {t.source} holds {st.st_size:,} bytes, expected {nbytes:,}")
        moves[path] = f"{name}.bin"
    return moves


def import_module(
    file: Path, to: Path, level: int | None = None, *, timeout_s: float = TIMEOUT_S, memory_gb: float = MEMORY_GB
) -> Imported:
    """Import one module into ``to/NAME``; ImportRefused (one line) when it cannot be, nothing written."""
    name = problem_name(file, level)
    if why := directory_name_error(name):
        raise ImportRefused(f"{file.name}: no problem name can be made from it ({why})")
    target = to / name
    if target.exists() or target.is_symlink():
        raise ImportRefused(f"{file.name}: {target} already exists (remove it, or import --to another folder)")
    try:
        source = read_bytes_capped(file, MAX_SOURCE_BYTES)
        text = source.decode("utf-8")
    except OSError as exc:
        raise ImportRefused(f"{file.name}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ImportRefused(f"{file.name}: not UTF-8 text") from None
    clash = [g for g in writer.RESERVED_GLOBALS if re.search(rf"^(def|class)?\s*{g}\b", text, re.M)]
    if clash:
        raise ImportRefused(f"{file.name}: defines {clash[0]}, a name the reference written from it needs")
    with tempfile.TemporaryDirectory(prefix="cacao-import-") as tmp:
        work = Path(tmp)
        report = probe_module(file.resolve(), work, timeout_s, int(memory_gb * 2**30))
        if not report.ok:
            raise _refusal(file, report)
        if not report.outputs:
            raise ImportRefused(f"{file.name}: Model.forward returned no tensor")
        lay = writer.Layout(report)
        moves = _check_data(report, lay, work)
        to.mkdir(parents=True, exist_ok=True)  # only now: a refused module leaves no folder behind
        staging = Path(tempfile.mkdtemp(prefix=f".{name}.importing-", dir=to))
        try:
            _write(staging, lay, name, level, file, source, moves)
            problem = load_problem(staging)  # every file, size and expression, as --check reads them
            staging.rename(target)
        except ProblemError as exc:
            shutil.rmtree(staging, ignore_errors=True)
            raise ImportRefused(f"{file.name}: the problem written from it does not load: {exc.line()}") from None
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
    notes = tuple(f"{file.name}: {w}" for w in report.walls)
    if report.random_in_forward:
        notes += (f"{file.name}: the forward draws random numbers ({', '.join(report.random_in_forward[:3])}): "
                  "no kernel can validate against it",)  # fmt: skip
    del problem
    return Imported(file, target, len(lay.inputs), len(lay.params), len(lay.outputs), len(moves), notes)


def _write(
    d: Path, lay: writer.Layout, name: str, level: int | None, file: Path, source: bytes, moves: dict[Path, str]
) -> None:
    (d / "inputs").mkdir()
    for src, dst in moves.items():
        shutil.move(src, d / "inputs" / dst)
    (d / "model.py").write_bytes(source)
    (d / "problem.yaml").write_text(writer.problem_yaml(lay, name, level, file.name), encoding="utf-8")
    (d / "inputs.yaml").write_text(writer.inputs_yaml(lay), encoding="utf-8")
    (d / "ref.py").write_text(writer.ref_py(lay, source.decode("utf-8"), file.name), encoding="utf-8")
    (d / "README.md").write_text(writer.readme(lay, name, level, file.name, file.resolve()), encoding="utf-8")
    with contextlib.suppress(OSError):
        os.chmod(d, 0o755)
