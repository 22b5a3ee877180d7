"""check_compilation: forbid rules first, then NVRTC (through ktt) over a sample of configurations.

What the model reads: which configurations were compiled and why (the extremes of the space,
a random sample, the ones it named), each one's registers, spills (also when none), shared
memory and the occupancy they allow with the limit that binds, the instruction mix of the
extremes and of the named configurations (what the kernel executes: FFMA, MUFU, loads,
barriers, tensor-core ops, in the kernel and in its main loop), and on a failure every distinct
compiler message once, with how often it occurred, mapped to its kernels.cu line.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from cacao_tui.ktt_client import CheckOptions, TunerError
from cacao_tui.nodes.branch_queries import outcome_line
from cacao_tui.nodes.context import BranchView, RunDeps
from cacao_tui.nodes.fingerprint import binary_fingerprint, source_fingerprint
from cacao_tui.nodes.target import target_of
from cacao_tui.nodes.tuner_output import config_text
from cacao_tui.nodes.workspace import read_model_file
from ktt.capped_read import describe_read_error
from ktt.check_sample import MAX_REQUESTED
from ktt.instruction_mix import ORDER
from ktt.protocol import CheckedConfig, CheckReport, InstructionCounts, KernelMix, LaunchOccupancy

MAX_REPORTED = 30  # distinct compiler messages
MAX_RESOURCE_LINES = 10
MAX_MIX_CONFIGS = 2  # named configurations whose instruction mix is shown (none named: the largest alone)
EXTREMES = ("largest parameter values", "smallest parameter values", "most dynamic shared memory",
            "least dynamic shared memory")  # fmt: skip


@dataclass
class CheckOutcome:
    ok: bool
    text: str  # what the model reads
    report: CheckReport | None = None
    fingerprints: tuple[str | None, str | None] = (None, None)  # source, binary (nodes/fingerprint.py)


class ConfigsArgument(ValueError):
    """check_compilation(configs=...) that is not a list of configurations."""


def configs_argument(value: object) -> tuple[dict, ...]:
    """The ``configs`` argument of check_compilation: a list of objects (one object is one)."""
    if value is None or value == "" or value == []:
        return ()
    items = [value] if isinstance(value, dict) else value
    if not isinstance(items, list) or not all(isinstance(v, dict) for v in items):
        raise ConfigsArgument('configs must be a list of objects of tune-parameter values, e.g. [{"BX": 16}]')
    if len(items) > MAX_REQUESTED:
        raise ConfigsArgument(f"configs: at most {MAX_REQUESTED} configurations per check, {len(items)} given")
    return tuple(items)


def _source_line(source: str, line: int | None) -> str:
    if not line:
        return ""
    lines = source.splitlines()
    return lines[line - 1].strip() if 0 < line <= len(lines) else ""


def _limit_text(o: LaunchOccupancy) -> str:
    if o.limiter == "warps":
        return "full" if o.occupancy >= 0.999 else "the SM's threads at this block size"
    if o.limiter == "blocks":
        return "blocks per SM: small blocks"
    return o.limiter


ROLE_TEXT = {
    "largest parameter values": "largest values",
    "smallest parameter values": "smallest values",
    "most dynamic shared memory": "most dynamic smem",
    "least dynamic shared memory": "least dynamic smem",
    "sampled": "random",
    "requested": "named",
}


def _roles(c: CheckedConfig) -> list[str]:
    return [ROLE_TEXT.get(r, r) for r in c.roles]


def _tags(report: CheckReport) -> dict[int, list[str]]:
    """Each configuration's roles, plus the most and least register- and shared-memory-hungry of what compiled."""
    tags = {i: _roles(c) for i, c in enumerate(report.configs)}
    built = [(i, c) for i, c in enumerate(report.configs) if c.ok and c.resources]
    if len(built) > 1:
        regs = {i: max(r.registers or 0 for r in c.resources) for i, c in built}
        smem = {i: max((o.smem_bytes for o in c.occupancy), default=0) for i, c in built}
        for values, most, least in ((regs, "most registers", "fewest registers"),
                                    (smem, "most smem", "least smem")):  # fmt: skip
            if max(values.values()) != min(values.values()):
                tags[max(values, key=lambda i: values[i])].append(most)
                tags[min(values, key=lambda i: values[i])].append(least)
    return tags


