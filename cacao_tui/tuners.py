"""The tuners a run can use, by name: ``ktt`` (this package's, ``KttTuner``) and any other a
package registers under the entry-point group ``cacao_tui.tuners``; ``CACAO_TUNER`` picks one.

The seam through which a tuner that is not ktt reaches a run started as a process of its own
(the home screen's runs): the tests register a FAKE one from tests/ (a ``.dist-info`` folder on
PYTHONPATH); the installed product ships only ktt. An entry point names a callable taking
``on_log=`` (a line for the run's log) and returning a ``cacao_tui.ktt_client.Tuner``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from importlib.metadata import entry_points

from cacao_tui.ktt_client import KttTuner, Tuner

TUNER_ENV = "CACAO_TUNER"
GROUP = "cacao_tui.tuners"
BUILTIN = "ktt"

TunerFactory = Callable[..., Tuner]


class UnknownTuner(Exception):
    """``CACAO_TUNER`` names no tuner; ``str()`` is the one line to show."""


def tuner_names() -> list[str]:
    return sorted({BUILTIN, *(ep.name for ep in entry_points(group=GROUP))})


def tuner_factory(name: str | None = None) -> TunerFactory:
    """The factory of the tuner ``name`` (default: ``CACAO_TUNER``, else ktt)."""
    name = (name if name is not None else os.environ.get(TUNER_ENV, "")).strip() or BUILTIN
    if name == BUILTIN:
        return KttTuner
    found = [ep for ep in entry_points(group=GROUP) if ep.name == name]
    if not found:
        raise UnknownTuner(f"{TUNER_ENV}={name}: no such tuner (installed: {', '.join(tuner_names())})")
    try:
        return found[0].load()
    except (ImportError, AttributeError) as exc:
        raise UnknownTuner(f"{TUNER_ENV}={name}: cannot load {found[0].value} ({exc})") from None
