"""The GPU panel and the status bar's GPU figures, read from a FAKE NVML (tests/fake_nvml): live
figures and lock holders where NVML lists GPUs, nothing where it cannot be used (this machine
has no GPU: the real nvidia-ml-py says "NVML Shared Library Not Found" here)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest
from test_screens import text_of
from ui_helpers import Run, settle, start, until

from cacao_tui.runs.gpu_status import GpuStatus
from cacao_tui.ui.widgets.gpu_panel import GpuPanel
from cacao_tui.ui.widgets.status_bar import StatusBar
from ktt import gpu_lock

FAKE = Path(__file__).resolve().parents[1] / "fake_nvml" / "pynvml.py"


@pytest.fixture
def fake_nvml(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The FAKE pynvml in place of nvidia-ml-py's, its GPUs in a JSON file the test can rewrite."""
    spec = importlib.util.spec_from_file_location("pynvml", FAKE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setitem(sys.modules, "pynvml", module)
    state = tmp_path / "nvml.json"
    state.write_text(json.dumps(module.DEFAULT))
    monkeypatch.setenv("FAKE_NVML", str(state))
    monkeypatch.setenv("KTT_GPU_LOCK_DIR", str(tmp_path / "locks"))
    return state


async def _read(pilot, panel: GpuPanel, after: int) -> None:
    await until(pilot, lambda: panel.reads > after, "the panel read no sample", timeout=5.0)


async def test_live_figures_and_the_lock_holder(run: Run, fake_nvml: Path) -> None:
    lock = gpu_lock.acquire(0, "ktt tune of problem mmul", uuid="GPU-fake-0000")
    try:
        async with run.app().run_test(size=(200, 60)) as pilot:
            await start(pilot, run)
            panel = pilot.app.main_screen.query_one(GpuPanel)
            await _read(pilot, panel, 0)
            await settle(pilot)
            assert panel.has_class("-shown")  # 60 rows: shown by itself
            text = text_of(panel)
            assert "0 H200 (FAKE)" in text and "87%" in text and "41/141" in text and "1980" in text
            assert "62°C" in text and "312/700" in text
            assert f"ktt tune of problem mmul (pid {__import__('os').getpid()})" in text
            assert text.splitlines()[-1].rstrip().endswith("free")  # GPU 1: nobody holds it
            bar = pilot.app.main_screen.query_one(StatusBar).bar_text(200).plain
            assert "GPU 0 87% 62°C 312W" in bar
            # Live: the figures change, the panel follows at its next read.
            gpus = json.loads(fake_nvml.read_text())
            gpus[0].update(util=12, temp=48)
            fake_nvml.write_text(json.dumps(gpus))
            await _read(pilot, panel, panel.reads)
            await settle(pilot)
            assert "12%" in text_of(panel) and "48°C" in text_of(panel)
            await pilot.press("g")
            await settle(pilot)
            assert not panel.has_class("-shown") and not panel.display
            await pilot.press("g")
            await settle(pilot)
            assert panel.has_class("-shown")
    finally:
        lock.release()


async def test_at_80x24_it_waits_for_g(run: Run, fake_nvml: Path) -> None:
    async with run.app().run_test(size=(80, 24)) as pilot:
        await start(pilot, run)
        panel = pilot.app.main_screen.query_one(GpuPanel)
        await _read(pilot, panel, 0)
        assert not panel.has_class("-shown")  # no room at 24 rows unless asked
        await pilot.press("g")
        await settle(pilot)
        assert panel.has_class("-shown") and panel.size.height >= 3


async def test_without_nvml_the_panel_stays_hidden_and_g_says_why(run: Run, fake_nvml: Path) -> None:
    fake_nvml.write_text(json.dumps("no library"))
    async with run.app().run_test(size=(200, 60)) as pilot:
        await start(pilot, run)
        panel = pilot.app.main_screen.query_one(GpuPanel)
        for _ in range(40):
            await pilot.pause(0.05)
            if panel.status.unavailable:
                break
        await pilot.press("g")
        await settle(pilot)
        assert not panel.display
        assert any(n.message == "No GPU panel: NVML: NVML Shared Library Not Found" for n in pilot.app._notifications)
        assert "%" not in pilot.app.main_screen.query_one(StatusBar).bar_text(200).plain


def test_the_reader_on_this_machine_says_why_it_has_nothing() -> None:
    """The real nvidia-ml-py, no GPU here: no samples and one reason, no exception."""
    status = GpuStatus()
    assert status.sample() == [] and status.unavailable
    assert status.sample() == []  # asked once; the reason stays


def test_gpu_panel_snapshot_200x60(snap_compare, fake_nvml: Path) -> None:
    """The screenshot of docs/UI.md: the run view at 200x60 with the GPU panel (FAKE NVML)."""
    from test_snapshots import _main_state

    app, ready = _main_state("tiled")

    async def before(pilot) -> None:
        await ready(pilot)
        panel = pilot.app.main_screen.query_one(GpuPanel)
        await _read(pilot, panel, 0)
        await settle(pilot)

    assert snap_compare(app, terminal_size=(200, 60), run_before=before)
