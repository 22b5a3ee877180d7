"""The input data of one shape: deterministic host arrays for each buffer of inputs.yaml.

Input set 0 depends only on each buffer's seed (its ``seed:``, else a hash of its name),
so every run of a problem sees the same primary inputs (``random``: uniform in [min, max];
``normal``, our extension: mean + std * a standard normal draw). Set 1 and later are the fresh
inputs a configuration must also pass before it may be reported as best; they also mix
in the run's ``--seed``. Buffers read from files, or filled by a custom C++ body, are the
same in every set. Outputs are made here too: as in the original, every buffer, ``write``
included, starts each run with its ``init`` data (a kernel may accumulate into ``zeros``);
only under ``validation.poison_outputs`` is a write buffer poisoned on the device instead.

``init: custom`` means what it means in the original: ``body`` is the body of a host
function ``std::vector<dtype> gen_<name>()``, with the ``host`` scalars in scope as
``inline constexpr`` values of the shape, after ``headers`` and ``shared_setup`` (a bf16 or
half buffer's body returns ``std::vector<ktt_bf16>`` / ``std::vector<ktt_half>``, two-byte
types that convert from and to float: ktt.half_types). All the
generators of a shape go into one C++ program, built once (content-addressed, in the host
build cache) and run in its own process with a time limit; it writes each buffer to a
file, and a vector of the wrong length is an error naming the buffer.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import textwrap
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ktt import half_types, procs
from ktt.capped_read import MAX_YAML_BYTES, read_text_capped
from ktt.half_types import HALF_DTYPES
from ktt.host_compiler import HostCompileError, build_executable, default_host_cache_dir
from ktt.problem.errors import ProblemError
from ktt.problem.files import INTEGER_DTYPES
from ktt.problem.model import Buffer, Problem, Shape
from ktt.problem.yaml_io import yaml_value_lines

GENERATOR_TIMEOUT_S = 600.0
GENERATED_FILE = "<generated>"


class GeneratorError(ProblemError):
    """A custom initialiser that does not build or run: one line naming inputs.yaml and the field."""


def buffer_seed(buffer: Buffer) -> int:
    return buffer.seed if buffer.seed is not None else zlib.crc32(buffer.name.encode())


def rng_for(buffer: Buffer, set_index: int, run_seed: int) -> np.random.Generator:
    base = buffer_seed(buffer)
    if set_index == 0:
        return np.random.default_rng([base, 0])
    return np.random.default_rng([base, set_index, run_seed])


def make_buffer(
    problem: Problem, shape: Shape, buffer: Buffer, set_index: int, run_seed: int, work_dir: Path
) -> np.ndarray:
    n = shape.sizes[buffer.name]
    dtype = np.dtype(buffer.numpy_dtype)
    if problem.poisoned(buffer):
        return np.zeros(n, dtype)  # poisoned on the device before every run; references start from zeros
    if buffer.init == "zeros":
        return np.zeros(n, dtype)
    if buffer.init == "file":
        path = shape.files[buffer.name]
        return np.fromfile(path, dtype=dtype, count=n)
    if buffer.init == "custom":
        return generated_inputs(problem, shape, work_dir)[buffer.name].copy()
    rng = rng_for(buffer, set_index, run_seed)
    if buffer.init == "normal":  # our extension (torch.randn's inputs): drawn in float64, then rounded
        mean, std = buffer.normal_params
        values = rng.standard_normal(n) * std + mean
        if buffer.dtype in HALF_DTYPES:
            return half_types.encode(values.astype(np.float32), buffer.dtype)
        return values.astype(dtype)
    low, high = buffer.value_range
    if buffer.dtype in HALF_DTYPES:  # uniform in float32, rounded to the 16-bit float (nearest even)
        values = rng.random(n, dtype=np.float32) * np.float32(high - low) + np.float32(low)
        return half_types.encode(values, buffer.dtype)
    if dtype.kind == "f":
        values = rng.random(n, dtype=np.float64 if dtype.itemsize == 8 else np.float32)
        return (values * dtype.type(high - low) + dtype.type(low)).astype(dtype, copy=False)
    return rng.integers(int(low), int(high) + 1, n, dtype=dtype)


def make_inputs(problem: Problem, shape: Shape, set_index: int, run_seed: int, work_dir: Path) -> dict[str, np.ndarray]:
    return {b.name: make_buffer(problem, shape, b, set_index, run_seed, work_dir) for b in problem.buffers}


# -- custom generators ---------------------------------------------------------------------


@dataclass
class GeneratorSource:
    """The generator program of one shape, and where its lines came from (for error messages)."""

    text: str
    # line of the generated program -> (field, line in inputs.yaml or None, line within the field)
    origins: dict[int, tuple[str, int | None, int]] = field(default_factory=dict)


def custom_buffers(problem: Problem) -> list[tuple[int, Buffer]]:
    return [(i, a) for i, a in enumerate(problem.args) if isinstance(a, Buffer) and a.init == "custom"]


def _generator_type(buffer: Buffer) -> str:
    """The element type a custom body returns: the C type, or ktt_bf16 / ktt_half for a 16-bit float."""
    return half_types.GENERATOR_CTYPES.get(buffer.dtype, buffer.ctype)


def _literal(value: int | float, dtype: str) -> str:
    if dtype in INTEGER_DTYPES:
        return str(int(value))
    text = repr(float(value))
    return f"{text}f" if dtype == "float" else text


def _block_start(problem: Problem, key_path: tuple[object, ...], lines: dict[tuple[object, ...], int]) -> int | None:
    """Line in inputs.yaml of a literal block's first content line (``body: |``), else None."""
    start = lines.get(key_path)
    if start is None:
        return None
    try:
        text = read_text_capped(problem.inputs_yaml, MAX_YAML_BYTES).splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    if start > len(text):
        return None
    head = text[start - 1].split("#", 1)[0].rstrip()
    return start + 1 if head.endswith(("|", "|-", "|+")) else None


