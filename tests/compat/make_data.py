"""Write the raw input files of the compat corpus (run from anywhere; the files are committed).

Two small CSR matrices for problems/spmv_files, int32 offsets and indices, float32 values,
little-endian, exactly as the original's ``init: file`` reads them. test_compat_check.py
checks that the committed files are what this script writes.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
INPUTS = HERE / "problems" / "spmv_files" / "inputs"

# name -> rows of (column, value); row lengths are deliberately uneven, one row is empty.
MATRICES: dict[str, list[list[tuple[int, float]]]] = {
    "skewed": [
        [(0, 1.0), (2, 0.5), (3, 0.25), (6, 2.0)],
        [],
        [(1, 1.5)],
        [(0, 0.5), (4, 1.0)],
        [(5, 3.0)],
        [(2, 1.0), (6, 0.75)],
    ],
    "wide": [
        [(0, 1.0), (1, 1.0), (2, 1.0), (3, 1.0), (4, 1.0)],
        [(8, 0.5)],
        [(2, 2.0), (4, 0.25), (6, 1.0), (7, 1.5), (8, 0.5), (1, 1.0)],
    ],
}


def csr(rows: list[list[tuple[int, float]]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    offsets = np.zeros(len(rows) + 1, dtype="<i4")
    offsets[1:] = np.cumsum([len(r) for r in rows])
    cols = np.array([c for r in rows for c, _ in r], dtype="<i4")
    vals = np.array([v for r in rows for _, v in r], dtype="<f4")
    return offsets, cols, vals


def files() -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    for name, rows in MATRICES.items():
        offsets, cols, vals = csr(rows)
        out[f"{name}.rowptr.bin"] = offsets.tobytes()
        out[f"{name}.col.bin"] = cols.tobytes()
        out[f"{name}.val.bin"] = vals.tobytes()
    return out


def main() -> None:
    INPUTS.mkdir(parents=True, exist_ok=True)
    for name, data in files().items():
        (INPUTS / name).write_bytes(data)
        print(f"{INPUTS / name}: {len(data)} bytes")


if __name__ == "__main__":
    main()
