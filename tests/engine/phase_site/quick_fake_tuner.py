"""A FAKE tuner for the split-run tests that run ``cacao`` as a process (tests only).

``tests.fake_tuner.FakeTuner`` (times from the kernel source, no GPU, no delay) behind the
product's tuner seam (``cacao_tui.tuners``): with this folder on PYTHONPATH and
``CACAO_TUNER=fake-quick`` a run started as a process of its own uses it instead of ktt. The
GPU phase still needs a GPU to be listed: the tests put a FAKE ``nvidia-smi`` on PATH
(``tests/ui/fake_run_site/fake_cases_tuner.write_fake_nvidia_smi``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.fake_tuner import FakeTuner

SITE = Path(__file__).resolve().parent  # on the run's PYTHONPATH: the .dist-info beside this file
NAME = "fake-quick"


class QuickFakeTuner(FakeTuner):
    """FAKE: the stock fake tuner, built the way the tuner seam builds one."""

    def __init__(self, *, on_log: Callable[[str], None] | None = None, **_: object) -> None:
        super().__init__(reference_ms=10.0)