def generator_source(problem: Problem, shape: Shape) -> GeneratorSource:
    """One C++ program with every custom generator of ``shape`` and a main that writes them out."""
    out = GeneratorSource("")
    lines: list[str] = []
    key_lines = yaml_value_lines(problem.inputs_yaml) if problem.inputs_yaml.name == "inputs.yaml" else {}

    def emit(text: str) -> None:
        lines.extend(text.split("\n"))

    def user(text: str, fld: str, key_path: tuple[object, ...]) -> None:
        body = textwrap.dedent(text).rstrip("\n")
        start = _block_start(problem, key_path, key_lines)
        for k, line in enumerate(body.split("\n"), start=1):
            lines.append(line)
            out.origins[len(lines)] = (fld, start + k - 1 if start is not None else None, k)

    emit(f"// init: custom generators of problem '{problem.name}', shape '{shape.name}' (generated)")
    for header in ("cstddef", "cstdint", "cstdio", "cstring", "exception", "random", "string", "vector"):
        emit(f"#include <{header}>")
    for header in problem.headers:
        emit(f"#include {header}" if header.startswith(("<", '"')) else f'#include "{header}"')
    customs = custom_buffers(problem)
    if any(b.dtype in HALF_DTYPES for _, b in customs):
        emit(half_types.C_HELPERS.rstrip("\n"))
        emit(half_types.CXX_TYPES.rstrip("\n"))
    host = [s for s in problem.scalars if "host" in s.placements]
    if host:
        emit("// host scalars of this shape")
        for s in host:
            emit(f"inline constexpr {s.ctype} {s.name} = {_literal(shape.scalars[s.name], s.dtype)};")
    if problem.shared_setup.strip():
        emit("// shared_setup")
        user(problem.shared_setup, "shared_setup", ("shared_setup",))
    for i, b in customs:
        emit(f"inline std::vector<{_generator_type(b)}> gen_{b.name}() {{")
        user(b.body or "", f"args[{i}] ({b.name}).body", ("args", i, "body"))
        emit("}")
    emit("static int ktt_write(const std::string& path, const void* data, size_t bytes) {")
    emit('    std::FILE* f = std::fopen(path.c_str(), "wb");')
    emit("    if (!f) return 1;")
    emit("    size_t done = bytes ? std::fwrite(data, 1, bytes, f) : 0;")
    emit("    return (std::fclose(f) != 0 || done != bytes) ? 1 : 0;")
    emit("}")
    emit("int main(int argc, char** argv) {")
    emit("    if (argc < 2) return 2;")
    emit("    const std::string dir = argv[1];")
    for _, b in customs:
        n = shape.sizes[b.name]
        emit("    try {")
        emit(f"        std::vector<{_generator_type(b)}> v = gen_{b.name}();")
        emit(f"        if (v.size() != (size_t){n}ULL) {{")
        emit(f'            std::fprintf(stderr, "ktt-gen-size {b.name} %zu\\n", v.size());')
        emit("            return 3;")
        emit("        }")
        nbytes = f"v.size() * sizeof({_generator_type(b)})"
        emit(f'        if (ktt_write(dir + "/{b.name}.bin", v.data(), {nbytes})) return 5;')
        emit("    } catch (const std::exception& e) {")
        emit(f'        std::fprintf(stderr, "ktt-gen-exception {b.name} %s\\n", e.what());')
        emit("        return 4;")
        emit("    } catch (...) {")
        emit(f'        std::fprintf(stderr, "ktt-gen-exception {b.name} (not a std::exception)\\n");')
        emit("        return 4;")
        emit("    }")
    emit("    return 0;")
    emit("}")
    out.text = "\n".join(lines) + "\n"
    return out


