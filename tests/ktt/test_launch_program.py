"""Launch programs (repeat / count / until / swap): the parser, static checks, per-configuration
evaluation, and the order in which ktt.sequence runs passes - on a FAKE GPU (fake_launch_gpu)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from fake_launch_gpu import FakeBuffers, FakeGpu, LaunchRecord
from ktt_paths import DATA, ROOT

from ktt.buffers import GUARD_BYTES, alloc_guarded
from ktt.candidates import geometry_problems, launch_plan
from ktt.check import check_files, check_kernel
from ktt.expressions import ExpressionError
from ktt.gpu_checks import CANARY32, POISON32
from ktt.launch_program import has_until, iter_launches, launches_per_run, program_kernels
from ktt.problem import load_problem
from ktt.problem.model import Problem
from ktt.sequence import PassLimit, prepare
from ktt.spec import MAX_LAUNCHES_PER_RUN, MAX_PASSES, Repeat, SpecError, load_spec, load_spec_text

TINY = DATA / "tiny"
SUM = ROOT / "problems" / "multipass_sum"
EXAMPLE = SUM / "example"


def tiny() -> Problem:
    return load_problem(TINY)


def spec_error(text: str) -> SpecError:
    with pytest.raises(SpecError) as info:
        load_spec_text(text, tiny())
    return info.value


# -- the parser ------------------------------------------------------------------------------

NESTED = """
tune_params: {B: [32, 64]}
scratch:
  - {name: t1, size: N}
  - {name: t2, size: N}
launches:
  - {kernel: fill, grid: {x: 1}, block: {x: B}, args: [X, t1]}
  - repeat:
      var: k
      count: 3
      swap: [t1, t2]
      body:
        - {kernel: step, grid: {x: k + 1}, block: {x: B}, args: [t1, t2, {value: 10 * k + B}]}
        - repeat:
            var: j
            count: 2
            body:
              - {kernel: inner, grid: {x: 1}, block: {x: 1}, args: [{value: k * 100 + j}]}
  - {kernel: last, grid: {x: 1}, block: {x: 1}, args: [t1, Y]}
"""


def test_the_parser_builds_repeat_blocks() -> None:
    spec = load_spec_text(NESTED, tiny())
    assert spec.has_repeat
    outer = spec.launches[1]
    assert isinstance(outer, Repeat)
    assert (outer.label, outer.var, outer.until, outer.swaps) == ("launches[1].repeat", "k", None, (("t1", "t2"),))
    assert outer.count is not None and outer.count.text == "3" and outer.max_passes is None
    inner = outer.body[1]
    assert isinstance(inner, Repeat) and inner.label == "launches[1].repeat.body[1].repeat" and inner.var == "j"
    assert [x.kernel for x in spec.kernel_launches()] == ["fill", "step", "inner", "last"]
    assert [x.label for x in spec.kernel_launches()][2] == "launches[1].repeat.body[1].repeat.body[0]"
    assert [g.kernel for g in spec.geometry({"B": 32}, tiny().primary)] == ["fill", "last"]


def test_the_example_program_loads() -> None:
    problem = load_problem(SUM)
    spec = load_spec(EXAMPLE / "tuning.yaml", problem)
    loop = spec.launches[1]
    assert isinstance(loop, Repeat)
    assert loop.until == "done" and loop.max_passes is not None and loop.max_passes.text == "8"
    assert loop.swaps == (("part_a", "part_b"),) and loop.var == "p" and loop.count is None


def test_swap_forms_and_default_loop_variable() -> None:
    text = """
scratch: [{name: a, size: N}, {name: b, size: N}, {name: c, size: N}, {name: d, size: N}]
launches:
  - repeat:
      count: 2
      swap: [[a, b], [c, d]]
      body: [{kernel: k, grid: {x: pass + 1}, block: {x: 1}, args: [a, b, c, d]}]