def resource_head(report: CheckReport) -> str:
    """The line over the resource lines: which kernel (when there is one)."""
    kernels = {r.kernel for c in report.configs for r in c.resources}
    of = f" of {next(iter(kernels))}" if len(kernels) == 1 else " per kernel"
    return f"Resources (ptxas){of}, most registers first, and the occupancy they allow (its limit):"


def resource_lines(report: CheckReport, limit: int = MAX_RESOURCE_LINES, *, sampled: bool = True) -> list[str]:
    """Per compiled configuration: registers, spills (also when none), shared memory and the occupancy
    they allow with what limits it; ``sampled``: with the random ones that are no extreme of the
    parameters, the registers or the shared memory (else only a count of them)."""
    out: list[str] = []
    tags = _tags(report)
    order = sorted(range(len(report.configs)), key=lambda i: -_max_registers(report.configs[i]))
    primary = report.configs[0].shape if report.configs else "default"
    one_kernel = len({r.kernel for c in report.configs for r in c.resources}) == 1
    left_out = 0
    for i in order:
        cfg = report.configs[i]
        if not cfg.resources:
            continue
        if not sampled and tags.get(i) == [ROLE_TEXT["sampled"]] and cfg.shape == primary:  # no extreme of any kind
            left_out += 1
            continue
        shape = f" [shape {cfg.shape}]" if cfg.shape != primary else ""
        parts = []
        occ: dict[str, list[LaunchOccupancy]] = {}
        for o in cfg.occupancy:  # a kernel launched several times (a repeat's passes): each launch
            occ.setdefault(o.kernel, []).append(o)
        for r in cfg.resources:
            spills = r.spill_stores or r.spill_loads
            spilled = f"SPILLS {r.spill_stores} B stored / {r.spill_loads} B loaded" if spills else "0 B spilled"
            if r.stack_bytes:
                spilled += f", {r.stack_bytes} B stack"
            launches = occ.get(r.kernel, [])
            smem = max(o.smem_bytes for o in launches) if launches else (r.smem_static or 0)
            text = ("" if one_kernel else f"{r.kernel}: ") + f"{r.registers} regs, {spilled}, {smem:,} B smem"
            shown = list(dict.fromkeys(
                f"{o.threads} threads -> {o.blocks_per_sm} blocks/SM, {o.occupancy:.0%} ({_limit_text(o)})"
                + _waves_text(o, report.sm_count)
                for o in launches
            ))  # fmt: skip
            if len(shown) == 1:
                text += f"; {shown[0]}"
            elif shown:
                text += f"; its {len(launches)} launches, in order (each shape once): " + " | ".join(shown)
            parts.append(text)
        why = f" [{'; '.join(tags[i])}]" if tags.get(i) else ""
        out.append(f"  {config_text(cfg.config)}{shape}{why}: " + "; ".join(parts))
        if len(out) >= limit:
            break
    if left_out:
        out.append(f"  (+{left_out} at random, none an extreme)")
    return out


FEW_WAVES = 4  # a grid of fewer waves than this has its blocks-per-wave said (a ragged last wave costs)


def _waves_text(o: LaunchOccupancy, sm_count: int | None) -> str:
    """How many waves the launch's grid makes at the occupancy it allows, where they are few."""
    if not sm_count or not o.grid_blocks or o.blocks_per_sm <= 0:
        return ""
    waves = o.grid_blocks / (o.blocks_per_sm * sm_count)
    return f", grid = {waves:.2f} waves" if waves < FEW_WAVES else ""


def _max_registers(c: CheckedConfig) -> int:
    return max((r.registers or 0 for r in c.resources), default=0)


def counts_text(c: InstructionCounts) -> str:
    """``FFMA 2,048, LDS 344 (LDS.128 64), MUFU.RSQ 4``: the categories in a fixed order, each with
    its variants where the disassembly names them (the variant alone where it is all of them)."""
    variants: dict[str, list[tuple[str, int]]] = {}
    for key, n in sorted(c.detail.items()):
        category, _, variant = key.partition(":")
        variants.setdefault(category, []).append((variant, n))
    parts = []
    for k in ORDER:
        if c.counts.get(k):
            shown = variants.get(k, [])[:4]
            if len(shown) == 1 and shown[0][1] == c.counts[k]:
                parts.append(f"{shown[0][0]} {c.counts[k]:,}")
                continue
            extra = f" ({', '.join(f'{v} {m:,}' for v, m in shown)})" if shown else ""
            parts.append(f"{k} {c.counts[k]:,}{extra}")
    parts += [f"{v} {m:,}" for v, m in variants.get("other", [])[:4]]
    return ", ".join(parts) or "no arithmetic or memory instructions"


