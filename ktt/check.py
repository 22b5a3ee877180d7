"""``ktt check``: compile-check a kernel and its tuning spec on a sample of configurations, no GPU needed.

Order: the problem's forbid rules on the source (a hit stops here), the spec (parsed and
checked against the problem), the restrictions (how many configurations are left), then
NVRTC on a seeded sample of them for the base shape, plus one configuration for each case
that the case's own sizes allow (a case whose restrictions allow none fails the check).
Compiler messages are mapped to lines of the kernel file. Launches that name a kernel the
source does not define are listed in ``missing_kernels``.

Bounds (docs/SECURITY.md): a kernel above ``MAX_KERNEL_BYTES`` is refused before anything
runs. What the cache does not hold is compiled in a small compile pool (ktt.compile_pool),
as ``ktt tune`` does: each compile in a process of its own, under the pool's memory limit
(``KTT_COMPILE_MEMORY_MB``: a kernel that makes NVRTC allocate without end is one
``out of memory`` error, and the check goes on) and cut off at ``KTT_COMPILE_TIMEOUT_S``
by killing its process; once one compile of the kernel was cut off the remaining ones are
not started (the same source would spin again), so a check lasts about one compile
timeout at worst. Its work directory is ``ktt-check-<pid>-*`` in the temporary directory,
removed at its end, and by the next check or tune when a kill left it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import random
import sys
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ktt import sandbox
from ktt.candidates import (
    CompileContext,
    KernelSource,
    geometry_problems,
    launch_plan,
    protocol_diagnostics,
    target_arch,
)
from ktt.capped_read import MAX_KERNEL_BYTES, describe_read_error, read_text_capped
from ktt.check_sample import LARGEST, MOST_SMEM, SMALLEST, case_config, extreme_keys, requested_keys
from ktt.compile_cache import default_cache_dir, lookup
from ktt.compile_pool import CompilePool, remove_stale_dirs
from ktt.expressions import ExpressionError
from ktt.instruction_mix import DisassemblyError, KernelMixResult, Mix, ptx_mix, sass_mix
from ktt.launch_program import iter_launches
from ktt.nvrtc import CompileOutput, CompileRequest, compile_timeout_s, kernel_definition_lines
from ktt.occupancy import launch_occupancy, parse_ptxas_log
from ktt.problem import ProblemError
from ktt.problem.model import Problem, Shape, strip_c_comments
from ktt.protocol import CheckedConfig, CheckReport, InstructionCounts, KernelMix
from ktt.space import Key, SearchSpace
from ktt.spec import Config, TuningSpec, load_spec, load_spec_text
from ktt.target import defined_sm_count, sm_count_for, with_sm_count
from ktt.toolkit import resolve_arch
from ktt.workdir import WorkDir

ENUMERATION_LIMIT = 200_000
EXTREME_POOL = 400  # random configurations the extremes are picked from when the space is not listed
MIX_ROLES = ("requested", LARGEST, MOST_SMEM, SMALLEST)  # the configurations whose instruction mix is read
MAX_MIXES = 6  # the named configurations first, then the extremes
MAX_PTX_MIXES = 2  # without a disassembler, each mix is one more (PTX) compile
COMPILE_THREAD = "ktt-sandboxed-compile"  # the name ktt.sandbox gives a compile's thread
MAX_CHECK_WORKERS = 4
VERBOSE_PTXAS = "-Xptxas=-v"  # registers, spills and shared memory per kernel, in the program log


def verbose(req: CompileRequest) -> CompileRequest:
    """``req`` with ptxas's resource report (the code is the same; the cache key differs)."""
    if any(o in (VERBOSE_PTXAS, "-Xptxas=--verbose") for o in req.options):
        return req
    return dataclasses.replace(req, options=(*req.options, VERBOSE_PTXAS))


def oversize_kernel(source: str, name: str) -> str | None:
    """One line when the kernel is larger than ktt compiles, else None."""
    size = len(source.encode("utf-8", errors="replace"))
    if size <= MAX_KERNEL_BYTES:
        return None
    return f"{name}: {size:,} bytes, larger than the limit of {MAX_KERNEL_BYTES:,} for a kernel; nothing was compiled"


def compiles_still_running() -> bool:
    """True while a compile thread runs on, such as one cut off at its time limit."""
    return any(t.name == COMPILE_THREAD and t.is_alive() for t in threading.enumerate())


def exit_code(code: int) -> int:
    """``code``, or the process ends here with it when a cut-off compile still runs (see above)."""
    if compiles_still_running():
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


def defined_kernels(source: str) -> set[str]:
    """Names of ``__global__`` functions defined in the source (comments ignored)."""
    return set(kernel_definition_lines(strip_c_comments(source)))


