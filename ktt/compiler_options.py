"""The compiler options a tuning spec may pass to NVRTC: a whitelist of exact forms.

Anything that changes numerics (fast math, flush-to-zero, fmad) is refused: EVALUATION.md
forbids reduced precision unless the problem allows it. So is every option that names a
file, because the spec is model-written: NVRTC's ``--pre-include``/``-include``,
``--use-pch``/``--create-pch``/``--pch-dir``, ``--time``, ``--fdevice-time-trace`` and
``-I``, and ptxas's ``--options-file``/``-optf``, ``--output-file``/``-o`` and
``--dump-callgraph`` would let it read or write host files
(``-Xptxas=--options-file,/etc/shadow`` echoes the file line by line in the log).
Free-form ptxas options are not accepted either: each comma-separated part of
``-Xptxas=...`` must itself be one of the forms below. No cuda import here, so the spec
loader can use it anywhere.
"""

from __future__ import annotations

import re

FLAG_OPTIONS = {
    "-lineinfo": ("lineinfo", True),
    "--generate-line-info": ("lineinfo", True),
    "-default-device": ("device_as_default_execution_space", True),
    "--extra-device-vectorization": ("extra_device_vectorization", True),
    "-restrict": ("restrict", True),
    "--restrict": ("restrict", True),
    "-dopt=on": ("device_code_optimize", True),
    "-dopt=off": ("device_code_optimize", False),
}
MAXRREG = re.compile(r"--?maxrregcount=(\d{1,3})")
PTXAS_PREFIX = re.compile(r"(?:-Xptxas=|--ptxas-options=)(.*)", re.S)
_PTXAS_FLAGS = frozenset(
    {
        "-v", "--verbose", "-O0", "-O1", "-O2", "-O3",
        "--warn-on-spills", "-warn-spills", "--warn-on-local-memory-usage", "-warn-lmem-usage",
        "--warn-on-double-precision-use", "-warn-double-usage",
        "--allow-expensive-optimizations=true", "--allow-expensive-optimizations=false",
        "--suppress-stack-size-warning", "--disable-optimizer-constants",
    }
)  # fmt: skip
_PTXAS_VALUED = re.compile(
    r"(?:--?maxrregcount=\d{1,3}|--opt-level=[0-3]|--def-load-cache=(?:ca|cg|cv|cs|lu)"
    r"|--def-store-cache=(?:wb|cg|cs|wt)|-dlcm=(?:ca|cg)|-dscm=(?:wb|cg|cs|wt))"
)
ALLOWED_OPTIONS_TEXT = (
    "-lineinfo, -maxrregcount=N, -Xptxas=<ptxas flags: -v, -O0..-O3, --warn-on-spills, --maxrregcount=N, "
    "--def-load-cache=.., ...>, -dopt=on|off, --extra-device-vectorization, -restrict, -default-device"
)


def option_problem(opt: str) -> str | None:
    """Why ``opt`` may not be passed to NVRTC, or None when it is one of the allowed exact forms."""
    if opt in FLAG_OPTIONS or MAXRREG.fullmatch(opt):
        return None
    m = PTXAS_PREFIX.fullmatch(opt)
    if m:
        parts = m.group(1).split(",")
        for part in parts:
            if part not in _PTXAS_FLAGS and not _PTXAS_VALUED.fullmatch(part):
                shown = part if len(part) <= 60 else part[:60] + "..."
                return f"ptxas option {shown!r} is not allowed (allowed: {', '.join(sorted(_PTXAS_FLAGS))}, ...)"
        return None
    return f"not allowed (fast-math, precision and file options are refused; allowed: {ALLOWED_OPTIONS_TEXT})"
