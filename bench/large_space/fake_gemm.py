"""A FAKE timing model of the large GEMM space, for CPU tests of the search harness (no GPU).

Not a measurement. The six parameters of the shared space take their times from a real
recorded table (``recorded_gemm_space.jsonl``: every configuration of bench/gemm_space timed
by ktt on an H200, 2026-12-01); the five added parameters (load widths, unrolling, double
buffering, swizzle) scale that time by made-up factors with interactions, plus a fixed
pseudo-random ±1.5 % per configuration, so that the landscape has the shape of a real one
(a few good regions, many poor configurations, failures) without pretending to be one.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
RECORDED = HERE / "recorded_gemm_space.jsonl"
BASE_PARAMS = ("BLOCK_SIZE_X", "BLOCK_SIZE_Y", "TILE_SIZE_X", "TILE_SIZE_Y", "TILE_K", "PAD")


def load_recorded(path: Path = RECORDED) -> dict[tuple, float | None]:
    """The recorded table: the six base parameters -> time in ms (None: the configuration failed)."""
    table: dict[tuple, float | None] = {}
    for line in path.read_text().splitlines():
        row = json.loads(line)
        key = tuple(row["config"][p] for p in BASE_PARAMS)
        table[key] = row["time_ms"] if row["status"] == "ok" else None
    return table


class FakeGemm:
    """time_ms(config) of the fake model; None where the recorded base configuration failed."""

    def __init__(self, recorded: dict[tuple, float | None] | None = None) -> None:
        self.base = recorded if recorded is not None else load_recorded()

    def time_ms(self, config: dict[str, Any]) -> float | None:
        base = self.base.get(tuple(config[p] for p in BASE_PARAMS))
        if base is None:
            return None
        tile = config["TILE_SIZE_X"] * config["TILE_SIZE_Y"]
        f = 1.0
        # Wider loads help most when the tile is small (more load instructions per FMA).
        f *= {1: 1.0, 2: 0.97, 4: 0.95}[config["VEC_A"]] ** (1.0 if tile <= 16 else 0.5)
        f *= {1: 1.0, 2: 0.98, 4: 0.96}[config["VEC_B"]] ** (1.0 if tile <= 16 else 0.5)
        # Unrolling helps until the register file runs out on big tiles.
        f *= {1: 1.06, 2: 1.02, 4: 1.0, 8: 0.99 if tile <= 16 else 1.04}[config["UNROLL_K"]]
        # Double buffering hides the loads of large tiles, costs occupancy on small ones.
        f *= (0.95 if tile >= 16 else 1.02) if config["DOUBLE_BUF"] else 1.0
        f *= {1: 1.0, 2: 0.985, 4: 0.975, 8: 0.99}[config["SWIZZLE"]]
        digest = hashlib.blake2b(json.dumps(config, sort_keys=True).encode(), digest_size=4).digest()
        noise = (int.from_bytes(digest, "little") / 2**32 - 0.5) * 0.03
        return base * f * (1.0 + noise)
