"""Peak memory of one LLM call against a server that streams without end, per adapter and attack.

    python bench/llm_stream_memory.py [--timeout 60] [--providers openai,anthropic,gemini]
                                      [--modes text,arguments,one-line,keepalive,gzip] [--json OUT]

Each row starts a FAKE endless server (``tests/security/endless_servers.py``) in a process of its
own and one client process (``tests/security/stream_client.py``: the real SDK, the provider as a
run builds it, one call with ``--llm-timeout`` = ``--timeout``), and prints the client's peak
resident memory, how long the call took and how it ended: the reply cut at the caps and noted, or
the one line the call failed with. Loopback only; no key, no network. The bound holds when every
peak is under 300 MB and no call needed its whole time limit except where the SDK itself is too
slow to reach a byte bound first (Gemini's keep-alive chunks). docs/benchmarks.md has the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.security.endless_servers import MODES  # noqa: E402

SUFFIX = {"openai": "/v1", "anthropic": "", "gemini": ""}


def one(provider: str, mode: str, timeout_s: float) -> dict[str, object]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
    server = subprocess.Popen([sys.executable, "-m", "tests.security.endless_servers", mode], cwd=ROOT, env=env,
                              stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert server.stdout is not None
        url = server.stdout.readline().strip()
        argv = [sys.executable, "-m", "tests.security.stream_client", provider, url + SUFFIX[provider], str(timeout_s)]
        done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout_s * 4 + 120)
    finally:
        server.kill()
        server.wait()
    if done.returncode != 0 or not done.stdout.strip():
        return {"provider": provider, "mode": mode, "crashed": done.returncode, "stderr": done.stderr[-500:]}
    return {"provider": provider, "mode": mode, **json.loads(done.stdout.strip().splitlines()[-1])}


def outcome(row: dict[str, object]) -> str:
    if "crashed" in row:
        return f"client died (exit {row['crashed']})"
    if row.get("ok"):
        notes = " ".join(row.get("notes") or [])  # type: ignore[arg-type]
        return "reply cut and noted" if "cut while it streamed" in notes else "reply whole (not cut)"
    error = str(row.get("error", ""))
    return error.split(": ", 1)[-1].split(", call 0: ")[-1][:70]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, default=60.0, help="--llm-timeout of each call (s)")
    parser.add_argument("--providers", default="openai,anthropic,gemini")
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args()
    rows = []
    print(f"{'provider':<10} {'attack':<10} {'peak MB':>8} {'seconds':>8}  outcome")
    for provider in args.providers.split(","):
        for mode in args.modes.split(","):
            row = one(provider, mode, args.timeout)
            rows.append(row)
            peak = row.get("peak_mb", float("nan"))
            print(f"{provider:<10} {mode:<10} {peak:>8.1f} {row.get('seconds', float('nan')):>8.2f}  {outcome(row)}",
                  flush=True)  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    worst = max((float(r.get("peak_mb", 1e9)) for r in rows), default=0.0)  # type: ignore[arg-type]
    print(f"worst peak: {worst:.1f} MB ({'under' if worst < 300 else 'OVER'} 300 MB)")
    return 0 if worst < 300 else 1


if __name__ == "__main__":
    raise SystemExit(main())