def _looks_like_path(value: str | Path) -> bool:
    if isinstance(value, Path):
        return True
    text = value.strip()
    return "\n" not in text and len(text) < 4096 and text.endswith((".yaml", ".yml"))


def _load_spec(problem: Problem, spec: str | Path) -> tuple[TuningSpec, str]:
    if _looks_like_path(spec):
        return load_spec(spec, problem), str(spec)
    return load_spec_text(str(spec), problem), "tuning.yaml"


def check_kernel(
    problem: Problem,
    kernel_source: str,
    spec: str | Path,
    *,
    sample: int = 4,
    arch: str | None = None,
    seed: int = 0,
    kernel_name: str = "kernels.cu",
    kernel_path: Path | None = None,
    cache_dir: str | Path | None = None,
    work_dir: Path | None = None,
    configs: list[dict] | None = None,
    sm_count: int | None = None,
) -> CheckReport:
    """Compile-check ``kernel_source`` against ``spec`` (a path or YAML text). Never raises for user errors.

    ``arch`` names the GPU (default: the device, else the problem's compute capability, else
    sm_90); the compile target follows from it as in ``ktt tune`` (ktt.candidates.target_arch).
    The sample holds the extremes of the space (ktt.extremes) and ``sample`` configurations in
    all; ``configs`` (at most ``MAX_REQUESTED``) are checked as well. ``sm_count``: the value of
    ``SM_COUNT`` (ktt.target; default: the GPU, else the arch's GPU in ktt.gpu_catalog)."""
    arch_name, _ = resolve_arch(arch, problem.compute_capability, problem.gpu_indices[0])
    problem = with_sm_count(problem, sm_count_for(sm_count, None if arch else problem.gpu_indices[0], arch_name))
    spec_label = str(spec) if _looks_like_path(spec) else "tuning.yaml"
    report = CheckReport(
        ok=False,
        kernel_file=str(kernel_path or kernel_name),
        spec_file=spec_label,
        arch=arch_name,
        space_size=0,
        sampled=0,
        sm_count=defined_sm_count(problem),
    )
    too_big = oversize_kernel(kernel_source, kernel_name)
    if too_big is not None:
        report.message = too_big
        return report
    hits = problem.forbid_hits(kernel_source)
    if hits:
        report.forbid = [str(h) for h in hits]
        report.message = f"{kernel_name}: {hits[0]}"
        return report
    try:
        tspec, report.spec_file = _load_spec(problem, spec)
        arch_name = report.arch = target_arch(arch_name, tspec, problem)
    except ProblemError as exc:
        report.message = str(exc)
        return report
    report.space_size = tspec.space_size()
    space = SearchSpace(tspec.tune_params, tspec.restrictions, problem.primary.scalars)
    keys = space.enumerate(ENUMERATION_LIMIT)
    rng = random.Random(seed)
    roles: dict[Key, list[str]] = {}
    if keys is not None:
        report.restricted_size = len(keys)
        if not keys:
            report.message = "no configuration satisfies the restrictions" + (f" ({space.note})" if space.note else "")
            return report
        pool = keys
    else:
        pool = []
        seen: set = set()
        for _ in range(EXTREME_POOL):
            k = space.sample(rng, seen, time_budget_s=0.2)
            if k is None:
                break
            seen.add(k)
            pool.append(k)
        if not pool:
            report.message = "no configuration satisfying the restrictions was found by sampling"
            return report
    for role, key in extreme_keys(space, pool, tspec, problem.primary, rng).items():
        roles.setdefault(key, []).append(role)
    chosen = list(roles)
    rest = [k for k in pool if k not in roles]
    for key in rng.sample(rest, min(max(0, max(1, sample) - len(chosen)), len(rest))):
        roles[key] = ["sampled"]
        chosen.append(key)
    requested, report.requested_errors = requested_keys(space, configs or [])
    for key in requested:
        if key in roles:
            roles[key].append("requested")
        else:
            roles[key] = ["requested"]
            chosen.append(key)

    case_jobs: list[tuple[Config, Shape]] = []
    for case in problem.shapes[1:]:
        picked, report.case_sizes[case.name] = case_config(tspec, chosen, case, rng)
        if picked is None:
            sizes = ", ".join(f"{k}={v}" for k, v in case.scalars.items())
            report.message = (f"case {case.name}: no configuration satisfies the restrictions at its sizes ({sizes}); "
                              "its tuning would find nothing valid")  # fmt: skip
            return report
        case_jobs.append((picked, case))

    kernel = KernelSource(kernel_source, kernel_path.resolve() if kernel_path else Path(kernel_name), kernel_name)
    tmp_root = tempfile.gettempdir()
    remove_stale_dirs(tmp_root)  # work directories of checks that were killed
    with tempfile.TemporaryDirectory(prefix=f"ktt-check-{os.getpid()}-", dir=tmp_root) as tmp:
        work = WorkDir(work_dir or Path(tmp))
        ctx = CompileContext(problem, tspec, kernel, work, arch_name)
        jobs: list[tuple[Config, Shape]] = [(space.config(k), problem.primary) for k in chosen]
        jobs += case_jobs
        for shape in {s.name: s for _, s in jobs}.values():
            ctx._inputs_hpp(shape)
        outcomes = _compile_jobs(ctx, tspec, jobs, str(cache_dir or default_cache_dir()), arch_name)
        for (checked, _, _), (config, shape) in zip(outcomes, jobs, strict=True):
            if shape is problem.primary:
                checked.roles = list(roles.get(space.key(config), []))
        add_instruction_mix(ctx, outcomes, jobs, str(cache_dir or default_cache_dir()))
    report.configs = [c for c, _, _ in outcomes]
    report.sampled = len(chosen)
    wanted = [launch.kernel for launch in tspec.kernel_launches()]
    compiled = next((out for _, out, _ in outcomes if out is not None and out.ok), None)
    available = set(compiled.kernels) if compiled is not None else defined_kernels(kernel_source)
    report.missing_kernels = sorted({k for k in wanted if k not in available})
    ok = all(c.ok for c in report.configs) and not report.missing_kernels
    report.ok = ok
    if not ok:
        bad = next((c for c in report.configs if not c.ok), None)
        if bad is not None:
            report.message = bad.error or "a configuration failed"
        else:
            name = report.missing_kernels[0]
            hint = '; it is defined but not extern "C"' if name in defined_kernels(kernel_source) else ""
            report.message = f"launches name kernel {name!r}, which {kernel_name} does not define{hint}"
    return report