"""
    spec = load_spec_text(text, tiny())
    loop = spec.launches[0]
    assert isinstance(loop, Repeat) and loop.var == "pass" and loop.swaps == (("a", "b"), ("c", "d"))


BODY = "body: [{kernel: k, grid: {x: 1}, block: {x: 1}, args: [t1, t2, flag]}]"
SCRATCH = (
    "scratch: [{name: t1, size: N}, {name: t2, size: N}, {name: flag, dtype: int, size: 1},"
    " {name: fflag, size: 1}, {name: pflag, dtype: int, size: 1, zero: false}, {name: small, size: 8}]\n"
)


def repeat_spec(fields: str, body: str = BODY, params: str = "tune_params: {B: [32]}\n") -> str:
    return f"{params}{SCRATCH}launches:\n  - repeat: {{{fields}, {body}}}\n"


@pytest.mark.parametrize(
    ("fields", "field", "fragment"),
    [
        ("until: flag", "launches[0].repeat.max_passes", "required with until"),
        ("count: 2, until: flag, max_passes: 4", "launches[0].repeat.until", "count or until, not both"),
        ("var: i", "launches[0].repeat", "give count"),
        ("count: 2, max_passes: 4", "launches[0].repeat.max_passes", "only with until"),
        ("until: flag, max_passes: 0", "launches[0].repeat.max_passes", "out of range 1..10,000"),
        (f"until: flag, max_passes: {MAX_PASSES + 1}", "launches[0].repeat.max_passes", "out of range"),
        ("count: -1", "launches[0].repeat.count", "out of range 0.."),
        ("count: 2.5", "launches[0].repeat.count", "valid integer"),
        ("count: pass + 1", "launches[0].repeat.count", "unknown name 'pass'"),
        ("count: Q", "launches[0].repeat.count", "unknown name 'Q'"),
        ("until: X, max_passes: 4", "launches[0].repeat.until", "'X' is a problem buffer"),
        ("until: nothing, max_passes: 4", "launches[0].repeat.until", "not a scratch buffer"),
        ("until: fflag, max_passes: 4", "launches[0].repeat.until", "dtype float"),
        ("until: pflag, max_passes: 4", "launches[0].repeat.until", "zero: false"),
        ("count: 2, swap: [t1, nope]", "launches[0].repeat.swap", "unknown buffer 'nope'"),
        ("count: 2, swap: [t1, X]", "launches[0].repeat.swap", "read-only"),
        ("count: 2, swap: [t1, t1]", "launches[0].repeat.swap", "with itself"),
        ("count: 2, swap: [t1, flag]", "launches[0].repeat.swap", "holds float but 'flag' holds int"),
        ("count: 2, swap: [t1, small]", "launches[0].repeat.swap", "1,024 elements but 'small' has 8"),
        ("count: 2, swap: [t1, t2, small]", "launches[0].repeat.swap", "two buffers, got 3"),
        ("count: 2, swap: [[t1, t2], [t2, Y]]", "launches[0].repeat.swap[1]", "in two swap pairs"),
        ("count: 2, swap: [t1, [t2]]", "launches[0].repeat.swap", "one pair"),
        ("until: flag, max_passes: 3, swap: [flag, t1]", "launches[0].repeat.swap", "until flag"),
        ("count: 2, var: B", "launches[0].repeat.var", "already used"),
        ("count: 2, var: t1", "launches[0].repeat.var", "already used"),
        ("count: 2, var: 9x", "launches[0].repeat.var", "not a valid name"),
        ("count: 2, body: []", "launches[0].repeat.body", "empty"),
        ("count: 2, extra: 1", "launches[0].repeat.extra", "unknown key"),
    ],
)
def test_static_errors_name_the_field(fields: str, field: str, fragment: str) -> None:
    if "body:" in fields:
        text = f"tune_params: {{B: [32]}}\n{SCRATCH}launches:\n  - repeat: {{{fields}}}\n"
    else:
        text = repeat_spec(fields)
    err = spec_error(text)
    assert err.field == field, (err.field, err.message)
    assert fragment in err.message, err.message
    assert "\n" not in str(err) and str(err).startswith("tuning.yaml: ")


def test_more_static_errors() -> None:
    # the until flag must reach a launch of the body
    err = spec_error(
        repeat_spec("until: flag, max_passes: 3", "body: [{kernel: k, grid: {x: 1}, block: {x: 1}, args: [t1]}]")
    )
    assert err.field == "launches[0].repeat.until" and "no launch of the body takes 'flag'" in err.message
    # side streams inside a body
    err = spec_error(repeat_spec("count: 2", "body: [{kernel: k, grid: {x: 1}, block: {x: 1}, stream: 1}]"))
    assert err.field == "launches[0].repeat.body[0].stream" and "side streams" in err.message
    # a loop variable outside its loop: in a restriction, a scratch size, a later launch
    err = spec_error("restrictions: [pass < 3]\n" + repeat_spec("count: 2"))
    assert err.field == "restrictions[0]" and "'pass'" in err.message
    err = spec_error(
        "scratch: [{name: s, size: pass}]\n"
        "launches:\n  - repeat: {count: 1, body: [{kernel: k, grid: {x: 1}, block: {x: 1}}]}\n"
    )
    assert err.field == "scratch[0].size"
    err = spec_error(repeat_spec("count: 2").rstrip("\n") + "\n  - {kernel: k, grid: {x: pass}, block: {x: 1}}\n")
    assert err.field == "launches[1].grid.x" and "'pass'" in err.message
    # nested too deep, and a loop variable reused by an inner loop
    deep = "{kernel: k, grid: {x: 1}, block: {x: 1}}"
    for var in ("d", "c", "b", "a"):
        deep = f"{{repeat: {{var: {var}, count: 1, body: [{deep}]}}}}"
    err = spec_error(f"launches:\n  - {deep}\n")
    assert "nest at most 3 deep" in err.message and err.field.count(".repeat") == 4
    err = spec_error(
        "launches:\n  - {repeat: {var: a, count: 1, body: [{repeat: {var: a, count: 1, body: [\n"
        "      {kernel: k, grid: {x: 1}, block: {x: 1}}]}}]}}\n"
    )
    assert err.field == "launches[0].repeat.body[0].repeat.var" and "already used" in err.message
    # something next to repeat:, and an unquoted comma in a flow mapping
    err = spec_error(
        "launches:\n  - {repeat: {count: 1, body: [{kernel: k, grid: {x: 1}, block: {x: 1}}]}, kernel: k}\n"
    )
    assert err.field == "launches[0].repeat" and "holds only 'repeat:'" in err.message
    err = spec_error("launches:\n  - {kernel: k, grid: {x: ceil_div(N, 32)}, block: {x: 1}}\n")
    assert err.field == "launches[0].grid" and "quote" in err.message
    # too many items in all
    many = "".join("\n  - {kernel: k, grid: {x: 1}, block: {x: 1}}" for _ in range(257))
    err = spec_error(f"launches:{many}\n")
    assert err.field == "launches[256]" and "more than 256" in err.message


# -- evaluation per configuration --------------------------------------------------------------


def test_a_body_that_reads_its_variable_is_evaluated_per_pass() -> None:
    problem = tiny()
    spec = load_spec_text(NESTED, problem)
    program, scratch = launch_plan(spec, {"B": 64}, problem.primary)
    assert [s["name"] for s in scratch] == ["t1", "t2"]
    loop = program[1]["repeat"]
    assert loop["passes"] == 3 and loop["swap"] == [["t1", "t2"]] and loop["until"] is None
    assert len(loop["bodies"]) == 3 and "body" not in loop
    steps = [b[0] for b in loop["bodies"]]
    assert [s["grid"][0] for s in steps] == [1, 2, 3]
    assert [s["args"][2]["value"] for s in steps] == [64, 74, 84]
    inner = [b[1]["repeat"] for b in loop["bodies"]]
    assert [[n["args"][0]["value"] for n in i["bodies"][0] + i["bodies"][1]] for i in inner] == [
        [0, 1],
        [100, 101],
        [200, 201],
    ]
    assert launches_per_run(program) == 1 + 3 * (1 + 2) + 1
    assert program_kernels(program) == ["fill", "step", "inner", "last"]
    assert len(list(iter_launches(program))) == 11
    assert geometry_problems(program) is None


def test_a_body_without_its_variable_is_evaluated_once() -> None:
    problem = tiny()
    text = repeat_spec("until: flag, max_passes: N / B")
    spec = load_spec_text(text, problem)
    program, _ = launch_plan(spec, {"B": 32}, problem.primary)
    loop = program[0]["repeat"]
    assert loop["passes"] == 32 and loop["until"] == "flag" and len(loop["body"]) == 1 and "bodies" not in loop
    assert launches_per_run(program) == 32 and has_until(program)
    nested, _ = launch_plan(load_spec_text(NESTED, problem), {"B": 32}, problem.primary)
    assert not has_until(nested)


def test_values_known_only_per_configuration_are_checked_then() -> None:
    problem = tiny()
    # max_passes out of range for one configuration
    spec = load_spec_text(repeat_spec("until: flag, max_passes: N * B", params="tune_params: {B: [1, 32]}\n"), problem)
    assert launch_plan(spec, {"B": 1}, problem.primary)[0][0]["repeat"]["passes"] == 1024
    with pytest.raises(ExpressionError, match=r"launches\[0\]\.repeat\.max_passes: evaluates to 32768, out of range"):
        launch_plan(spec, {"B": 32}, problem.primary)
    # swap partners whose sizes depend on a parameter
    text = (
        "tune_params: {B: [32, 64]}\nscratch: [{name: a, size: N * B / 32}, {name: b, size: N}]\n"
        "launches:\n  - repeat: {count: 2, swap: [a, b],\n"
        "      body: [{kernel: k, grid: {x: 1}, block: {x: 1}, args: [a, b]}]}\n"
    )
    spec = load_spec_text(text, problem)
    launch_plan(spec, {"B": 32}, problem.primary)
    with pytest.raises(ExpressionError, match=r"launches\[0\]\.repeat\.swap: 'a' has 2,048 elements but 'b' has 1,024"):
        launch_plan(spec, {"B": 64}, problem.primary)
    # an error in one pass names the launch and the pass
    text = "launches:\n  - repeat: {var: k, count: 5, body: [{kernel: k1, grid: {x: 100 / (3 - k)}, block: {x: 1}}]}\n"
    spec = load_spec_text(text, problem)
    with pytest.raises(ExpressionError, match=r"launches\[0\]\.repeat\.body\[0\]: division by zero \(at k = 3\)"):
        launch_plan(spec, {}, problem.primary)
    # geometry limits of a launch inside a loop name its field
    text = "launches:\n  - repeat: {var: k, count: 3, body: [{kernel: k1, grid: {x: 1}, block: {x: 512 * k}}]}\n"
    program, _ = launch_plan(load_spec_text(text, problem), {}, problem.primary)
    assert (
        geometry_problems(program)
        == "launches[0].repeat.body[0] (k1): grid (1, 1, 1) / block (0, 1, 1) has an axis below 1"
    )


def test_the_launches_per_run_are_capped() -> None:
    problem = tiny()
    three = "{kernel: b, grid: {x: 1}, block: {x: 1}}, {kernel: c, grid: {x: 1}, block: {x: 1}}"
    body = f"body: [{{kernel: a, grid: {{x: 1}}, block: {{x: 1}}}}, {three}]"
    spec = load_spec_text(f"launches:\n  - repeat: {{count: {MAX_PASSES}, {body}}}\n", problem)
    with pytest.raises(ExpressionError, match=f"more than {MAX_LAUNCHES_PER_RUN:,} launches per run"):
        launch_plan(spec, {}, problem.primary)
    # per-pass bodies stop at the cap rather than evaluating every pass first
    body = f"body: [{{kernel: a, grid: {{x: pass + 1}}, block: {{x: 1}}}}, {three}]"
    nested = f"launches:\n  - repeat: {{var: o, count: 10, body: [{{repeat: {{count: {MAX_PASSES}, {body}}}}}]}}\n"
    with pytest.raises(ExpressionError, match="launches per run"):
        launch_plan(load_spec_text(nested, problem), {}, problem.primary)


# -- running passes in order on a FAKE GPU ----------------------------------------------------


def fake_boundary(gpu: FakeGpu, problem: Problem) -> FakeBuffers:
    shape = problem.primary
    return FakeBuffers({b.name: alloc_guarded(gpu, shape.bytes_of(b), b.name) for b in problem.buffers})


def guards_intact(gpu: FakeGpu, guarded: list) -> bool:
    for g in guarded:
        padded = (g.nbytes + 255) // 256 * 256
        head = gpu.view(g.base, GUARD_BYTES, np.uint32)
        tail = gpu.view(g.ptr + g.words * 4, padded - g.words * 4 + GUARD_BYTES, np.uint32)
        if (head != CANARY32).any() or (tail != CANARY32).any():
            return False
    return True


def names_of(seq, record: LaunchRecord) -> list:
    by_ptr = {ptr: name for name, ptr in seq.home.items()}
    return [by_ptr.get(a, a) if isinstance(a, int) and a in by_ptr else a for a in record.args]


def noop(*_args) -> None:
    return None


def test_passes_run_in_order_and_swaps_rebind_names() -> None:
    problem = tiny()
    spec = load_spec_text(NESTED, problem)
    program, scratch = launch_plan(spec, {"B": 32}, problem.primary)
    gpu = FakeGpu({"fill": noop, "step": noop, "inner": noop, "last": noop})
    seq = prepare(gpu, fake_boundary(gpu, problem), b"fake", program, scratch)
    seq.reset_scratch()
    seq.run(None)
    got = [(r.kernel, r.grid[0], names_of(seq, r)) for r in gpu.launches()]
    assert got == [
        ("fill", 1, ["X", "t1"]),
        ("step", 1, ["t1", "t2", 32]),
        ("inner", 1, [0]),
        ("inner", 1, [1]),
        ("step", 2, ["t2", "t1", 42]),  # swapped after pass 0
        ("inner", 1, [100]),
        ("inner", 1, [101]),
        ("step", 3, ["t1", "t2", 52]),
        ("inner", 1, [200]),
        ("inner", 1, [201]),
        ("last", 1, ["t2", "Y"]),  # three swaps: the name t1 now means t2's memory
    ]
    assert seq.launch_events() == 0 and not seq.flat
    # the next run starts from the declared bindings again
    gpu.log.clear()
    seq.run(None)
    assert [(r.kernel, r.grid[0], names_of(seq, r)) for r in gpu.launches()] == got
    assert not any(x[0] == "d2d" for x in gpu.log if isinstance(x, tuple))  # no boundary buffer was swapped


@pytest.mark.parametrize(("count", "copied"), [(3, True), (2, False)])
def test_a_swapped_boundary_buffer_is_copied_back_at_the_end(count: int, copied: bool) -> None:
    """Each pass reads Y and writes t = Y + 1, then the names swap: after the loop the name Y holds
    the newest values; when that is t's memory, it is copied into Y's own before the run ends."""
    problem = tiny()
    text = f"""
