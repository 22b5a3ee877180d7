"""Write problems/old_run/output/: a run laid out as the original CACAO writes it (the files are committed).

Written for this project from the original's state models (lukdmine/CACAO state/types.py:
Context, BranchManifest, IterState; utils/files.py: strategy.json and iterN/; utils/results.py:
KTT's results.json; nodes/merge.py and cli.py: final_results.json), not copied from a run. The
run: three top-level branches, one with a nested sub-branch (``branches/<b>/branches/<sub>``),
a branch that failed, one that was still running, times in microseconds, decisions per
iteration, and a reference time seeded in µs. test_original_runs.py checks that the committed
files are what this script writes, then reads them through ``cacao --best``.

    python tests/compat/make_original_output.py          # rewrite the fixture
    python tests/compat/make_original_output.py --check  # exit 1 when the fixture is out of date
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
OUTPUT = HERE / "problems" / "old_run" / "output"
REFERENCE_US = 2400.0

KERNEL = """extern "C" __global__ void relu(const float* X, float* Y) {
    const long long i = (long long)blockIdx.x * BLOCK + threadIdx.x;
    if (i < N) Y[i] = fmaxf(X[i], 0.0f);
}
"""


def strategy(name: str, description: str) -> dict[str, Any]:
    return {"name": name, "description": description, "hypothesis": f"{name} moves fewer bytes", "key_parameters": []}


def ktt_results(rows: list[tuple[dict[str, int], str, float]]) -> dict[str, Any]:
    """KTT's JSON output: each configuration's status and its computation's duration (µs)."""
    return {
        "Metadata": {"TimeUnit": "Microseconds", "Device": "NVIDIA H200"},
        "Results": [
            {
                "KernelName": "AgentKernel",
                "Status": status,
                "Configuration": [{"Name": k, "Value": v} for k, v in config.items()],
                "ComputationResults": [{"KernelFunction": "relu", "Duration": us}] if status == "Ok" else [],
                "TotalDuration": us * 1.05 if status == "Ok" else 0.0,
            }
            for config, status, us in rows
        ],
    }


def iteration(
    index: int,
    status: str,
    rows: list[tuple[dict[str, int], str, float]] | None,
    action: str | None,
    next_status: str | None = None,
) -> dict[str, dict[str, Any] | str]:
    """The files of one iteration directory: state.json (IterState), and results.json where it ran."""
    files: dict[str, dict[str, Any] | str] = {"kernels.cu": KERNEL}
    state: dict[str, Any] = {
        "iter_num": index,
        "status": status,
        "plan": f"iteration {index}: widen the loads",
        "kernel_code": KERNEL,
        "run_output": "[Info] Reference result ... computed in 2400us\n",
        "feedback": "",
        "user_messages": [],
        "proposal": "try a larger BLOCK" if action else "",
    }
    if next_status:
        state["next_status"] = next_status
    if action:
        state["decision"] = {"action": action, "reasoning": f"after iteration {index}"}
    if rows is not None:
        results = ktt_results(rows)
        files["results.json"] = results
        ok = [(c, us) for c, s, us in rows if s == "Ok"]
        best = min(ok, key=lambda x: x[1]) if ok else None
        state["results_summary"] = {
            "has_success": bool(ok),
            "num_successful": len(ok),
            "num_total": len(rows),
            "best_config": best[0] if best else None,
            "best_time_us": best[1] if best else None,
            "reference_time_us": REFERENCE_US,
            "speedup": REFERENCE_US / best[1] if best else None,
        }
    files["state.json"] = state
    return files


def manifest(strat: dict[str, Any], depth: int, current: int, status: str, best_us: float | None) -> dict[str, Any]:
    """branch.json as the original saves it (model_dump(exclude_none=True))."""
    data: dict[str, Any] = {
        "strategy": strat,
        "branch_depth": depth,
        "path_iters_consumed": 0,
        "current_iter": current,
        "max_iter": 5,
        "status": status,
    }
    if best_us is not None:
        data["best_time_us"] = best_us
        data["speedup"] = REFERENCE_US / best_us
    return data


