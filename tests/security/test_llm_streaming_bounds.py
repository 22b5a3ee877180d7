"""Issue 27, item 3: a streamed reply is bounded while it streams, in all three adapters.

Before: the OpenAI adapter appended every piece until the stream ended and the reply caps
applied only afterwards; the SDKs buffered one SSE line whole. A loopback server streaming
without end took a client to 2.1-3.7 GB in 60 s, one 400 MB line to 1.6 GB, and at
``--llm-timeout 150`` the process died at the 6 GB limit with a traceback.

Each case runs one call through the real SDK (``tests/security/stream_client.py``, a process of
its own, so its peak resident memory is its own) against a server that never stops
(``tests/security/endless_servers.py``): reply text without end, one tool call's arguments
without end, one line without end, keep-alive comments only, and a gzip body that decodes to one
endless line. The client must stay under 300 MB and end the call: the reply cut and noted in
its record, or one line naming the bound (or the time limit, when a slow SDK reaches that first).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.pathenv import child_pythonpath
from tests.security.endless_servers import serve, url_of

pytestmark = pytest.mark.timeout(300)
PROVIDERS = ("openai", "anthropic", "gemini")
SUFFIX = {"openai": "/v1", "anthropic": "", "gemini": ""}
PEAK_MB = 300
TIMEOUT_S = 10  # --llm-timeout of the call: how long the server may stream before the call ends


def run_client(provider: str, mode: str, timeout_s: float = TIMEOUT_S) -> dict[str, object]:
    """One call of ``provider`` against an endless ``mode`` server; the client's JSON line."""
    server = serve(mode)
    try:
        env = {**os.environ, "PYTHONPATH": child_pythonpath()}
        argv = [sys.executable, "-m", "tests.security.stream_client", provider, url_of(server) + SUFFIX[provider],
                str(timeout_s)]  # fmt: skip
        done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=timeout_s * 6 + 60,
                              cwd=Path(__file__).resolve().parents[2])  # fmt: skip
    finally:
        server.stop_event.set()  # type: ignore[attr-defined]
        server.shutdown()
        server.server_close()
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("mode", ["text", "arguments"])
def test_a_reply_without_end_is_cut_at_the_caps_and_noted(provider: str, mode: str) -> None:
    out = run_client(provider, mode)
    assert out["peak_mb"] < PEAK_MB, out
    assert out["ok"], out
    notes = " ".join(out["notes"])  # type: ignore[arg-type]
    assert "cut while it streamed" in notes and "reading stopped" in notes, out
    assert out["text_chars"] <= 64 * 1024, out
    if mode == "arguments":  # the call that did not fit is not run; the model is told why
        assert out["tool_calls"] and "did not fit the reply cap" in str(out["tool_error"]), out
    assert out["seconds"] < TIMEOUT_S, out  # ended by the cap, not by the clock


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("mode", ["one-line", "gzip"])
def test_one_line_without_end_is_refused_at_the_event_bound(provider: str, mode: str) -> None:
    out = run_client(provider, mode)
    assert out["peak_mb"] < PEAK_MB, out
    assert not out["ok"] and "8 MiB" in str(out["error"]) and "\n" not in str(out["error"]), out


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_stream_of_nothing_ends_at_the_response_bound_or_the_time_limit(provider: str) -> None:
    out = run_client(provider, "keepalive")
    assert out["peak_mb"] < PEAK_MB, out
    error = str(out["error"])
    assert not out["ok"] and ("64 MiB" in error or "no answer" in error) and "\n" not in error, out