scratch: [{{name: t, size: N}}]
launches:
  - {{kernel: init, grid: {{x: 1}}, block: {{x: 1}}, args: [Y]}}
  - repeat:
      count: {count}
      swap: [Y, t]
      body: [{{kernel: step, grid: {{x: 1}}, block: {{x: 1}}, args: [Y, t]}}]
"""
    program, scratch = launch_plan(load_spec_text(text, problem), {}, problem.primary)
    n = 4 * 1024

    def init(gpu: FakeGpu, grid, block, y: int) -> None:
        gpu.view(y, n, np.float32)[:] = 0

    def step(gpu: FakeGpu, grid, block, src: int, dst: int) -> None:
        gpu.view(dst, n, np.float32)[:] = gpu.view(src, n, np.float32) + 1

    gpu = FakeGpu({"init": init, "step": step})
    seq = prepare(gpu, fake_boundary(gpu, problem), b"fake", program, scratch)
    seq.run(None)
    y_home, t_home = seq.home["Y"], seq.home["t"]
    copies = [x for x in gpu.log if isinstance(x, tuple) and x[0] == "d2d"]
    assert copies == ([("d2d", y_home, t_home, n)] if copied else [])
    assert (gpu.view(y_home, n, np.float32) == count).all()


def sum_pass(ipt: int, raise_flag: bool = True):
    """The example's sum_pass kernel in numpy (problems/multipass_sum/example/kernels.cu)."""

    def run(gpu: FakeGpu, grid, block, src, dst, sums, done, n, in_stride, out_stride) -> None:
        r = block[0] * ipt
        assert grid[0] * r >= n, "the grid does not cover every value"
        for row in range(grid[1]):
            values = np.zeros(grid[0] * r, np.int64)
            values[:n] = gpu.view(src + 4 * row * in_stride, 4 * n, np.int32)
            part = values.reshape(grid[0], r).sum(axis=1).astype(np.int32)
            gpu.view(dst + 4 * row * out_stride, 4 * grid[0], np.int32)[:] = part
            if grid[0] == 1:
                gpu.view(sums + 4 * row, 4, np.int32)[0] = part[0]
                if raise_flag and row == 0:
                    gpu.view(done, 4, np.int32)[0] = 1

    return run