def tree() -> dict[str, Any]:
    """Relative path -> JSON data (dict) or text (str)."""
    files: dict[str, Any] = {
        "context.json": {"analysis": "A memory-bound elementwise max over 4 MiB.", "gpu_info": {"name": "NVIDIA H200"}},
        "reference_time.json": {"reference_time_us": REFERENCE_US},
        "strategies.json": [
            strategy("vectorized", "float4 loads and stores"),
            strategy("grid_stride", "a grid-stride loop"),
        ],
        "run.log": "[INFO] Starting Queue Execution Engine...\n",
    }
    branches: list[tuple[str, dict[str, Any], dict[str, Any], list[dict[str, Any]]]] = [
        (
            "branches/vectorized",
            manifest(strategy("vectorized", "float4 loads and stores"), 0, 3, "branching", 310.5),
            {"max_iter": 5},
            [
                iteration(
                    1, "decided", [({"BLOCK": 128}, "Ok", 410.2), ({"BLOCK": 1024}, "ValidationFailed", 0.0)],
                    "continue", "implementing",
                ),
                iteration(
                    2, "decided", [({"BLOCK": 256}, "Ok", 310.5), ({"BLOCK": 512}, "Ok", 330.0)], "retry",
                    "implementing",
                ),
                iteration(3, "branching", None, "branch"),
            ],
        ),
        (
            "branches/vectorized/branches/vectorized_unroll",
            manifest(strategy("vectorized_unroll", "float4 with two loads in flight"), 1, 2, "success", 250.0),
            {"max_iter": 5},
            [
                iteration(1, "decided", [({"BLOCK": 256, "UNROLL": 2}, "Ok", 290.0)], "continue", "implementing"),
                iteration(2, "success", [({"BLOCK": 256, "UNROLL": 4}, "Ok", 250.0)], "stop"),
            ],
        ),
        (
            "branches/grid_stride",
            manifest(strategy("grid_stride", "a grid-stride loop"), 0, 2, "failed", None),
            {"max_iter": 5},
            [
                iteration(1, "decided", [({"BLOCK": 64}, "CompilationFailed", 0.0)], "retry", "implementing"),
                iteration(2, "failed", [({"BLOCK": 64}, "ValidationFailed", 0.0)], "stop"),
            ],
        ),
        (
            "branches/warp_tiles",
            manifest(strategy("warp_tiles", "one warp per tile"), 0, 2, "running", 260.0),
            {"max_iter": 5},
            [
                iteration(1, "decided", [({"BLOCK": 32}, "Ok", 260.0)], "continue", "implementing"),
                {"state.json": {"iter_num": 2, "status": "running", "plan": "", "kernel_code": KERNEL}},
            ],
        ),
    ]
    for path, man, config, iterations in branches:
        files[f"{path}/branch.json"] = man
        files[f"{path}/branch_config.json"] = config
        files[f"{path}/strategy.json"] = {**man["strategy"], "depth": man["branch_depth"]}
        for i, it in enumerate(iterations, start=1):
            for name, data in it.items():
                files[f"{path}/iter{i}/{name}"] = data
    files["final_results.json"] = {
        "best_branch": "vectorized_unroll",
        "best_config": None,
        "best_time_us": 250.0,
        "speedup": REFERENCE_US / 250.0,
        "total_branches": 4,
        "all_branches": [
            {"name": "vectorized", "path": "output/branches/vectorized", "status": "branching", "best_time_us": 310.5,
             "speedup": REFERENCE_US / 310.5, "iterations": 3},
            {"name": "vectorized_unroll", "path": "output/branches/vectorized/branches/vectorized_unroll",
             "status": "success", "best_time_us": 250.0, "speedup": REFERENCE_US / 250.0, "iterations": 2},
            {"name": "grid_stride", "path": "output/branches/grid_stride", "status": "failed", "best_time_us": None,
             "speedup": None, "iterations": 2},
            {"name": "warp_tiles", "path": "output/branches/warp_tiles", "status": "running", "best_time_us": 260.0,
             "speedup": REFERENCE_US / 260.0, "iterations": 2},
        ],
    }  # fmt: skip
    return files


def render(data: Any) -> str:
    return data if isinstance(data, str) else json.dumps(data, indent=2) + "\n"


def write(root: Path = OUTPUT) -> None:
    for rel, data in tree().items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(render(data))


def stale(root: Path = OUTPUT) -> list[str]:
    """Files of the fixture that differ from what this script writes (or are missing or extra)."""
    want = {rel: render(data) for rel, data in tree().items()}
    have = {str(p.relative_to(root)): p.read_text() for p in root.rglob("*") if p.is_file()} if root.is_dir() else {}
    return sorted(k for k in want.keys() | have.keys() if want.get(k) != have.get(k))


if __name__ == "__main__":
    if "--check" in sys.argv[1:]:
        bad = stale()
        print("\n".join(bad) or "up to date")
        sys.exit(1 if bad else 0)
    write()