def mix_lines(report: CheckReport) -> list[str]:
    """The instruction mix of the configurations named (a few), else of the largest extreme alone:
    the one that unrolls the most; the model names others to see theirs."""
    with_mix = [c for c in report.configs if c.instruction_mix]
    with_mix.sort(key=lambda c: ("requested" not in c.roles, "largest parameter values" not in c.roles))
    named = [c for c in with_mix if "requested" in c.roles]
    shown = named[:MAX_MIX_CONFIGS] or with_mix[:1]
    notes = {c.mix_note for c in report.configs if c.mix_note and not c.instruction_mix}
    if not with_mix:
        return [f"Instruction mix: {sorted(notes)[0]}"] if notes else []
    isa = {m.isa for c in shown for m in c.instruction_mix}
    how = "SASS" if isa == {"SASS"} else "PTX from NVRTC, counted before ptxas: no disassembler found"
    how += ", static: a loop body counts once"
    if not named:
        c = shown[0]
        which = f"the {_roles(c)[0]}" if c.roles else config_text(c.config)
        head = f"Instruction mix of {which} ({how}):"
        return [head, *[f"  {_kernel_mix(m)}" for m in c.instruction_mix]]
    out = [f"Instruction mix ({how}):"]
    for c in shown:
        out.append(f"  {config_text(c.config)} [{'; '.join(_roles(c))}]:")
        out += [f"    {_kernel_mix(m)}" for m in c.instruction_mix]
    return out


def _kernel_mix(m: KernelMix) -> str:
    text = f"{m.kernel}, {m.mix.total:,} instructions: {counts_text(m.mix)}"
    if m.loop is not None:
        nested = f", +{m.loop_nested:,} in nested loops" if m.loop_nested else ""
        text += f"; main loop {m.loop.total:,}{nested}: {counts_text(m.loop)}"
    return text


def _what_was_compiled(report: CheckReport) -> str:
    roles = [r for c in report.configs for r in c.roles]
    parts = []
    if any(r in EXTREMES for r in roles):
        parts.append("the extremes of the space")
    n_sampled = sum(1 for c in report.configs if "sampled" in c.roles)
    if n_sampled:
        parts.append(f"{n_sampled} at random")
    n_named = sum(1 for c in report.configs if "requested" in c.roles)
    if n_named:
        parts.append(f"{n_named} you named")
    primary = report.configs[0].shape if report.configs else "default"
    cases = sum(1 for c in report.configs if c.shape != primary)
    if cases:
        sizes = ", ".join(
            f"{name} {size:,}" if size is not None else f"{name} too many to list"
            for name, size in report.case_sizes.items()
        )
        parts.append(f"{cases} for the other shapes" + (f", whose restricted spaces hold: {sizes}" if sizes else ""))
    return ", ".join(parts)


def _head(report: CheckReport, passed: bool) -> str:
    n_ok = sum(1 for c in report.configs if c.ok)
    size = report.restricted_size if report.restricted_size is not None else report.space_size
    what = _what_was_compiled(report)
    sm = f" SM_COUNT = {report.sm_count}." if report.sm_count else ""
    if passed:
        whose = f"the {report.configs[0].shape} shape's space" if report.case_sizes and report.configs else "the space"
        spilling = sum(1 for c in report.configs if any(r.spill_stores or r.spill_loads for r in c.resources))
        spills = f" {spilling} of them SPILL registers." if spilling else ""
        return (f"compile check passed: {n_ok}/{len(report.configs)} configurations compiled for {report.arch} "
                f"({what}; {size:,} in {whose}).{sm}{spills}")  # fmt: skip
    return (f"compile check FAILED: {len(report.configs) - n_ok} of {len(report.configs)} configurations did not "
            f"compile for {report.arch}" + (f" ({what})" if what else "") + ".")  # fmt: skip


