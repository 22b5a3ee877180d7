"""The contained child of ``cacao import``: load a KernelBench-form module and report its boundary.

    python -m cacao_tui.kernelbench.probe MODULE.py OUTDIR MEMORY_BYTES [SEED]

Started by ``importer.probe_module`` with a time limit, the allow-listed environment, no GPU
(``CUDA_VISIBLE_DEVICES`` empty) and its own process group. torch and numpy are imported first;
then every wall of ``contain.enter`` goes up (memory, file size, Landlock, no new processes), and
only then is the module loaded. It runs the module as KernelBench's harness does: the seed
(42), ``get_init_inputs()``, the seed again, ``Model(*init_inputs)``, the seed again,
``get_inputs()``. It writes the model's state_dict (then its non-persistent buffers) as raw
little-endian files under OUTDIR/inputs/, notes how each input was drawn (``torch.rand``,
``randn``, ``randint``, ``uniform_``, ``normal_`` on a tensor left as drawn: a distribution
inputs.yaml has; anything else: its data as a file), and finds the outputs' shapes on torch's
meta device (no arithmetic), or by running the forward on the CPU when the meta device cannot.
It prints one line starting with ``MARKER`` and the ``ProbeReport`` as JSON.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import sys
import traceback
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from cacao_tui.kernelbench.report import DTYPES
from ktt import procs
from ktt.capped_read import ReadRefused, describe_read_error, module_from_file

MARKER = "CACAO-KB-PROBE "
MODULE_NAME = "kernelbench_module"
SEED = 42  # KernelBench's eval seeds every step with 42


class FormError(Exception):
    """The module does not follow KernelBench's form; ``str()`` says what is missing."""


def _report(**fields: Any) -> int:
    sys.stdout.flush()
    print(MARKER + json.dumps(fields), flush=True)
    return 0


def _line_in(file: Path, tb: traceback.StackSummary) -> int | None:
    for frame in reversed(tb):
        if frame.filename and Path(frame.filename).resolve() == file:
            return frame.lineno
    return None


# -- how the inputs were drawn ----------------------------------------------------------------


class DrawLog:
    """Records tensors made by torch's random factories, to tell which inputs are plain draws."""

    def __init__(self) -> None:
        self.records: dict[int, tuple[weakref.ref, int, dict[str, Any]]] = {}

    def note(self, t: Any, init: dict[str, Any]) -> None:
        with contextlib.suppress(TypeError):  # not weak-referenceable: treated as derived
            self.records[id(t)] = (weakref.ref(t), t._version, init)

    def init_of(self, t: Any) -> dict[str, Any] | None:
        """The distribution ``t`` was drawn from, when it is that draw, untouched since; else None."""
        rec = self.records.get(id(t))
        if rec is None or rec[0]() is not t or t._version != rec[1]:
            return None
        return rec[2]


def _bounds(args: tuple, kwargs: dict) -> tuple[int, int]:
    ints = [a for a in args if isinstance(a, int) and not isinstance(a, bool)]
    low, high = (0, ints[0]) if len(ints) == 1 else (ints[0], ints[1]) if len(ints) >= 2 else (0, 1)
    return int(kwargs.get("low", low)), int(kwargs.get("high", high))