Outcome = tuple[CheckedConfig, CompileOutput | None, list[dict] | None]


def _compile_jobs(
    ctx: CompileContext, tspec: TuningSpec, jobs: list[tuple[Config, Shape]], cache: str, arch: str
) -> list[Outcome]:
    """Each job's outcome, in order: geometry first, then the cache, then the compile pool for the rest."""
    limit_s = compile_timeout_s()
    outcomes: list[Outcome | None] = [None] * len(jobs)
    plans: dict[int, list[dict]] = {}
    todo: list[int] = []
    for i, (config, shape) in enumerate(jobs):
        try:
            plans[i], _ = launch_plan(tspec, config, shape)
        except ExpressionError as exc:
            checked = CheckedConfig(config=config, ok=False, error=f"launch geometry: {exc}", shape=shape.name)
            outcomes[i] = (checked, None, None)
            continue
        found = lookup(verbose(ctx.request(config, shape)), cache)
        if found is not None:
            outcomes[i] = _outcome(config, shape, found[0], plans[i], arch)
        else:
            todo.append(i)
    if todo:
        workers = min(MAX_CHECK_WORKERS, len(todo), os.cpu_count() or 1)
        with CompilePool(workers, cache, timeout_s=limit_s, pch=False) as pool:
            # At most one compile per worker is handed over, so none starts after a cut-off one.
            futures = {i: pool.submit(verbose(ctx.request(*jobs[i]))) for i in todo[:workers]}
            cut_off = False  # a compile of this kernel did not finish in time: the same source would spin again
            for n, i in enumerate(todo):
                config, shape = jobs[i]
                if i not in futures:
                    skipped = f"not compiled: a compile of this kernel did not finish within {limit_s:g} s"
                    outcomes[i] = (CheckedConfig(config=config, ok=False, error=skipped, shape=shape.name), None, None)
                    continue
                out, _ = futures[i].result()
                cut_off = cut_off or out.timed_out
                if not cut_off and n + workers < len(todo):
                    following = todo[n + workers]
                    futures[following] = pool.submit(verbose(ctx.request(*jobs[following])))
                outcomes[i] = _outcome(config, shape, out, plans[i], arch)
    return [o for o in outcomes if o is not None]


def _outcome(config: Config, shape: Shape, out: CompileOutput, launches: list[dict], arch: str) -> Outcome:
    problem_text = geometry_problems(launches)
    resources = parse_ptxas_log(out.log) if out.ok else []
    checked = CheckedConfig(
        config=config,
        ok=out.ok and problem_text is None,
        compile_s=round(out.seconds, 4),
        diagnostics=protocol_diagnostics(out),
        shape=shape.name,
        error=out.first_error() or problem_text,
        binary_sha256=hashlib.sha256(out.cubin).hexdigest() if out.ok and out.cubin else None,
        resources=resources,
        occupancy=launch_occupancy(iter_launches(launches), resources, arch),
    )
    return checked, out, launches


def _counts(mix: Mix) -> InstructionCounts:
    return InstructionCounts(total=mix.total, counts=dict(mix.counts), detail=dict(mix.detail))