def diagnostic_lines(report: CheckReport, source: str, limit: int = MAX_REPORTED) -> list[str]:
    """Every distinct compiler message once (errors first, by line), with how often it occurred."""
    seen: Counter[tuple[str, int | None, str, str]] = Counter()
    configs: dict[tuple[str, int | None, str, str], set[int]] = {}
    for i, cfg in enumerate(report.configs):
        for d in cfg.diagnostics:
            if d.severity == "note":
                continue
            key = (d.severity, d.line, d.file, d.message)
            seen[key] += 1
            configs.setdefault(key, set()).add(i)
        if cfg.error and not cfg.diagnostics:
            key = ("error", None, "configuration", cfg.error)
            seen[key] += 1
            configs.setdefault(key, set()).add(i)
    keys = sorted(seen, key=lambda k: (k[0] != "error", k[1] is None, k[1] or 0, k[3]))
    total = len(report.configs)
    out = []
    for key in keys[:limit]:
        severity, line, file, message = key
        where = f"{file}:{line}" if line else file
        count = f" ×{seen[key]}" if seen[key] > 1 else ""
        spread = f" (in {len(configs[key])} of {total} configurations)" if total > 1 else ""
        code = _source_line(source, line) if file.endswith("kernels.cu") else ""
        if file == "configuration":
            out.append(f"{severity}: {message}{count}{spread}")
        else:
            out.append(f"{where}: {severity}: {message}{count}{spread}" + (f"\n    {code}" if code else ""))
    if len(keys) > limit:
        out.append(f"... and {len(keys) - limit} more distinct messages (fix these first)")
    return out


def format_report(report: CheckReport, source: str) -> str:
    extra = [f"not checked: {e}" for e in report.requested_errors]
    if report.ok:
        out = [_head(report, True), *extra]
        resources = resource_lines(report, sampled=False)  # the extremes bound the random ones
        if resources:
            out += [resource_head(report), *resources]
        out += mix_lines(report)
        return "\n".join(out)
    out = [_head(report, False) if report.configs else "compile check FAILED."]
    has_diagnostics = any(c.diagnostics or c.error for c in report.configs)
    if report.message and not has_diagnostics:
        out.append(report.message)
    out += [f"forbidden: {hit}" for hit in report.forbid]
    if report.missing_kernels:
        out.append(f"kernels named in tuning.yaml but not defined in kernels.cu: {', '.join(report.missing_kernels)}")
    out += diagnostic_lines(report, source)
    out += extra
    resources = resource_lines(report)
    if resources:
        out.append(resource_head(report).replace("Resources (ptxas)", "Resources of the configurations that compiled"))
        out += resources
    return "\n".join(out)


def check_options(deps: RunDeps, configs: tuple[dict, ...] = ()) -> CheckOptions:
    return CheckOptions(configs=configs, sm_count=target_of(deps).sm_count)


async def check_compilation(deps: RunDeps, branch: BranchView, configs: object = None) -> CheckOutcome:
    it = branch.it
    try:
        named = configs_argument(configs)
    except ConfigsArgument as exc:
        return CheckOutcome(False, f"check_compilation: {exc}")
    if not it.kernel.exists() or not it.spec.exists():
        missing = [n for n, p in (("kernels.cu", it.kernel), ("tuning.yaml", it.spec)) if not p.exists()]
        return CheckOutcome(False, f"compile check FAILED: {' and '.join(missing)} not written yet")
    try:
        source = read_model_file(it.kernel)  # a regular file within the kernel cap
    except OSError as exc:
        return CheckOutcome(False, f"compile check FAILED: kernels.cu: {describe_read_error(exc)}")
    hits = deps.problem.forbid_hits(source)
    if hits:
        return CheckOutcome(
            False, "compile check FAILED (rules.forbid):\n" + "\n".join(f"kernels.cu {h}" for h in hits)
        )
    try:
        report = await deps.tuner.check(
            deps.problem.directory,
            it.kernel,
            it.spec,
            sample=deps.defaults.check_sample,
            arch=deps.gpu.arch,
            options=check_options(deps, named),
        )
    except TunerError as exc:
        return CheckOutcome(False, f"compile check FAILED: {exc}")
    text = format_report(report, source)
    fingerprints: tuple[str | None, str | None] = (None, None)
    if report.ok:
        spec = read_model_file(it.spec)
        fingerprints = (source_fingerprint(source, spec), binary_fingerprint(spec, report))
        earlier = deps.tuned.find(list(fingerprints))
        if earlier is not None:
            text += (
                f"\nNOTE: these files are the kernel and tuning space of {earlier.where}, tuned already "
                f"({outcome_line(earlier.outcome)}); they would not be tuned again. Change something that matters."
            )
    return CheckOutcome(report.ok, text, report, fingerprints)


__all__ = ["CheckOutcome", "CheckedConfig", "check_compilation", "format_report", "resource_lines"]