def small_sum_problem(tmp_path: Path, rows: int, cols: int) -> Problem:
    d = tmp_path / "multipass_sum"
    shutil.copytree(SUM, d)
    text = (d / "inputs.yaml").read_text()
    text = text.replace("name: ROWS, value: 16", f"name: ROWS, value: {rows}")
    text = text.replace("name: COLS, value: 1048576", f"name: COLS, value: {cols}")
    (d / "inputs.yaml").write_text(text)
    return load_problem(d)


def run_sum(problem: Problem, config: dict, raise_flag: bool = True):
    spec = load_spec(EXAMPLE / "tuning.yaml", problem)
    program, scratch = launch_plan(spec, config, problem.primary)
    assert geometry_problems(program) is None
    gpu = FakeGpu({"sum_pass": sum_pass(int(config["IPT"]), raise_flag)})
    bufs = fake_boundary(gpu, problem)
    shape = problem.primary
    rows, cols = shape.scalars["ROWS"], shape.scalars["COLS"]
    x = np.random.default_rng(7).integers(-1000, 1001, rows * cols).astype(np.int32)
    gpu.h2d(bufs.dev["X"].ptr, x)
    gpu.memset32(bufs.dev["SUMS"].ptr, POISON32, rows)
    seq = prepare(gpu, bufs, b"fake", program, scratch)
    seq.reset_scratch()
    return gpu, bufs, seq, x.reshape(rows, cols)


