"""A probed module as a problem directory: problem.yaml, inputs.yaml, ref.py, model.py, inputs/, README.md.

The boundary is the one KernelBench's harness hands a kernel: the forward's inputs, then the
model's parameters and buffers (state_dict order, then non-persistent buffers), then the
outputs. Sizes are named after the module's own top-level numbers where one number means one
name (``batch_size = 16`` becomes the macro ``BATCH_SIZE``); an input drawn by ``torch.rand``,
``randn``, ``randint``, ``uniform_`` or ``normal_`` is drawn the same way by the tuner (afresh in
every input set), any other input and every parameter is its data under ``inputs/``. Tolerances
are KernelBench's (atol = rtol = 1e-2), outputs are poisoned before every run, and a best must
pass five input sets, as KernelBench's five correctness trials.
"""

from __future__ import annotations

import keyword
import re
import string
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import yaml

from cacao_tui.kernelbench.report import DTYPES, ProbeReport, ScalarInfo, TensorInfo

TOLERANCE = 1e-2  # KernelBench's atol and rtol (v0 and v0.1: fp32 and everything else)
INPUT_SETS = 5  # KernelBench's num_correct_trials
DESCRIBED = 24  # boundary entries named in problem.yaml's description (it reaches every prompt)
GRID_BLOCK = 256  # problem.yaml's default grid: one thread per output element in blocks of 256
_RESERVED_WORDS = (
    "auto break case char const continue default do double else enum extern float for goto if inline int long "
    "register restrict return short signed sizeof static struct switch typedef union unsigned void volatile while "
    "bool true false class namespace template typename new delete this operator private public protected virtual "
    "friend using try catch throw half dim3 size_t"
)
C_RESERVED = frozenset(_RESERVED_WORDS.split())


def c_name(text: str, taken: set[str]) -> str:
    """A C identifier for ``text`` (a state_dict key, an argument name), unique within ``taken``."""
    name = re.sub(r"[^A-Za-z0-9_]", "_", text).strip("_") or "arg"
    if name[0].isdigit():
        name = f"p_{name}"
    if name in C_RESERVED or keyword.iskeyword(name) or name.lower().startswith("ktt"):
        name = f"{name}_"
    base, k = name, 2
    while name in taken or name.upper() in taken:
        name, k = f"{base}_{k}", k + 1
    taken.add(name)
    return name


@dataclass
class Layout:
    """Every name of the boundary, and the size macros, decided once for all the files."""

    report: ProbeReport
    taken: set[str] = field(default_factory=set)
    macros: dict[int, str] = field(default_factory=dict)  # a dim's value -> its macro
    macro_values: dict[str, int] = field(default_factory=dict)  # in the module's order
    inputs: list[tuple[str, TensorInfo | ScalarInfo]] = field(default_factory=list)
    params: list[tuple[str, TensorInfo]] = field(default_factory=list)
    outputs: list[tuple[str, TensorInfo]] = field(default_factory=list)

    def __post_init__(self) -> None:
        r = self.report
        self.inputs = [(c_name(t.source, self.taken), t) for t in r.inputs]
        self.params = [(c_name(t.source.replace(".", "_"), self.taken), t) for t in r.params]
        single = len(r.outputs) == 1
        self.outputs = [(c_name("out" if single else f"out{i}", self.taken), t) for i, t in enumerate(r.outputs)]
        counts: dict[int, int] = {}
        for v in r.sizes.values():
            counts[v] = counts.get(v, 0) + 1
        used = {d for t in self.tensors() for d in t.shape}
        for name, value in r.sizes.items():
            if value > 1 and counts[value] == 1 and value in used:  # one name for one number: no guessing
                macro = name.upper() if len(name) > 1 else f"DIM_{name.upper()}"
                macro = re.sub(r"[^A-Z0-9_]", "_", macro)
                if macro[0].isdigit() or macro in self.taken or macro.lower() in self.taken:
                    continue
                self.taken.add(macro)
                self.macros[value] = macro
                self.macro_values[macro] = value

    def tensors(self) -> list[TensorInfo]:
        return [t for _, t in [*self.inputs, *self.params, *self.outputs] if isinstance(t, TensorInfo)]

    def dims(self, t: TensorInfo) -> list[str]:
        return [self.macros.get(d, str(d)) for d in t.shape]

    def size(self, t: TensorInfo) -> str:
        return " * ".join(self.dims(t)) or "1"

    def shape_text(self, t: TensorInfo) -> str:
        named = ", ".join(self.dims(t))
        plain = ", ".join(str(d) for d in t.shape)
        return f"[{named}]" if named == plain else f"[{named}] = [{plain}]"


def _flow(item: dict) -> str:
    return yaml.safe_dump(item, default_flow_style=True, sort_keys=False, width=10_000).strip()