@contextmanager
def recording(torch: Any, log: DrawLog) -> Iterator[None]:
    """torch.rand, randn, randint (and their _like forms), Tensor.uniform_ and normal_ note their results."""
    saved: list[tuple[Any, str, Any]] = []

    def wrap(owner: Any, name: str, describe: Callable[[tuple, dict], dict[str, Any]], inplace: bool = False) -> None:
        original = getattr(owner, name)

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            result = original(*args, **kwargs)
            log.note(result, describe(args[1:] if inplace else args, kwargs))
            return result

        saved.append((owner, name, original))
        setattr(owner, name, wrapper)

    uniform = lambda a, k: {"kind": "random", "low": 0.0, "high": 1.0}  # noqa: E731
    normal = lambda a, k: {"kind": "normal", "mean": 0.0, "std": 1.0}  # noqa: E731

    def randint(a: tuple, k: dict) -> dict[str, Any]:
        low, high = _bounds(a, k)
        return {"kind": "random", "low": float(low), "high": float(high - 1)}

    def randint_like(a: tuple, k: dict) -> dict[str, Any]:
        return randint(a[1:], k)

    def uniform_(a: tuple, k: dict) -> dict[str, Any]:
        low = float(a[0]) if len(a) > 0 else float(k.get("from", 0.0))
        high = float(a[1]) if len(a) > 1 else float(k.get("to", 1.0))
        return {"kind": "random", "low": low, "high": high}

    def normal_(a: tuple, k: dict) -> dict[str, Any]:
        mean = float(a[0]) if len(a) > 0 else float(k.get("mean", 0.0))
        std = float(a[1]) if len(a) > 1 else float(k.get("std", 1.0))
        return {"kind": "normal", "mean": mean, "std": std}

    for name, how in (("rand", uniform), ("rand_like", uniform), ("randn", normal), ("randn_like", normal),
                      ("randint", randint), ("randint_like", randint_like)):  # fmt: skip
        wrap(torch, name, how)
    wrap(torch.Tensor, "uniform_", uniform_, inplace=True)
    wrap(torch.Tensor, "normal_", normal_, inplace=True)
    try:
        yield
    finally:
        for owner, name, original in reversed(saved):
            setattr(owner, name, original)


# -- the module ------------------------------------------------------------------------------


def _load(file: Path) -> Any:
    module = module_from_file(MODULE_NAME, file)
    if module.__spec__ is None or module.__spec__.loader is None:
        raise FormError("cannot be loaded as a Python module")
    sys.modules[MODULE_NAME] = module
    module.__spec__.loader.exec_module(module)
    return module


def _form(module: Any, torch: Any) -> tuple[type, Callable, Callable]:
    model = getattr(module, "Model", None)
    missing = []
    if not (isinstance(model, type) and issubclass(model, torch.nn.Module)):
        missing.append("class Model(nn.Module)" if model is None else "Model as a subclass of torch.nn.Module")
    for name in ("get_inputs", "get_init_inputs"):
        if not callable(getattr(module, name, None)):
            missing.append(f"{name}()")
    if missing:
        raise FormError(
            f"not in KernelBench's form: no {' and no '.join(missing)} "
            "(a module defines class Model(nn.Module), get_inputs() and get_init_inputs())"
        )
    return model, module.get_inputs, module.get_init_inputs


def _as_list(value: Any, what: str) -> list[Any]:
    if not isinstance(value, (list, tuple)):
        raise FormError(f"{what} returned {type(value).__name__}, not a list")
    return list(value)


def _dtype(torch: Any, t: Any, what: str) -> str:
    name = str(t.dtype).removeprefix("torch.")
    if name not in DTYPES:
        raise FormError(f"{what} is {name}, a dtype cacao import does not take (it takes {', '.join(DTYPES)})")
    return name


def _write(torch: Any, t: Any, path: Path) -> None:
    """Raw little-endian elements, row-major: bf16 as its 16-bit pattern, bool as one byte."""
    t = t.detach().to("cpu").contiguous()
    if t.dtype == torch.bfloat16:
        t = t.view(torch.int16)
    elif t.dtype == torch.bool:
        t = t.to(torch.int8)
    t.numpy().tofile(path)


def _arg_names(model_cls: type, count: int) -> list[str]:
    try:
        params = list(inspect.signature(model_cls.forward).parameters.values())[1:]
    except (TypeError, ValueError):
        params = []
    names = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return [names[i] if i < len(names) else f"input{i}" for i in range(count)]