@pytest.mark.parametrize(("rows", "cols"), [(3, 5000), (2, 70001), (5, 64)])
def test_the_example_program_sums_every_configuration(tmp_path: Path, rows: int, cols: int) -> None:
    problem = small_sum_problem(tmp_path, rows, cols)
    spec = load_spec(EXAMPLE / "tuning.yaml", problem)
    for bs in spec.tune_params["BS"]:
        for ipt in spec.tune_params["IPT"]:
            config = {"BS": bs, "IPT": ipt}
            gpu, bufs, seq, x = run_sum(problem, config)
            seq.run(None)
            sums = gpu.view(bufs.dev["SUMS"].ptr, 4 * rows, np.int32)
            assert (sums == x.sum(axis=1)).all(), config
            r = bs * ipt
            k = 1
            while r**k < cols:
                k += 1
            assert seq.passes == {"launches[1].repeat": max(1, k - 1)}, config
            # one flag read-back per pass, each after a synchronisation of the device
            reads = [i for i, e in enumerate(gpu.log) if isinstance(e, tuple) and e[0] == "d2h"]
            assert len(reads) == max(1, k - 1)
            assert all(gpu.log[i + 1] == ("sync",) for i in reads)
            scratch_guards = [g for g, _ in seq.scratch]
            assert guards_intact(gpu, [*bufs.dev.values(), *scratch_guards]), config


