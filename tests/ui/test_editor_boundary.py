"""The problem editor warns when the reference does not declare the boundary's parameters."""

from __future__ import annotations

import shutil
from pathlib import Path

from textual.widgets import Static
from ui_helpers import until

from cacao_tui.ui.editor import EditorApp, ProblemEditorScreen

REPO = Path(__file__).resolve().parents[2]


async def test_a_reference_missing_a_parameter_is_warned_about(tmp_path: Path) -> None:
    problem = tmp_path / "mmul"
    shutil.copytree(REPO / "problems" / "mmul", problem, ignore=shutil.ignore_patterns("output", "archive"))
    ref = problem / "ref_kernel.cu"
    ref.write_text(ref.read_text().replace("float* C)", "float* C, int n)", 1))  # builds; reads a 4th argument
    app = EditorApp(problem)
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: isinstance(pilot.app.screen, ProblemEditorScreen), "the editor")
        screen = pilot.app.screen
        assert isinstance(screen, ProblemEditorScreen)
        await until(pilot, lambda: screen.checks_run > 0 and not screen.workers, "a --check result", timeout=80.0)
        text = str(screen.query_one("#ed-signature", Static).render())
        assert "expects: extern \"C\" __global__ void mmul_ref(const float* A, const float* B, float* C)" in text
        assert "! ref_kernel.cu: mmul_ref(A, B, C, n) declares 4 parameter(s)" in text
        assert screen.check is not None and screen.check.ok  # a warning: the check itself passes