def _compile_error(problem: Problem, src: GeneratorSource, exc: HostCompileError) -> GeneratorError:
    """The first compiler error as one line: inputs.yaml, the field, its line, the message."""
    where = problem.inputs_yaml
    for d in exc.errors:
        origin = src.origins.get(d.line)
        if origin is None:
            continue
        fld, yaml_line, k = origin
        at = f"line {yaml_line}" if yaml_line is not None else f"line {k} of {fld.rsplit('.', 1)[-1]}"
        return GeneratorError(where, fld, f"{at}: {d.message} (host C++ compiler)")
    if exc.errors:
        d = exc.errors[0]
        near = f"; headers: {', '.join(problem.headers)}" if problem.headers else ""
        return GeneratorError(where, "init: custom", f"{d.message} (host C++ compiler{near})")
    first = (exc.log.strip().splitlines() or [str(exc).splitlines()[0]])[0]
    return GeneratorError(where, "init: custom", first[:300])


def build_generators(problem: Problem, shape: Shape, cache_dir: Path | None = None) -> Path | None:
    """Build (or find in the cache) the generator program of ``shape``; None without custom buffers."""
    if not custom_buffers(problem):
        return None
    src = generator_source(problem, shape)
    out_dir = (cache_dir or default_host_cache_dir()) / "generators"
    include = [problem.directory]
    try:
        return build_executable(src.text, out_dir, include_dirs=include, source_name=f"gen_{shape.name}.cpp")
    except HostCompileError as exc:
        raise _compile_error(problem, src, exc) from None


_MEMO: dict[tuple[str, str], dict[str, np.ndarray]] = {}


def generated_inputs(problem: Problem, shape: Shape, work_dir: Path) -> dict[str, np.ndarray]:
    """The custom buffers of ``shape`` (outputs too: they start from it), generated once per program
    and kept under work_dir."""
    exe = build_generators(problem, shape)
    if exe is None:
        return {}
    key = (str(exe), str(work_dir))
    if key in _MEMO:
        return _MEMO[key]
    wanted = [b for _, b in custom_buffers(problem)]
    store = Path(work_dir) / "host" / "generated" / exe.stem
    if not all((store / f"{b.name}.bin").exists() for b in wanted):
        store.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{exe.stem}.", dir=store.parent))
        try:
            _run_generators(problem, shape, exe, tmp)
            try:
                os.replace(tmp, store)
            except OSError:
                if not store.is_dir():
                    raise
                # another process (the worker, a host reference) finished the same program first
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
    data: dict[str, np.ndarray] = {}
    for b in wanted:
        n = shape.sizes[b.name]
        arr = np.fromfile(store / f"{b.name}.bin", dtype=np.dtype(b.numpy_dtype))
        if arr.size != n:
            raise GeneratorError(problem.inputs_yaml, b.name, f"the generated data has {arr.size} elements, not {n}")
        data[b.name] = arr
    _MEMO[key] = data
    return data


def _run_generators(problem: Problem, shape: Shape, exe: Path, out_dir: Path) -> None:
    res = procs.run([str(exe), str(out_dir)], timeout_s=GENERATOR_TIMEOUT_S, cwd=str(out_dir), keep_lines=50)
    where = problem.inputs_yaml
    fields = {b.name: f"args[{i}] ({b.name}).body" for i, b in custom_buffers(problem)}
    if res.timed_out:
        why = f"the generators of shape {shape.name} ran longer than {GENERATOR_TIMEOUT_S:g} s"
        raise GeneratorError(where, "init: custom", why)
    if res.returncode == 0:
        return
    for line in res.stderr.splitlines():
        parts = line.split(" ", 2)
        if len(parts) == 3 and parts[0] == "ktt-gen-size" and parts[1] in fields:
            n = shape.sizes[parts[1]]
            why = f"returned {parts[2]} elements, expected {n:,} (its size in shape {shape.name})"
            raise GeneratorError(where, fields[parts[1]], why)
        if len(parts) == 3 and parts[0] == "ktt-gen-exception" and parts[1] in fields:
            raise GeneratorError(where, fields[parts[1]], f"threw {parts[2][:300]}")
    tail = res.stderr.strip().splitlines()[-1:] or [f"exit status {res.returncode}"]
    raise GeneratorError(where, "init: custom", f"the generators of shape {shape.name} failed: {tail[0][:300]}")