def _protocol_mix(results: list[KernelMixResult], isa: str) -> list[KernelMix]:
    return [
        KernelMix(
            kernel=r.name,
            isa=isa,  # type: ignore[arg-type]
            mix=_counts(r.mix),
            loop=_counts(r.loop.own) if r.loop is not None else None,
            loop_nested=r.loop.nested if r.loop is not None else 0,
        )
        for r in results
    ]


def add_instruction_mix(
    ctx: CompileContext, outcomes: list[Outcome], jobs: list[tuple[Config, Shape]], cache: str
) -> None:
    """The instruction mix of the extremes and the requested configurations that compiled (ktt.instruction_mix):
    SASS from their cubins, else PTX from one more compile each (at most MAX_PTX_MIXES)."""
    targets = [
        i for i, (checked, out, _) in enumerate(outcomes)
        if checked.ok and out is not None and out.cubin and any(r in MIX_ROLES for r in checked.roles)
    ]  # fmt: skip
    # The ones named first, then the extremes in MIX_ROLES' order (the PTX route reads only a few).
    targets = sorted(targets, key=lambda i: min(MIX_ROLES.index(r) for r in outcomes[i][0].roles if r in MIX_ROLES))
    targets = targets[:MAX_MIXES]
    missing: str | None = None
    if not targets:
        return

    def read(i: int) -> list[KernelMix]:
        out = outcomes[i][1]
        assert out is not None and out.cubin is not None
        return _protocol_mix(sass_mix(out.cubin), "SASS")

    with ThreadPoolExecutor(max_workers=min(len(targets), MAX_CHECK_WORKERS)) as disassemblers:
        futures = {i: disassemblers.submit(read, i) for i in targets}
        for i, future in futures.items():
            try:
                outcomes[i][0].instruction_mix = future.result()
            except DisassemblyError as exc:
                missing = missing or str(exc)
    if missing is None:
        return
    targets = [i for i in targets if not outcomes[i][0].instruction_mix]
    ptx_targets = targets[:MAX_PTX_MIXES]
    with CompilePool(min(len(ptx_targets), MAX_CHECK_WORKERS), cache, timeout_s=compile_timeout_s(), pch=False) as pool:
        futures = {i: pool.submit(dataclasses.replace(ctx.request(*jobs[i]), output="ptx")) for i in ptx_targets}
        for i, future in futures.items():
            checked = outcomes[i][0]
            ptx, _ = future.result()
            if ptx.ok and ptx.cubin:
                checked.instruction_mix = _protocol_mix(ptx_mix(ptx.cubin.decode(errors="replace")), "PTX")
                checked.mix_note = f"PTX (NVRTC's virtual ISA, before ptxas): {missing}"
            else:
                checked.mix_note = f"no instruction mix: {missing}, and the PTX compile failed ({ptx.first_error()})"
    for i in targets[MAX_PTX_MIXES:]:
        outcomes[i][0].mix_note = f"no instruction mix: {missing} (PTX is read for {MAX_PTX_MIXES} configurations)"


def check_files(
    problem_dir: Path,
    kernel: Path,
    spec: Path,
    *,
    sample: int = 4,
    arch: str | None = None,
    seed: int = 0,
    cache_dir: str | Path | None = None,
    configs: list[dict] | None = None,
    sm_count: int | None = None,
) -> tuple[CheckReport, int]:
    """The CLI's entry: (report, exit code 0 ok / 1 not ok / 2 bad input)."""
    from ktt.problem import load_problem

    base = CheckReport(ok=False, kernel_file=str(kernel), spec_file=str(spec), arch=arch or "", space_size=0, sampled=0)
    try:
        problem = load_problem(problem_dir)
    except ProblemError as exc:
        return base.model_copy(update={"message": str(exc)}), 2
    try:
        text = read_text_capped(kernel, MAX_KERNEL_BYTES)  # a regular file, size-capped
    except (OSError, UnicodeDecodeError) as exc:
        why = describe_read_error(exc)
        if why.endswith(f"larger than the limit of {MAX_KERNEL_BYTES:,}"):
            why += " for a kernel; nothing was compiled"
        return base.model_copy(update={"message": f"{kernel}: {why}"}), 2
    if not spec.exists():
        return base.model_copy(update={"message": f"{spec}: file not found"}), 2
    if not sandbox.landlock_abi():
        print(f"ktt: warning: {sandbox.status()}", file=sys.stderr)  # docs/SECURITY.md
    report = check_kernel(
        problem,
        text,
        spec,
        sample=sample,
        arch=arch,
        seed=seed,
        kernel_name=kernel.name,
        kernel_path=kernel,
        cache_dir=cache_dir,
        configs=configs,
        sm_count=sm_count,
    )
    if report.ok:
        return report, 0
    spec_error = report.sampled == 0 and not report.forbid and report.restricted_size is None and report.space_size == 0
    return report, 2 if spec_error else 1
