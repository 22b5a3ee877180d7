"""The ``validate`` authoring tool: one configuration of the current files, on the GPU, for
correctness only (``ktt validate``: both input sets, every scored shape, no timing).

A wrong kernel is found inside the authoring step, where fixing it costs a tool call, not
an iteration. It waits for the GPU like any GPU job (the run's device lease, bounded by
``Defaults.validate_wait_s``), runs within ``Defaults.validate_timeout_s``, and may be used
``Defaults.validate_uses`` times per step. The answer says pass or fail, and on a failure
how many elements differ of how many and up to 8 of them (index, expected, got).
"""

from __future__ import annotations

import asyncio

from cacao_tui.ktt_client import TunerError, ValidateRequest
from cacao_tui.nodes.context import BranchView, RunDeps
from cacao_tui.nodes.tuner_output import config_text, validation_text
from ktt.capped_read import parse_json
from ktt.protocol import CheckReport, ValidateReport

MAX_CONFIG_CHARS = 2000
MAX_PARAMS = 64


class ValidateRefused(Exception):
    """A call the tool cannot run (bad arguments, no files); told to the model as a tool error."""


def config_argument(value: object) -> dict[str, int | float | str] | None:
    """The ``config`` argument: None, or a small JSON object of scalar values."""
    if value is None or value == {}:
        return None
    if isinstance(value, str):
        if len(value) > MAX_CONFIG_CHARS:
            raise ValidateRefused("validate: config is too long")
        try:
            value = parse_json(value)  # nesting too deep is a ValueError too
        except ValueError:
            raise ValidateRefused("validate: config must be an object of tune parameter values") from None
    if not isinstance(value, dict) or len(value) > MAX_PARAMS:
        raise ValidateRefused("validate: config must be an object of tune parameter values, like {\"BX\": 16}")
    out: dict[str, int | float | str] = {}
    for k, v in value.items():
        if not isinstance(k, str) or len(k) > 64 or isinstance(v, bool) or not isinstance(v, int | float | str):
            raise ValidateRefused(f"validate: {str(k)[:40]!r} must name a tune parameter with a number or string value")
        out[k] = v if not isinstance(v, str) else v[:200]
    return out


def default_config(report: CheckReport | None) -> dict[str, int | float | str] | None:
    """The first configuration the last passing compile check compiled (None: ktt's first)."""
    if report is None:
        return None
    for c in report.configs:
        if c.ok and c.shape == "default":
            return dict(c.config)
    return next((dict(c.config) for c in report.configs if c.ok), None)


def report_text(report: ValidateReport) -> str:
    config = config_text(report.config) or "the first configuration"
    if report.ok:
        shapes = ", ".join(r.shape for r in report.shapes)
        took = f" in {report.seconds:.1f} s" if report.seconds else ""
        return f"validate: VALID on both input sets for {config} (shapes: {shapes}){took}."
    if not report.shapes:
        return f"validate: could not run {config}: {report.message or 'no result'}"
    bad = next((r for r in report.shapes if r.status != "ok"), report.shapes[-1])
    detail = validation_text(bad.validation) if bad.validation is not None else ""
    text = f"validate: NOT VALID: {config} on shape {bad.shape}: {bad.status}"
    if bad.error:
        text += f": {bad.error}"
    if detail and detail not in (bad.error or ""):
        text += f"\n{detail}"
    return text


async def validate_files(
    deps: RunDeps, branch: BranchView, config: dict[str, int | float | str] | None
) -> tuple[bool, str]:
    """(whether it ran, the answer for the model)."""
    it = branch.it
    if not it.kernel.is_file() or not it.spec.is_file():
        raise ValidateRefused("validate: write kernels.cu and tuning.yaml first (and check_compilation)")
    limits = deps.defaults
    lease = deps.devices.acquire()
    try:
        device = await asyncio.wait_for(lease.__aenter__(), limits.validate_wait_s)
    except TimeoutError:
        return False, f"validate: the GPU stayed busy for {limits.validate_wait_s:g} s (another branch is tuning)"
    try:
        report = await deps.tuner.validate(
            ValidateRequest(
                problem_dir=deps.problem.directory, kernel=it.kernel, spec=it.spec, out_dir=it.root / "validate",
                device=device, config=config, timeout_s=limits.validate_timeout_s,
            )
        )  # fmt: skip
    except TunerError as exc:
        return False, f"validate could not run: {exc}"
    finally:
        await lease.__aexit__(None, None, None)
    branch.reporter.log(("valid: " if report.ok else "NOT valid: ") + (config_text(report.config) or "first config"))
    return True, report_text(report)
