"""Write a problem directory from its typed model: problem.yaml and inputs.yaml in the original's
format, the reference and the data files, checked like ``cacao --check`` before anything lands.

The editor works on a ``ProblemSource``: the two YAML files as mappings (what ``yaml.safe_load``
would give), the reference text and the data files picked from disk. ``render_files`` validates
them with the loader's own models (``ktt.problem.files``) and serializes those models with
``dump_yaml``: keys in the models' order, unknown keys and advisory ``gpu.*`` keys kept, defaults
never added (only what was written or set is written), multi-line text as ``|`` blocks, short
lists in flow style. So a problem loaded and saved unchanged means the same (tests assert that
``--check`` prints the same report).

Saving is all or nothing: the definition files are assembled in a hidden staging directory
beside the target, loaded and preflighted there, and only then renamed into place. For an
existing problem the old directory is swapped out in two renames under the problem's run lock
(a run cannot start meanwhile; a live run makes the save refuse), and its ``output/``,
``archive/`` and run lock are moved into the new one (a never-run problem is left without a lock
file: Save writes the definition and nothing else).
"""

from __future__ import annotations

import contextlib
import copy
import os
import re
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import yaml
from pydantic import BaseModel

from cacao_tui.problem.boundary_check import boundary_warnings
from cacao_tui.problem.names import directory_name_error
from cacao_tui.problem.tree import problem_entries
from ktt.capped_read import MAX_SOURCE_BYTES, read_text_capped
from ktt.expressions import Expression, ExpressionError
from ktt.half_types import DTYPE_ALIASES, HALF_DTYPES, HOST_CTYPE
from ktt.problem import Problem, ProblemError, load_problem
from ktt.problem.files import DTYPES, InputsFile, ProblemFile
from ktt.problem.inputs_hpp import CUDA_HEADERS
from ktt.problem.legacy import LEGACY_KEYS, convert_inline_inputs, has_legacy_form
from ktt.problem.loader import REFERENCE_FILES
from ktt.problem.yaml_io import read_yaml_mapping, read_yaml_text, validate_model
from ktt.terminal_text import safe_line

# Entries of a problem directory that are a run's, not the definition's: never copied into a
# staging directory; moved (renamed) into the saved directory.
RUN_ENTRIES = ("output", "archive", "trash", "output.lock")
SKIPPED = ("__pycache__",)
MAX_DATA_FILE_BYTES = 16 * 1024**3  # a picked data file larger than this is a mistake

PROBLEM_ORDER = (
    "name",
    "description",
    "gpu",
    "global_size_type",
    "grid",
    "reference",
    "validation",
    "tuning",
    "timing",
    "physical_floor",
    "rules",
    "cases",
)
ARG_ORDER = (
    "kind",
    "name",
    "dtype",
    "value",
    "size",
    "placements",
    "access",
    "init",
    "min",
    "max",
    "seed",
    "file_name",
    "file",
    "body",
    "validate",
)
INPUTS_ORDER = ("headers", "shared_setup", "args")


@dataclass
class ProblemSource:
    """What the editor edits. ``problem`` and ``inputs`` are the files as mappings."""

    problem: dict[str, Any]
    inputs: dict[str, Any]
    reference_text: str | None = None  # None: the reference file is left as it is on disk
    comments: dict[str, str] = field(default_factory=dict)  # file -> its leading comment block
    data_files: dict[str, Path] = field(default_factory=dict)  # name under inputs/ -> file to copy in
    converted_inline: bool = False  # read from the older inline form; saved as inputs.yaml

    @property
    def reference_type(self) -> str:
        ref = self.problem.get("reference") or {}
        if isinstance(ref, dict) and ref.get("type"):
            return str(ref["type"])
        name = str(ref.get("file") or "") if isinstance(ref, dict) else ""
        return {".py": "python", ".c": "cpu_c"}.get(Path(name).suffix, "cuda")

    @property
    def reference_name(self) -> str:
        ref = self.problem.get("reference") or {}
        name = ref.get("file") if isinstance(ref, dict) else None
        return str(name) if name else REFERENCE_FILES.get(self.reference_type, "ref_kernel.cu")


