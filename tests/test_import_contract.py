"""scripts/check_imports.py: the repository keeps the import contract, and violations are caught."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import types
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "check_imports.py"


def _checker() -> types.ModuleType:
    spec = importlib.util.spec_from_file_location("check_imports", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("check_imports", module)  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_the_repository_keeps_the_contract() -> None:
    done = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("import contract: OK")


def _write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_violations_are_found_anywhere_in_a_file(tmp_path: Path) -> None:
    _write(tmp_path, "cacao_tui/__init__.py", "")
    _write(tmp_path, "cacao_tui/engine/run.py", "def later():\n    from textual.app import App\n")
    _write(tmp_path, "cacao_tui/ui/app.py", "import textual\nfrom textual.widgets import Log\n")  # allowed
    _write(tmp_path, "cacao_tui/headless.py", "import rich\n")  # rich is fine outside ktt
    _write(tmp_path, "ktt/__init__.py", "")
    _write(tmp_path, "ktt/a.py", "from cacao_tui.store import atomic\nimport numpy\n")
    _write(tmp_path, "ktt/sub/b.py", "from google import genai\nimport importlib\nimportlib.import_module('openai')\n")
    _write(
        tmp_path,
        "ktt/sub/c.py",
        "class X:\n    def f(self):\n        import anthropic\n        __import__('rich.text')\n",
    )
    _write(tmp_path, "ktt/sub/d.py", "from .. import a\nfrom . import c\n")  # relative, inside ktt: fine
    violations, count = _checker().check(tmp_path)
    found = sorted((str(v.path), v.line, v.module) for v in violations)
    assert found == [
        ("cacao_tui/engine/run.py", 2, "textual.app"),
        ("ktt/a.py", 1, "cacao_tui.store"),
        ("ktt/sub/b.py", 1, "google.genai"),
        ("ktt/sub/b.py", 3, "openai"),
        ("ktt/sub/c.py", 3, "anthropic"),
        ("ktt/sub/c.py", 4, "rich.text"),
    ]
    assert count == 9


def test_exit_status_on_violation(tmp_path: Path) -> None:
    _write(tmp_path, "cacao_tui/x.py", "import textual\n")
    _write(tmp_path, "ktt/__init__.py", "")
    done = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert "cacao_tui/x.py:1: imports textual: only cacao_tui/ui/ may import textual" in done.stdout


def test_imports_against_the_layers_are_found(tmp_path: Path) -> None:
    """ui -> engine -> nodes -> services: an import up the layers is one line; down or across is fine."""
    for package in ("", "ui", "engine", "nodes", "llm", "store", "problem"):
        _write(tmp_path, f"cacao_tui/{package}/__init__.py".replace("//", "/"), "")
    _write(tmp_path, "ktt/__init__.py", "")
    files = {
        "cli.py": "from cacao_tui.launch import main\nfrom cacao_tui.ui import app\n",
        "launch.py": "from cacao_tui.engine.engine import Engine\nimport cacao_tui.headless\n",
        "headless.py": "from cacao_tui.engine.events import LogLine\n",
        "ui/app.py": "from cacao_tui.engine import events as ev\nfrom cacao_tui import __version__\n",
        "engine/engine.py": "from cacao_tui.nodes.plan import plan\nfrom ..store import atomic\n",
        "engine/launch.py": "def run():\n    from cacao_tui.ui.app import CacaoApp\n",
        "engine/bad.py": "from cacao_tui import headless\n",
        "nodes/plan.py": "from cacao_tui.llm import TrackedLLM\nfrom cacao_tui.engine.events import X\n",
        "nodes/rel.py": "from ..engine import worker\n",
        "store/atomic.py": "from cacao_tui.problem import load\nimport cacao_tui.nodes.plan\n",
        "problem/x.py": "from cacao_tui.store import atomic\n",
        "llm/y.py": "import importlib\nimportlib.import_module('cacao_tui.ui.app')\n",
    }
    for rel, text in files.items():
        _write(tmp_path, f"cacao_tui/{rel}", text)
    _write(tmp_path, "cacao_tui/gadgets.py", "")  # in no layer
    violations, _ = _checker().check(tmp_path)
    found = sorted((str(v.path), v.line, v.module) for v in violations)
    assert found == [
        ("cacao_tui/engine/bad.py", 1, "cacao_tui.headless"),
        ("cacao_tui/engine/launch.py", 2, "cacao_tui.ui.app"),
        ("cacao_tui/gadgets.py", 1, "cacao_tui.gadgets"),
        ("cacao_tui/llm/y.py", 2, "cacao_tui.ui.app"),
        ("cacao_tui/nodes/plan.py", 2, "cacao_tui.engine.events"),
        ("cacao_tui/nodes/rel.py", 1, "cacao_tui.engine"),
        ("cacao_tui/store/atomic.py", 2, "cacao_tui.nodes.plan"),
    ]
    rules = {str(v.path): v.rule for v in violations}
    assert rules["cacao_tui/nodes/plan.py"] == (
        "layers: nodes may not import engine (ui -> engine -> nodes -> services)"
    )
    assert rules["cacao_tui/engine/launch.py"].startswith("layers: engine may not import front ends")
    assert rules["cacao_tui/gadgets.py"] == "layers: not in a layer; add it to LAYERS in scripts/check_imports.py"


def test_circles_between_modules_are_found(tmp_path: Path) -> None:
    """Two modules that need each other, directly or round three, under TYPE_CHECKING or inside a
    function: each circle is one line naming every import on the way; a one-way chain is fine."""
    _write(tmp_path, "cacao_tui/__init__.py", "")
    _write(tmp_path, "cacao_tui/engine/__init__.py", "")
    _write(tmp_path, "cacao_tui/engine/engine.py", "from cacao_tui.engine.master import Master\n")
    _write(
        tmp_path,
        "cacao_tui/engine/master.py",
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from cacao_tui.engine.engine import Engine\n",
    )
    _write(tmp_path, "cacao_tui/engine/chain.py", "from cacao_tui.engine import master\n")  # one way: fine
    _write(tmp_path, "ktt/__init__.py", "")
    _write(tmp_path, "ktt/a.py", "from ktt import b\n")
    _write(tmp_path, "ktt/b.py", "import ktt.c\n")
    _write(tmp_path, "ktt/c.py", "def later():\n    from . import a\n")
    violations = _checker().circle_violations(tmp_path)
    found = sorted((str(v.path), v.line, v.module) for v in violations)
    assert found == [("cacao_tui/engine/engine.py", 1, "cacao_tui.engine.master"), ("ktt/a.py", 1, "ktt.b")]
    rules = sorted(v.rule for v in violations)
    assert rules[0].startswith(
        "circle (module:line of each import): cacao_tui.engine.engine:1 -> cacao_tui.engine.master:3 -> "
        "cacao_tui.engine.engine;"
    )
    assert rules[1].startswith("circle (module:line of each import): ktt.a:1 -> ktt.b:1 -> ktt.c:2 -> ktt.a;")
    done = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "circle" in done.stdout