def _draw_text(t: TensorInfo) -> str:
    init = t.init
    if init is None or init.kind == "file":
        return "its data from get_inputs() (a distribution inputs.yaml does not draw)"
    if init.kind == "normal":
        return f"normal, mean {init.mean:g}, std {init.std:g}"
    return f"uniform in [{init.low:g}, {init.high:g}]"


def inputs_yaml(lay: Layout) -> str:
    lines = [
        "# Written by `cacao import` from model.py (KernelBench's form). The boundary, in order: the",
        "# forward's inputs, the model's parameters and buffers (state_dict order), then the outputs.",
        "# Tensors are contiguous, row-major, flattened; each comment gives the shape.",
        "args:",
    ]
    for macro, value in lay.macro_values.items():
        lines.append(f"  - {_flow({'kind': 'scalar', 'name': macro, 'value': value})}")
    seed = 0
    for name, t in lay.inputs:
        if isinstance(t, ScalarInfo):
            value = int(t.value) if t.dtype == "int" else t.value
            item = {"kind": "scalar", "name": name, "dtype": t.dtype, "value": value, "placements": ["host", "runtime"]}
            lines += [f"  # {name}: get_inputs() number ({t.source})", f"  - {_flow(item)}"]
            continue
        seed += 1
        item = {"kind": "buffer", "name": name, "dtype": DTYPES[t.dtype], "size": lay.size(t), "access": "read"}
        init = t.init
        if init is None or init.kind == "file" or t.dtype == "bool":
            item.update(init="file", file_name=f"{name}.bin")
        elif init.kind == "normal":
            item.update(init="normal", mean=init.mean, std=init.std, seed=seed)
        else:
            item.update(init="random", min=init.low, max=init.high, seed=seed)
        comment = f"  # {name}: input {t.source!r}, {t.dtype} {lay.shape_text(t)}, {_draw_text(t)}"
        lines += [comment, f"  - {_flow(item)}"]
    for name, t in lay.params:
        item = {"kind": "buffer", "name": name, "dtype": DTYPES[t.dtype], "size": lay.size(t), "access": "read",
                "init": "file", "file_name": f"{name}.bin"}  # fmt: skip
        lines += [f"  # {name}: {t.source}, {t.dtype} {lay.shape_text(t)}", f"  - {_flow(item)}"]
    for name, t in lay.outputs:
        item = {"kind": "buffer", "name": name, "dtype": DTYPES[t.dtype], "size": lay.size(t), "access": "write",
                "validate": True}  # fmt: skip
        lines += [f"  # {name}: {t.source} of forward, {t.dtype} {lay.shape_text(t)}", f"  - {_flow(item)}"]
    return "\n".join(lines) + "\n"


def boundary_lines(lay: Layout) -> list[str]:
    """One line per argument of the boundary, for the description and the prompt's rules."""
    out = []
    for name, t in lay.inputs:
        if isinstance(t, ScalarInfo):
            out.append(f"{name}: a {t.dtype} number (runtime parameter)")
        else:
            out.append(f"{name}: input, {t.dtype} {lay.shape_text(t)}")
    out += [f"{name}: weight {t.source}, {t.dtype} {lay.shape_text(t)}" for name, t in lay.params]
    out += [f"{name}: output, {t.dtype} {lay.shape_text(t)}" for name, t in lay.outputs]
    return out


def _capped(lines: list[str], most: int = DESCRIBED) -> list[str]:
    """A long boundary (a whole network's weights) is named in part; inputs.yaml lists it all."""
    if len(lines) <= most:
        return lines
    return [*lines[: most - 2], f"... {len(lines) - most + 1} more (inputs.yaml lists every one)", lines[-1]]


