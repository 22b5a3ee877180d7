#!/usr/bin/env python3
"""Pack a run's output/ to carry it to the other phase's machine (docs/CLUSTER.md, "Split runs").

    python3 scripts/pack_output.py PROBLEM_DIR/output TARBALL [--max-mib 15] [--max-parts 7]

Writes TARBALL (gzip'd tar; its members start with ``output/``, so it unpacks into the problem
directory) without what the next phase does not read and a run can make again: compiled
binaries, array dumps and caches (the rule of ``--prune-archives``, cacao_tui/store/prune.py)
and Nsight Compute's raw reports (the profile's figures are in profile.json). Links and special
files are left out. Above ``--max-mib`` the archive is cut into TARBALL.part00, .part01, ...
(at most ``--max-parts``; more is an error, exit 1). Prints the files packed, the bytes left
out and the parts, and how to unpack them.
"""

from __future__ import annotations

import argparse
import io
import os
import stat
import sys
import tarfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cacao_tui.store.prune import is_regenerable

LEFT_OUT_SUFFIXES = (".ncu-rep",)


def left_out(path: Path, relative: Path) -> bool:
    return path.name.endswith(LEFT_OUT_SUFFIXES) or is_regenerable(path, relative)


def pack(output: Path) -> tuple[bytes, int, int, int]:
    """(the tar.gz, files packed, files left out, bytes left out)."""
    buffer = io.BytesIO()
    packed = skipped = skipped_bytes = 0
    with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=6) as tar:
        tar.add(output, arcname="output", recursive=False)
        for folder, dirs, files in os.walk(output, followlinks=False):
            dirs.sort()
            here = Path(folder)
            for d in dirs:
                p = here / d
                if not p.is_symlink():
                    tar.add(p, arcname=str(Path("output") / p.relative_to(output)), recursive=False)
            for name in sorted(files):
                p = here / name
                st = p.lstat()
                relative = p.relative_to(output)
                if not stat.S_ISREG(st.st_mode) or left_out(p, relative):
                    skipped += 1
                    skipped_bytes += st.st_size if stat.S_ISREG(st.st_mode) else 0
                    continue
                tar.add(p, arcname=str(Path("output") / relative), recursive=False)
                packed += 1
    return buffer.getvalue(), packed, skipped, skipped_bytes


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("output", type=Path, help="the problem directory's output/")
    ap.add_argument("tarball", type=Path)
    ap.add_argument("--max-mib", type=float, default=15.0, help="largest file written (default 15 MiB)")
    ap.add_argument("--max-parts", type=int, default=7)
    args = ap.parse_args()
    if not args.output.is_dir():
        print(f"pack_output: {args.output}: not a directory", file=sys.stderr)
        return 2
    data, packed, skipped, skipped_bytes = pack(args.output)
    limit = int(args.max_mib * 1024 * 1024)
    args.tarball.parent.mkdir(parents=True, exist_ok=True)
    if len(data) <= limit:
        args.tarball.write_bytes(data)
        parts = [args.tarball]
        how = f"tar xzf {args.tarball.name} -C PROBLEM_DIR"
    else:
        chunks = [data[i : i + limit] for i in range(0, len(data), limit)]
        if len(chunks) > args.max_parts:
            print(f"pack_output: {len(data) / 2**20:.1f} MiB packed: more than {args.max_parts} parts of "
                  f"{args.max_mib:g} MiB", file=sys.stderr)  # fmt: skip
            return 1
        parts = []
        for k, chunk in enumerate(chunks):
            part = args.tarball.with_name(f"{args.tarball.name}.part{k:02d}")
            part.write_bytes(chunk)
            parts.append(part)
        how = f"cat {args.tarball.name}.part* | tar xz -C PROBLEM_DIR"
    print(f"packed {packed} files of {args.output} into {len(data) / 2**20:.2f} MiB "
          f"({', '.join(p.name for p in parts)}); left out {skipped} files, {skipped_bytes / 2**20:.1f} MiB "
          "(binaries, array dumps, caches, ncu reports)")  # fmt: skip
    print(f"unpack: {how}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