def _tensors_out(torch: Any, out: Any) -> list[Any]:
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    if not outs or not all(isinstance(t, torch.Tensor) for t in outs):
        kind = type(out).__name__ if not isinstance(out, (tuple, list)) else "a sequence holding non-tensors"
        raise FormError(f"Model.forward returned {kind}; cacao import takes a tensor or a tuple of tensors")
    return outs


def _random_layers(torch: Any, model: Any) -> list[str]:
    found = []
    for name, m in model.named_modules():
        p = getattr(m, "p", 0.0)
        if isinstance(m, torch.nn.modules.dropout._DropoutNd) and p and model.training:
            found.append(f"{name or 'model'}: {type(m).__name__}(p={p:g})")
    return found[:64]


def probe(file: Path, out: Path, torch: Any) -> dict[str, Any]:
    module = _load(file)
    model_cls, get_inputs, get_init_inputs = _form(module, torch)
    torch.manual_seed(SEED)
    init_inputs = _as_list(get_init_inputs(), "get_init_inputs()")
    torch.manual_seed(SEED)
    with torch.no_grad():
        model = model_cls(*init_inputs)
    report: dict[str, Any] = {"seed": SEED, "init_inputs": repr(init_inputs)[:400], "training": bool(model.training)}
    report["random_in_forward"] = _random_layers(torch, model)
    report["sizes"] = {
        k: v for k, v in vars(module).items() if type(v) is int and not k.startswith("_") and 0 < v < 2**62
    }
    data = out / "inputs"  # made before the walls went up (Landlock lets the child write files there, not folders)
    params, named = [], list(model.state_dict().items())
    keys = {k for k, _ in named}
    named += [(k, b) for k, b in model.named_buffers() if k not in keys]  # non-persistent buffers
    for i, (key, t) in enumerate(named):
        params.append({"source": key, "dtype": _dtype(torch, t, f"parameter {key}"), "shape": list(t.shape)})
        _write(torch, t, data / f"param{i}.bin")
    report["params"] = params
    # The inputs: first on the meta device (shapes and how they were drawn, no data), then for real
    # when an input is not a plain draw (its data becomes a file) or the meta device cannot run it.
    log = DrawLog()
    values: list[Any] | None = None
    try:
        with torch.device("meta"), recording(torch, log):
            torch.manual_seed(SEED)
            values = _as_list(get_inputs(), "get_inputs()")
        if any(isinstance(v, torch.Tensor) and log.init_of(v) is None for v in values):
            values = None
    except FormError:
        raise
    except Exception:
        values = None
    if values is None:
        log = DrawLog()
        with recording(torch, log):
            torch.manual_seed(SEED)
            values = _as_list(get_inputs(), "get_inputs()")
    names = _arg_names(model_cls, len(values))
    inputs: list[dict[str, Any]] = []
    for i, (name, v) in enumerate(zip(names, values, strict=True)):
        if isinstance(v, torch.Tensor):
            init = log.init_of(v)
            if init is None or v.dtype == torch.bool:
                init = {"kind": "file"}
                _write(torch, v, data / f"input{i}.bin")
            inputs.append({"kind": "tensor", "source": name, "dtype": _dtype(torch, v, f"input {name}"),
                           "shape": list(v.shape), "init": init})  # fmt: skip
        elif isinstance(v, (bool, int, float)):
            inputs.append({"kind": "scalar", "source": name, "dtype": "float" if isinstance(v, float) else "int",
                           "value": float(v)})  # fmt: skip
        else:
            raise FormError(f"get_inputs() item {i} ({name}) is {type(v).__name__}; it takes tensors and numbers")
    report["inputs"] = inputs
    report["outputs"], report["shapes_from"] = _outputs(torch, model, values, model_cls, init_inputs, get_inputs)
    return report


