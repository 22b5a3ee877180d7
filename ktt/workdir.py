"""Where a tuning run keeps its working files (under OUTDIR/work): generated headers, reference outputs, logs."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ktt.includes import header_texts
from ktt.problem.inputs_hpp import HEADER_NAME, render_inputs_hpp
from ktt.problem.model import Problem, Shape


@dataclass(frozen=True)
class WorkDir:
    root: Path

    def shape_dir(self, shape: str) -> Path:
        return self.root / "shapes" / shape

    def program_path(self, shape: str, kernel_name: str = "kernels.cu") -> Path:
        """Where NVRTC believes the kernel source lives: next to this shape's inputs.hpp."""
        return self.shape_dir(shape) / kernel_name

    def reference_dir(self, shape: str, set_index: int) -> Path:
        return self.root / "reference" / shape / f"set{set_index}"

    def reference_file(self, shape: str, set_index: int, buffer: str) -> Path:
        return self.reference_dir(shape, set_index) / f"{buffer}.npy"

    @property
    def host_dir(self) -> Path:
        return self.root / "host"

    @property
    def log_dir(self) -> Path:
        return self.root / "logs"

    def prepare_shape(self, problem: Problem, shape: Shape, kernel_source: str | None = None) -> Path:
        """Write this shape's inputs.hpp (and a copy of the kernel source) into the work dir."""
        d = self.shape_dir(shape.name)
        d.mkdir(parents=True, exist_ok=True)
        header = d / HEADER_NAME
        text = render_inputs_hpp(problem, shape)
        if not header.exists() or header.read_text(encoding="utf-8") != text:
            header.write_text(text, encoding="utf-8")
        if kernel_source is not None:
            (d / "kernels.cu").write_text(kernel_source, encoding="utf-8")
        return d

    def has_reference(self, problem: Problem, shape: str, set_index: int) -> bool:
        return all(self.reference_file(shape, set_index, b.name).exists() for b in problem.validated)


def local_headers(problem: Problem) -> list[tuple[str, str]]:
    """Header files in the problem directory (their text goes into the compile cache key).

    Only what a compile may include (ktt.includes): regular files, size-capped, not linked
    out of the directory (a header linked to /dev/zero is skipped, never read).
    """
    return header_texts(problem.directory, skip=(HEADER_NAME,))  # the generated one in the work dir wins