def test_a_flag_that_never_rises_stops_at_max_passes(tmp_path: Path) -> None:
    problem = small_sum_problem(tmp_path, 3, 5000)
    gpu, _bufs, seq, _ = run_sum(problem, {"BS": 64, "IPT": 1}, raise_flag=False)
    with pytest.raises(PassLimit) as info:
        seq.run(None)
    assert str(info.value) == (
        "launches[1].repeat: until flag 'done' was still 0 after max_passes = 8 passes (the loop did not finish)"
    )
    assert len(gpu.launches()) == 1 + 8
    assert len([e for e in gpu.log if isinstance(e, tuple) and e[0] == "d2h"]) == 8


def test_prepare_checks_names_and_limits_of_every_pass() -> None:
    problem = tiny()
    text = "launches:\n  - repeat: {var: k, count: 3, body: [{kernel: k1, grid: {x: 1}, block: {x: 512 * (k + 1)}}]}\n"
    program, scratch = launch_plan(load_spec_text(text, problem), {}, problem.primary)
    gpu = FakeGpu({"k1": noop})
    from ktt.sequence import LaunchRejected

    with pytest.raises(LaunchRejected, match=re.escape("launches[0].repeat.body[0] (k1): block (1536, 1, 1) exceeds")):
        prepare(gpu, fake_boundary(gpu, problem), b"fake", program, scratch)
    gpu = FakeGpu({})
    with pytest.raises(LaunchRejected, match=re.escape("launches[0].repeat.body[0]: no kernel 'k1'")):
        prepare(gpu, fake_boundary(gpu, problem), b"fake", program, scratch)