def leading_comment(text: str) -> str:
    """The comment lines (and blank lines between them) at the top of a YAML file."""
    lines = []
    for line in text.splitlines():
        if line.startswith("#") or (not line.strip() and lines):
            lines.append(line)
        else:
            break
    while lines and not lines[-1].strip():
        lines.pop()
    return "\n".join(lines) + "\n" if lines else ""


def read_problem_source(directory: Path) -> ProblemSource:
    """The editable form of an existing problem (which need not load cleanly: it is being fixed)."""
    root = Path(directory).expanduser().resolve()
    ppath = root / "problem.yaml"
    if not ppath.is_file():
        raise ProblemError(ppath, "", "file not found (a problem directory needs problem.yaml)")
    problem = read_yaml_mapping(ppath)
    comments = {"problem.yaml": leading_comment(read_yaml_text(ppath))}
    ipath = root / "inputs.yaml"
    converted = False
    if ipath.is_file():
        inputs = read_yaml_mapping(ipath)
        comments["inputs.yaml"] = leading_comment(read_yaml_text(ipath))
    elif has_legacy_form(problem):
        inputs, problem = _from_inline(root, problem)
        converted = True
    else:
        inputs = {"headers": [], "args": []}
    source = ProblemSource(problem=problem, inputs=inputs, comments=comments, converted_inline=converted)
    ref = root / source.reference_name
    with contextlib.suppress(OSError):
        if ref.is_file() and ref.resolve().is_relative_to(root):
            source.reference_text = read_text_capped(ref, MAX_SOURCE_BYTES, errors="replace")  # regular, capped
    return source


def as_cpp(value: Any, env: dict[str, Any]) -> Any:
    """An inline-form size or grid value (a Python expression: // is floor division) written so
    inputs.yaml and the newer problem.yaml (C++ expressions: // starts a comment) mean the same:
    kept when both readings agree, ``//`` as ``/`` where that gives the same number, else the number."""
    if not isinstance(value, str):
        return value
    try:
        meant = Expression(value, python=True).evaluate(env)
    except ExpressionError:
        return value  # the loader reports it
    for text in (value, value.replace("//", "/")):
        try:
            if Expression(text).evaluate(env) == meant:
                return text
        except ExpressionError:
            continue
    return meant