def problem_yaml(lay: Layout, name: str, level: int | None, source: str) -> str:
    r = lay.report
    first_out = lay.outputs[0][1]
    where = f"KernelBench level {level} problem {source}" if level is not None else f"The PyTorch module {source}"
    mode = "training mode, as constructed (KernelBench never calls eval())" if r.training else "eval mode"
    description = (
        f"{where}, imported by cacao import: compute the module's Model.forward (the reference) as CUDA kernels. "
        f"The kernels take the forward's inputs, then the model's parameters and buffers as inputs too "
        f"({len(lay.params)} of them, state_dict order), then the outputs: "
        + "; ".join(_capped(boundary_lines(lay)))
        + f". The model runs in {mode}. The reference is the module's forward in PyTorch eager on the GPU, "
        "timed with CUDA events."
    )
    rules = [
        "This problem is a PyTorch module in KernelBench's form: the reference (ref.py) starts with the module's "
        "source. Implement Model.forward exactly, with every tensor contiguous, row-major and flattened.",
        "The kernel boundary is KernelBench's: the forward's inputs first, then the model's parameters and "
        "buffers (its weights: inputs here, the same data the reference uses, never to be re-initialised), then "
        "the outputs, which your kernels must write completely (they start poisoned).",
        f"An output passes when |kernel - reference| <= {TOLERANCE:g} + {TOLERANCE:g} * |reference| "
        f"(KernelBench's atol and rtol), on {INPUT_SETS} input sets.",
    ]
    if r.random_in_forward:
        rules.append("The forward draws random numbers (" + ", ".join(r.random_in_forward[:4]) + "): a kernel "
                     "cannot reproduce them, so this problem cannot validate as imported.")  # fmt: skip
    doc = {
        "name": name,
        "description": description,
        "gpu": {"index": 0},
        "grid": {"x": f"({lay.size(first_out)} + {GRID_BLOCK - 1}) / {GRID_BLOCK}"},
        "reference": {"type": "python", "file": "ref.py", "function": "cacao_reference"},
        "validation": {"tolerance": TOLERANCE, "rtol": TOLERANCE, "input_sets": INPUT_SETS, "poison_outputs": True},
        "rules": {"text": rules},
    }
    head = (
        f"# Imported by `cacao import` from {source} (KernelBench's form); see README.md.\n"
        "# The grid is a default (one thread per element of the first output); a kernel's tuning.yaml\n"
        "# gives its own launches.\n"
    )
    return head + yaml.safe_dump(doc, sort_keys=False, width=100, allow_unicode=True)


RESERVED_GLOBALS = ("prepare_input", "cacao_reference", "CACAO_SEED", "CACAO_INPUTS", "CACAO_PARAMS",
                    "CACAO_OUTPUTS", "_cacao_model", "_cacao_tensor")  # fmt: skip


def ref_py(lay: Layout, source_text: str, source: str) -> str:
    """The module's own source, then the tuner's entry points (the template): the model reads the
    PyTorch program itself as the reference, and the run executes exactly that program."""
    text = (resources.files("cacao_tui") / "templates" / "kernelbench" / "ref.py.txt").read_text(encoding="utf-8")
    inputs = [(n, None, None) if isinstance(t, ScalarInfo) else (n, t.dtype, t.shape) for n, t in lay.inputs]
    params = [(n, t.source, t.dtype, t.shape) for n, t in lay.params]
    outputs = [(n, t.dtype, t.shape) for n, t in lay.outputs]
    tail = string.Template(text).substitute(
        source=source, seed=lay.report.seed, inputs=repr(inputs), params=repr(params), outputs=repr(outputs)
    )
    return source_text.rstrip("\n") + "\n" + tail


def readme(lay: Layout, name: str, level: int | None, source: str, original: Path) -> str:
    r = lay.report
    level_text = f"KernelBench level {level}, " if level is not None else ""
    lines = [
        f"# {name}",
        "",
        f"Imported by `cacao import` from `{source}` ({level_text}KernelBench's module form). `model.py` is",
        "its source as imported; `ref.py` is that source followed by the tuner's entry points (`prepare_input`,",
        "`cacao_reference`). See docs/KERNELBENCH.md.",
        "",
        f"- **From**: `{original}`",
        f"- **Model**: `Model(*{r.init_inputs})`, built under `torch.manual_seed({r.seed})` as KernelBench's harness "
        f"builds it; {'training' if r.training else 'eval'} mode.",
        "- **Boundary** (the kernel's parameters, in order; KernelBench's: inputs, then weights, then outputs):",
        "",
        *[f"  - {line}" for line in boundary_lines(lay)],
        "",
        "- **Inputs**: " + "; ".join(
            f"`{n}` {_draw_text(t)}" for n, t in lay.inputs if isinstance(t, TensorInfo)
        ) + ". Those drawn from a distribution are drawn afresh for each input set; the others (and every "
        "weight) are their data under `inputs/`, the same in every set.",
        f"- **Validation**: atol = rtol = {TOLERANCE:g} (KernelBench's), {INPUT_SETS} input sets, outputs poisoned "
        "before every run.",
        "- **Reference**: `ref.py` runs the module's forward in PyTorch eager on the GPU, timed with CUDA "
        "events (the minimum of 5 calls after 5 warm-up calls): speedups are against torch eager.",
        f"- **Output shapes** found on torch's {'meta device' if r.shapes_from == 'meta' else 'CPU'}.",
    ]
    if r.random_in_forward:
        lines.append("- **Warning**: the forward draws random numbers (" + ", ".join(r.random_in_forward) + "): "
                     "its outputs differ from call to call, so no kernel can validate.")  # fmt: skip
    return "\n".join(lines) + "\n"