# -- ktt check ------------------------------------------------------------------------------


def test_check_compiles_the_example_and_its_hostile_twin(compile_cache: Path) -> None:
    problem = load_problem(SUM)
    for kernel in (EXAMPLE / "kernels.cu", SUM / "hostile" / "kernels.cu"):
        report = check_kernel(
            problem, kernel.read_text(), EXAMPLE / "tuning.yaml", sample=2, arch="sm_90", cache_dir=compile_cache
        )
        assert report.ok, report.message  # the twin is statically fine: it fails only at run time
        assert report.missing_kernels == [] and report.restricted_size == 25


def test_check_reports_program_errors_in_one_line(tmp_path: Path, compile_cache: Path) -> None:
    spec = tmp_path / "tuning.yaml"
    text = (EXAMPLE / "tuning.yaml").read_text()
    spec.write_text(text.replace("      max_passes: 8", "      # max_passes: 8"))
    report, code = check_files(SUM, EXAMPLE / "kernels.cu", spec, sample=1, arch="sm_90", cache_dir=compile_cache)
    assert code == 2 and not report.ok
    assert report.message.endswith(
        "tuning.yaml: launches[1].repeat.max_passes: required with until: the most passes "
        "before the configuration fails (at most 10,000)"
    )
    # a bound that is fine statically but not for some configuration: that configuration fails
    spec.write_text(text.replace("max_passes: 8", 'max_passes: "BS >= 512 ? 20000 : 8"'))
    report, code = check_files(SUM, EXAMPLE / "kernels.cu", spec, sample=25, arch="sm_90", cache_dir=compile_cache)
    assert code == 1 and not report.ok
    bad = [c for c in report.configs if not c.ok]
    assert bad and all("launches[1].repeat.max_passes: evaluates to" in (c.error or "") for c in bad)
    primary = [c for c in bad if c.shape == report.configs[0].shape]  # the other case compiles the first (an extreme)
    assert sorted({c.config["BS"] for c in bad}) == [512, 1024] and len(primary) == 10
