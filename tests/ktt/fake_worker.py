"""A stand-in for ``ktt.worker`` that needs no GPU: the same JSON-lines protocol, made-up timings.

The configuration's BEHAVIOUR parameter picks a failure: 1 hangs (no beat), 2 exits mid-evaluation,
3 reports a sticky CUDA error and exits. KTT_FAKE_EVAL_S (seconds) makes each evaluation take time.
The shape matters as the real worker's would: the reference takes 2 ms on ``default`` and 1 ms
elsewhere; on the shape ``half`` large blocks are fastest (elsewhere small ones), so each case's
own search has its own best; KTT_FAKE_INVALID_SHAPE names a shape where every configuration is wrong.
Every request is appended to KTT_FAKE_LOG (a file), when set, for tests that check what was asked.
"""

from __future__ import annotations

import json
import os
import sys
import time


def main() -> int:
    out = sys.stdout
    delay = float(os.environ.get("KTT_FAKE_EVAL_S", "0"))
    invalid = os.environ.get("KTT_FAKE_INVALID_SHAPE")
    log = os.environ.get("KTT_FAKE_LOG")
    shape = None
    for line in sys.stdin:
        req = json.loads(line)
        cmd = req.get("cmd")
        if log:
            with open(log, "a") as f:
                f.write(json.dumps({k: v for k, v in req.items() if k in ("cmd", "shape", "time_reference")}) + "\n")
        if cmd == "init":
            reply = {
                "type": "reply",
                "ok": True,
                "device": "fake",
                "arch": "sm_90",
                "bandwidth_gbs": 4000.0,
                "peak_gflops": 60000.0,
            }
        elif cmd == "shape":
            shape = req["shape"]
            reply = {
                "type": "reply",
                "ok": True,
                "reference_ms": 2.0 if req["shape"] == "default" else 1.0,
                "floor_ms": 0.001,
            }
        elif cmd == "eval":
            cfg = req.get("config", {})
            behaviour = int(cfg.get("BEHAVIOUR", 0))
            out.write(json.dumps({"type": "beat"}) + "\n")
            out.flush()
            if behaviour == 1:
                time.sleep(3600)
            if behaviour == 2:
                os._exit(7)
            if behaviour == 3:
                out.write(
                    json.dumps(
                        {
                            "type": "result",
                            "ok": False,
                            "status": "runtime_error",
                            "fatal": True,
                            "error": "cuCtxSynchronize: CUDA_ERROR_ILLEGAL_ADDRESS",
                        }
                    )
                    + "\n"
                )
                out.flush()
                return 3
            time.sleep(delay)
            block = int(cfg.get("BLOCK", 32))
            t = 0.1 + 0.01 * (256 / block if shape == "half" else block / 32) + 0.05 / int(cfg.get("UNROLL", 1))
            best = req.get("best_ms")
            if shape is not None and shape == invalid:
                reply = {"type": "result", "status": "validation_failed", "error": "Y: 3 of 512 element(s) differ"}
                out.write(json.dumps(reply) + "\n")
                out.flush()
                continue
            reply = {
                "type": "result",
                "status": "ok",
                "time_ms": t,
                "min_ms": t * 0.99,
                "max_ms": t * 1.02,
                "repeats": 10,
                "flags": [],
                "confirmed": best is None or t < best,
                "gpu_ms": 1.0,
                "validation": {"buffer": "Y", "max_abs_error": 0.0, "bad_count": 0, "checked": 1024},
            }
        elif cmd == "quit":
            out.write(json.dumps({"type": "reply", "ok": True}) + "\n")
            out.flush()
            return 0
        else:
            reply = {"type": "reply", "ok": False, "error": "unknown"}
        out.write(json.dumps(reply) + "\n")
        out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