def _from_inline(root: Path, problem: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The older inline form as inputs.yaml plus a problem.yaml that states what the loader assumed.

    The loader reads an inline problem's grid as threads and its reference block from the flat
    keys (8 x 8 when absent); saved in the newer form these become explicit, so the meaning stays.
    """
    loaded = load_problem(root)
    inputs = convert_inline_inputs(problem, root / "problem.yaml")
    env = loaded.primary.scalars
    for arg in inputs["args"]:
        if arg.get("kind") == "buffer" and "size" in arg:
            arg["size"] = as_cpp(arg["size"], env)
    out = {k: copy.deepcopy(v) for k, v in problem.items() if k not in LEGACY_KEYS}
    if isinstance(out.get("grid"), dict):
        out["grid"] = {axis: as_cpp(value, env) for axis, value in out["grid"].items()}
    out["global_size_type"] = loaded.global_size_type
    ref = dict(out.get("reference") or {})
    for key in ("block_x", "block_y", "block_z"):
        ref.pop(key, None)
    if loaded.reference.type == "cuda":
        b = loaded.reference.block
        ref["block"] = {"x": b.x, "y": b.y, "z": b.z}
    out["reference"] = ref
    return inputs, out


# ---- serializing ---------------------------------------------------------------------------
class _Flow(list):  # type: ignore[type-arg]
    """A list written in flow style: ``[host, define]``."""


class _FlowMap(dict):  # type: ignore[type-arg]
    """A mapping written in flow style: ``{x: 256}``."""


class _Dumper(yaml.SafeDumper):
    def ignore_aliases(self, data: Any) -> bool:
        return True


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    if "\n" in value.rstrip("\n") or value.endswith("\n"):
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|")
    return dumper.represent_scalar("tag:yaml.org,2002:str", value)


_Dumper.add_representer(str, _represent_str)
_Dumper.add_representer(_Flow, lambda d, v: d.represent_sequence("tag:yaml.org,2002:seq", v, flow_style=True))
_Dumper.add_representer(_FlowMap, lambda d, v: d.represent_mapping("tag:yaml.org,2002:map", v, flow_style=True))


def _scalar(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float, bool))


def _ordered(data: dict[str, Any], order: tuple[str, ...]) -> dict[str, Any]:
    out = {k: data[k] for k in order if k in data}
    out.update({k: v for k, v in data.items() if k not in out})
    return out


def _styled(value: Any, depth: int = 0) -> Any:
    """Flow style for short lists and mappings of plain values; block style for the rest."""
    if isinstance(value, dict):
        items = {str(k): _styled(v, depth + 1) for k, v in value.items()}
        short = len(items) <= 6 and all(_scalar(v) and "\n" not in str(v) for v in items.values())
        flat = sum(len(str(k)) + len(str(v)) + 4 for k, v in items.items()) <= 60
        return _FlowMap(items) if depth > 0 and short and flat and items else items
    if isinstance(value, list):
        items = [_styled(v, depth + 1) for v in value]
        if all(_scalar(v) and "\n" not in str(v) for v in items) and sum(len(str(v)) + 2 for v in items) <= 70:
            return _Flow(items)
        return items
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return int(value)  # 6.0 -> 6: the loader reads both as the same number
    return value


def dump_yaml(data: dict[str, Any], comment: str = "") -> str:
    text = yaml.dump(data, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=100, indent=2)
    return comment + text


def _dumped(model: BaseModel) -> dict[str, Any]:
    return model.model_dump(by_alias=True, exclude_unset=True)


def render_problem_yaml(model: ProblemFile, comment: str = "") -> str:
    data = _ordered(_dumped(model), PROBLEM_ORDER)
    for key in ("grid",):
        if isinstance(data.get(key), dict):
            data[key] = _ordered(data[key], ("x", "y", "z"))
    ref = data.get("reference")
    if isinstance(ref, dict):
        data["reference"] = _ordered(ref, ("type", "file", "function", "block"))
    if isinstance(data.get("cases"), list):
        data["cases"] = [_ordered(c, ("name", "scalars", "files", "duration_s")) for c in data["cases"]]
    styled = {k: _styled(v, 0) for k, v in data.items()}
    # A grid of expressions reads better in block style, one axis a line.
    if isinstance(styled.get("grid"), dict):
        styled["grid"] = dict(styled["grid"])
    return dump_yaml(styled, comment)


def render_inputs_yaml(model: InputsFile, comment: str = "") -> str:
    data = _ordered(_dumped(model), INPUTS_ORDER)
    data["args"] = [_ordered(a, ARG_ORDER) for a in data.get("args", [])]
    styled: dict[str, Any] = {}
    for key, value in data.items():
        if key == "args":
            styled[key] = [{k: _styled(v, 2) for k, v in a.items()} for a in value]
        elif key == "headers":
            styled[key] = _Flow(value)
        else:
            styled[key] = _styled(value, 0)
    return dump_yaml(styled, comment)


def validated_models(source: ProblemSource, target: Path) -> tuple[ProblemFile, InputsFile]:
    """The two files through the loader's models: a shape mistake is one line naming the file."""
    pm = validate_model(ProblemFile, source.problem, target / "problem.yaml")
    im = validate_model(InputsFile, source.inputs, target / "inputs.yaml")
    return pm, im


def render_files(source: ProblemSource, target: Path) -> dict[str, str]:
    """File name (relative to the problem) -> text, exactly what a save writes."""
    pm, im = validated_models(source, target)
    files = {
        "problem.yaml": render_problem_yaml(pm, source.comments.get("problem.yaml", "")),
        "inputs.yaml": render_inputs_yaml(im, source.comments.get("inputs.yaml", "")),
    }
    if source.reference_text is not None:
        files[source.reference_name] = source.reference_text
    return files


# ---- staging, checking, saving -----------------------------------------------------------
def expected_bytes(source: ProblemSource, buffer: str) -> int | None:
    """The byte count a data file for ``buffer`` must hold at the inputs.yaml values, when it can be computed."""
    from ktt.expressions import Expression, ExpressionError

    env: dict[str, Any] = {}
    args = source.inputs.get("args") or []
    try:
        for a in args:
            if isinstance(a, dict) and a.get("kind") == "scalar":
                env[str(a["name"])] = Expression(a["value"]).evaluate(env)
        for a in args:
            if isinstance(a, dict) and a.get("kind") == "buffer" and a.get("name") == buffer:
                count = Expression(a["size"]).evaluate_int(env)
                return count * DTYPES[str(a.get("dtype") or "float")][1]
    except (ExpressionError, KeyError, TypeError, ValueError):
        return None
    return None


def check_data_file(source: ProblemSource, buffer: str, picked: Path) -> str | None:
    """Why ``picked`` cannot be the data file of ``buffer`` (None when it can)."""
    try:
        st = picked.stat()
    except OSError as exc:
        return f"{picked}: {exc.strerror or 'cannot be read'}"
    if not picked.is_file():
        return f"{picked}: not a regular file"
    if st.st_size > MAX_DATA_FILE_BYTES:
        return f"{picked}: {st.st_size:,} bytes, more than {MAX_DATA_FILE_BYTES:,}"
    want = expected_bytes(source, buffer)
    if want is not None and st.st_size != want:
        return f"{picked.name} holds {st.st_size:,} bytes; buffer {buffer} needs {want:,} at the inputs.yaml values"
    return None


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def _staged(staging: Path, name: str, file: Path, field: str, under: str = "") -> Path:
    """Where ``name`` (a path relative to the problem, from the edited files) lands in ``staging``;
    ProblemError, before anything is written, when it could land anywhere else: absolute, with
    ``..``, through a link, or into the run's own entries (output/, archive/, the run lock)."""
    rel = PurePosixPath(name)
    parts = (*PurePosixPath(under).parts, *rel.parts) if under else rel.parts
    why = None
    if not name or rel.is_absolute() or "\\" in name or not parts:
        why = "is not a path inside the problem directory"
    elif any(part in ("..", "") for part in parts):
        why = "climbs out of the problem directory (..)"
    elif parts[0] in RUN_ENTRIES or parts[0].startswith(".cacao-") or parts[0] in SKIPPED:
        why = f"would land in {parts[0]}, which is the run's, not the problem's"
    if why is None:
        here = staging
        for part in parts[:-1]:
            here = here / part
            if here.is_symlink() or (here.exists() and not here.is_dir()):
                why = f"passes through {part}, which is a link or not a directory"
                break
    if why is not None:
        raise ProblemError(file, field, f"{safe_line(name, 80)!r} {why}; the editor writes only inside it")
    return staging.joinpath(*parts)


def _kept_out(name: str) -> bool:
    """A top-level entry that is the run's, not the problem's: never copied into a save."""
    return name in RUN_ENTRIES or name in SKIPPED or name.startswith(".cacao-")


def _write_new(path: Path, data: bytes) -> None:
    """Write ``path`` inside the staging directory: a link or file already there (copied from the
    problem) is replaced, never written through."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_symlink() or path.exists():
        path.unlink()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def _stage(source: ProblemSource, target: Path, staging: Path, existing: bool) -> None:
    """Fill ``staging`` with the definition: the existing files (data hard-linked), then the edits.

    Every path the edits name is checked first (``_staged``), so a refused one writes nothing.
    """
    files = render_files(source, target)
    planned = [
        (_staged(staging, name, target / "problem.yaml", "reference.file" if name == source.reference_name else ""),
         text.encode("utf-8"))
        for name, text in files.items()
    ]  # fmt: skip
    picked = [
        (_staged(staging, name, target / "inputs.yaml", "file_name", under="inputs"), src)
        for name, src in source.data_files.items()
    ]
    if existing and target.is_dir():
        for rel, kind in problem_entries(target, skip=_kept_out):  # all of them checked before the first is copied
            src, dst = target / rel, staging / rel
            if kind == "link":
                os.symlink(os.readlink(src), dst)
            elif kind == "dir":
                os.mkdir(dst)
            else:
                _link_or_copy(str(src), str(dst))
        # The copies may hold links the checks above could not see yet: check again, still before writing.
        planned = [(_staged(staging, str(path.relative_to(staging)), target / "problem.yaml", "reference.file"), data)
                   for path, data in planned]  # fmt: skip
        picked = [(_staged(staging, str(dst.relative_to(staging)), target / "inputs.yaml", "file_name"), src)
                  for dst, src in picked]  # fmt: skip
    for path, data in planned:
        _write_new(path, data)
    for dst, src in picked:
        dst.parent.mkdir(parents=True, exist_ok=True)
        if dst.exists() or dst.is_symlink():
            dst.unlink()
        shutil.copyfile(src, dst)


def _rerooted(exc: ProblemError, staging: Path, target: Path) -> ProblemError:
    try:
        file = target / exc.file.relative_to(staging)
    except ValueError:
        file = exc.file
    return ProblemError(file, exc.field, exc.message.replace(str(staging), str(target)), exc.hint)


@dataclass
class CheckResult:
    """What ``--check`` says about a source, as the editor's live panel shows it."""

    ok: bool
    error: str | None  # the one-line error when not ok
    report: str  # the --check report (empty when not ok)
    inputs_hpp: str
    signature: str  # the reference signature the boundary asks for
    warnings: list[str]
    boundary: list[str] = field(default_factory=list)  # where the reference's declaration differs from it


def reference_signature(problem: Problem) -> str:
    """The reference's expected declaration, per type (docs/REFERENCE_IMPLEMENTATION_GUIDE.md)."""
    ref = problem.reference
    func = ref.function or "reference"
    if ref.type == "cuda":
        return f'extern "C" __global__ void {func}({problem.boundary_signature()})'
    if ref.type == "cpu_c":
        params = ", ".join(f"{'const ' if b.access == 'read' else ''}{b.host_ctype}* {b.name}" for b in problem.buffers)
        return f"void {func}({params})  /* scalars arrive as -D macros */"
    return f"def {func}(scalars, buffers):  # returns the validated buffer's values"


def _private_dir(parent: Path, prefix: str) -> Path:
    path = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    os.chmod(path, 0o777 & ~_umask())
    return path


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


Preflight = Callable[[Problem], list[Any]]


def _default_preflight(problem: Problem) -> list[Any]:
    from ktt.problem.preflight import preflight  # NVRTC and the host compilers: only when checking

    return preflight(problem)


def check_source(
    source: ProblemSource, target: Path, *, existing: bool, preflight: Preflight | None = None
) -> CheckResult:
    """Stage the source in a scratch directory beside ``target``, load and preflight it, clean up."""
    from cacao_tui.problem.summary import render_check
    from ktt.problem.inputs_hpp import render_inputs_hpp

    target = Path(target).expanduser().resolve()
    parent = target.parent
    scratch = Path(tempfile.mkdtemp(prefix=f".cacao-check-{target.name}-", dir=parent if parent.is_dir() else None))
    staging = scratch / target.name
    staging.mkdir()
    try:
        try:
            _stage(source, target, staging, existing)
            problem = load_problem(staging)
            steps = (preflight or _default_preflight)(problem)
        except ProblemError as exc:
            return CheckResult(False, str(_rerooted(exc, staging, target)), "", "", "", [])
        hpp = render_inputs_hpp(problem)
        report = render_check(problem, steps).replace(str(staging), str(target))
        try:
            declared = boundary_warnings(problem, read_text_capped(problem.reference.file, MAX_SOURCE_BYTES))
        except OSError:
            declared = []
        signature = reference_signature(problem)
        return CheckResult(True, None, report, hpp, signature, list(problem.warnings), declared)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def save_problem(source: ProblemSource, target: Path, *, existing: bool, preflight: Preflight | None = None) -> Problem:
    """Write the problem at ``target`` only if it passes --check; raise ProblemError otherwise.

    New (``existing=False``): ``target`` must not exist. Existing: its run files are kept.
    """
    target = Path(target).expanduser().absolute()
    parent = target.parent
    if not parent.is_dir():
        raise ProblemError(parent, "", "no such directory to save the problem in")
    if not existing:
        why = directory_name_error(target.name)
        if why:
            raise ProblemError(target, "name", why)
        if target.exists() or target.is_symlink():
            raise ProblemError(target, "", "already exists; choose another name")
    elif not (target / "problem.yaml").is_file():
        raise ProblemError(target / "problem.yaml", "", "file not found (not a problem directory to edit)")
    staging = _private_dir(parent, f".{target.name}.save-")
    try:
        _stage(source, target, staging, existing)
        try:
            problem = load_problem(staging)
            (preflight or _default_preflight)(problem)
        except ProblemError as exc:
            raise _rerooted(exc, staging, target) from None
        if existing:
            _swap_in(staging, target)
        else:
            if target.exists():
                raise ProblemError(target, "", "already exists; choose another name")
            os.rename(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return load_problem(target)


def _swap_in(staging: Path, target: Path) -> None:
    """Replace ``target`` with ``staging`` and move the run's entries across, under the run lock."""
    from cacao_tui.store.run_lock import RunLocked, acquire_run_lock, lock_path

    had_lock_file = lock_path(target).exists() or lock_path(target).is_symlink()
    try:
        lock = acquire_run_lock(target, "cacao problem editor: saving")
    except RunLocked as exc:
        raise ProblemError(target, "", f"a run is using this problem; stop it before saving ({exc})") from None
    old = Path(tempfile.mkdtemp(prefix=f".{target.name}.old-", dir=target.parent))
    os.rmdir(old)
    try:
        os.rename(target, old)
        try:
            os.rename(staging, target)
        except OSError:
            os.rename(old, target)
            raise
        for name in RUN_ENTRIES:
            if (old / name).exists() or (old / name).is_symlink():
                os.rename(old / name, target / name)
        if not had_lock_file:
            # A never-run problem keeps only its definition. Unlinked while still held: a run
            # that opened this file meanwhile is refused, one that starts later makes its own.
            with contextlib.suppress(OSError):
                os.unlink(lock_path(target))
    finally:
        lock.release()
    shutil.rmtree(old, ignore_errors=True)


def default_reference_function(name: str) -> str:
    """The reference function a new problem called ``name`` starts with: ``vadd`` -> ``vadd_ref``."""
    func = re.sub(r"[^A-Za-z0-9_]", "_", name) or "problem"
    return f"{'p_' if func[0].isdigit() else ''}{func}_ref"


def new_source(name: str, reference_type: str = "cuda") -> ProblemSource:
    """A starting point for a new problem: saxpy-shaped, with a reference that fails loudly."""
    func = default_reference_function(name)
    problem: dict[str, Any] = {
        "name": name,
        "description": "",
        "gpu": {"index": 0},
        "grid": {"x": "(LEN + 255) / 256"},
        "reference": {"type": reference_type, "file": REFERENCE_FILES[reference_type], "function": func},
        "validation": {"tolerance": 1e-4},
        "tuning": {"duration_s": 20},
    }
    if reference_type == "cuda":
        problem["reference"]["block"] = {"x": 256}
    inputs = {
        "headers": [],
        "args": [
            {"kind": "scalar", "name": "LEN", "dtype": "int", "value": "1 << 20"},
            {"kind": "buffer", "name": "x", "dtype": "float", "size": "LEN", "access": "read"},
            {"kind": "buffer", "name": "y", "dtype": "float", "size": "LEN", "access": "write", "validate": True},
        ],
    }
    return ProblemSource(problem=problem, inputs=inputs, reference_text=reference_stub(reference_type, func, inputs))


# The line of each stub that fails loudly; a reference that still holds it is not written yet.
STUB_LINES = {
    "cuda": "__trap();  // not written yet: fail loudly rather than produce wrong reference values",
    "cpu_c": "abort(); /* not written yet */",
    "python": 'raise NotImplementedError("write the reference in ref.py")',
}


def is_reference_stub(text: str) -> bool:
    """Whether a reference still holds the stub's failing line (it compiles, and traps when run)."""
    return any(line in text for line in STUB_LINES.values())


def reference_stub(reference_type: str, func: str, inputs: dict[str, Any]) -> str:
    """A reference with the right signature that fails loudly until it is written (a trap,
    ``abort()``, ``NotImplementedError``): a new problem never gets a reference that silently
    computes nothing. The one stub generator (the editor's starting point and its reference
    type switch)."""
    ctypes = {k: v[0] for k, v in DTYPES.items()}
    params, buffers, halves = [], [], set()
    for a in inputs.get("args") or []:
        if not isinstance(a, dict):
            continue
        dtype = str(a.get("dtype") or ("float" if a.get("kind") == "buffer" else "int"))
        dtype = DTYPE_ALIASES.get(dtype, dtype)
        ctype = ctypes.get(dtype, "float")
        if a.get("kind") == "buffer":
            const = "const " if (a.get("access") or "read") == "read" else ""
            params.append(f"{const}{ctype}* {a.get('name')}")
            # a C reference sees a 16-bit float as its bit pattern (ktt.half_types)
            buffers.append(f"{const}{HOST_CTYPE if dtype in HALF_DTYPES else ctype}* {a.get('name')}")
            halves |= {dtype} & HALF_DTYPES
        elif "runtime" in (a.get("placements") or []):
            params.append(f"{ctype} {a.get('name')}")
    if reference_type == "cuda":
        includes = "".join(f"#include <{CUDA_HEADERS[d]}>\n" for d in sorted(halves))
        return (
            "// Launched with the problem's grid and reference.block; 'define' scalars are -D macros.\n"
            "// Replace the body with the real computation.\n"
            f"{includes}"
            f'extern "C" __global__ void {func}({", ".join(params)}) {{\n'
            f"    {STUB_LINES['cuda']}\n"
            "}\n"
        )
    if reference_type == "cpu_c":
        stdint = "#include <stdint.h>\n" if halves else ""
        return (
            "/* The buffers in args order (read-only ones const); scalars arrive as -D macros.\n"
            "   Replace the body with the real computation. */\n"
            f"{stdint}#include <stdlib.h>\n\n"
            f"void {func}({', '.join(buffers)}) {{\n"
            f"    {STUB_LINES['cpu_c']}\n"
            "}\n"
        )
    return (
        '"""The reference: returns the validated buffer\'s values."""\n\n'
        "import numpy as np  # noqa: F401\n\n\n"
        f"def {func}(scalars, buffers):\n"
        f"    {STUB_LINES['python']}\n"
    )