def _outputs(torch: Any, model: Any, values: list[Any], model_cls: type, init_inputs: list, get_inputs: Callable
             ) -> tuple[list[dict[str, Any]], str]:  # fmt: skip
    """The forward's outputs' shapes and dtypes: on the meta device, else by running it on the CPU."""

    def describe(outs: list[Any]) -> list[dict[str, Any]]:
        return [{"source": f"output {i}", "dtype": _dtype(torch, t, f"output {i}"), "shape": list(t.shape)}
                for i, t in enumerate(outs)]  # fmt: skip

    try:
        meta_model = model.to("meta")
        meta_args = [v.to("meta") if isinstance(v, torch.Tensor) else v for v in values]
        with torch.no_grad():
            return describe(_tensors_out(torch, meta_model(*meta_args))), "meta"
    except FormError:
        raise
    except Exception:  # an operation the meta device lacks, or one that reads values (.item())
        pass
    torch.manual_seed(SEED)
    with torch.no_grad():
        model = model_cls(*init_inputs)
        torch.manual_seed(SEED)
        real = [v for v in _as_list(get_inputs(), "get_inputs()")]
        return describe(_tensors_out(torch, model(*real))), "cpu"


def _warm_up(torch: Any) -> None:
    """Load what the meta device and a first forward load lazily (torch._dynamo makes a cache
    folder on first use) while files may still be read and folders made: the walls forbid both."""
    with torch.no_grad(), torch.device("meta"):
        torch.nn.Linear(2, 2)(torch.rand(1, 2))
    with torch.no_grad():
        torch.nn.functional.conv2d(torch.rand(1, 1, 3, 3), torch.rand(1, 1, 2, 2))


def main(argv: list[str] | None = None) -> int:
    procs.exit_when_parent_dies()
    sys.dont_write_bytecode = True
    args = sys.argv[1:] if argv is None else argv
    if len(args) < 3:
        print("usage: python -m cacao_tui.kernelbench.probe MODULE.py OUTDIR MEMORY_BYTES", file=sys.stderr)
        return 2
    file, out, memory = Path(args[0]).resolve(), Path(args[1]).resolve(), int(args[2])
    try:
        import torch
    except ImportError as exc:
        return _report(ok=False, kind="missing_module", message=f"cacao import needs torch, which is not installed "
                       f"for this Python ({exc}); pip install -e '.[kernelbench]' brings it")  # fmt: skip
    torch.set_num_threads(max(1, min(4, torch.get_num_threads())))
    from cacao_tui.kernelbench.contain import enter  # everything of ours is loaded before the walls

    (out / "inputs").mkdir(exist_ok=True)
    _warm_up(torch)
    walls = enter(file, out, memory)
    try:
        report = probe(file, out, torch)
    except ReadRefused as exc:
        return _report(ok=False, kind="error", message=describe_read_error(exc), walls=walls.notes)
    except FormError as exc:
        tb = traceback.extract_tb(exc.__traceback__)
        return _report(ok=False, kind="form", message=str(exc), line=_line_in(file, tb), walls=walls.notes)
    except MemoryError:
        why = f"ran past its memory limit ({memory / 2**30:g} GiB; --memory-gb raises it)"
        return _report(ok=False, kind="memory", message=why, walls=walls.notes)
    except ModuleNotFoundError as exc:
        tb = traceback.extract_tb(exc.__traceback__)
        return _report(ok=False, kind="missing_module", message=f"imports {exc.name!r}, which is not installed",
                       line=_line_in(file, tb), walls=walls.notes)  # fmt: skip
    except BaseException as exc:  # whatever the module raised, SystemExit included, is reported
        tb = traceback.extract_tb(exc.__traceback__)
        text = f"{type(exc).__name__}: {exc}".splitlines()[0][:300] if str(exc) else type(exc).__name__
        if "allocate" in text.lower():  # torch's allocator, refused by the address-space limit
            text += f" (the import may map {memory / 2**30:g} GiB; --memory-gb raises it)"
        return _report(ok=False, kind="error", message=text, line=_line_in(file, tb), walls=walls.notes)
    return _report(ok=True, walls=walls.notes, **report)


if __name__ == "__main__":
    sys.exit(main())
