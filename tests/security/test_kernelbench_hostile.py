"""``cacao import`` runs a module's code: a hostile one is contained. It cannot read a secret (a
key in the environment, a file in the home directory), reach the network, write outside its
output folder, start a process that outlives it, run past its time limit or take the machine's
memory; each ends as one line naming the file, exit 2, nothing written, nothing left running.
The walls: the probe child (cacao_tui/kernelbench/probe.py, contain.py) under ktt.procs."""

from __future__ import annotations

import os
import socket
import sys
import time
from pathlib import Path

import pytest

from cacao_tui.kernelbench.cli import main as import_main
from ktt.sandbox import landlock_abi

pytest.importorskip("torch", reason="cacao import runs PyTorch modules: torch is not installed")

ROOT = Path(__file__).resolve().parents[2]
SECRET = "sk-ant-hostile-module-test-0123456789"
FORM = """
class Model(nn.Module):
    def forward(self, x):
        return x * 2


def get_inputs():
    return [torch.rand(4, 4)]


def get_init_inputs():
    return []
"""


def hostile(tmp_path: Path, body: str, name: str = "hostile") -> Path:
    path = tmp_path / "modules" / f"{name}.py"
    path.parent.mkdir(exist_ok=True)
    path.write_text("import os, socket, subprocess, sys, time\nimport torch\nimport torch.nn as nn\n" + body + FORM)
    return path


def run_import(tmp_path: Path, path: Path, *flags: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    to = tmp_path / "problems"
    code = import_main([str(path), "--to", str(to), *flags])
    out, err = capsys.readouterr()
    assert not to.exists(), "a refused module wrote something"
    return code, out, err


def left_running(marker: Path) -> list[int]:
    """Processes whose command line names ``marker`` (the hostile module's path)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if str(marker).encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


@pytest.mark.skipif(not landlock_abi(), reason="this kernel has no Landlock: file reads are not walled")
def test_a_module_cannot_read_a_secret_or_reach_out(tmp_path: Path, monkeypatch, capsys) -> None:
    home = tmp_path / "home"
    (home / ".config" / "cacao_tui").mkdir(parents=True)
    (home / ".config" / "cacao_tui" / ".env").write_text(f"ANTHROPIC_API_KEY={SECRET}\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]
    stolen = tmp_path / "stolen.txt"
    body = f"""
seen = []
def attempt(what, fn):
    try:
        fn()
        seen.append(what + ":ok")
    except Exception as exc:
        seen.append(what + ":" + type(exc).__name__)
attempt("file", lambda: seen.append(open({str(home / '.config' / 'cacao_tui' / '.env')!r}).read()))
seen.append("env=" + os.environ.get("ANTHROPIC_API_KEY", "none"))
attempt("net", lambda: socket.create_connection(("127.0.0.1", {port}), timeout=2))
attempt("write", lambda: open({str(stolen)!r}, "w").write("x"))
attempt("proc", lambda: open("/proc/1/environ", "rb").read())
attempt("checkout", lambda: open({str(ROOT / "pyproject.toml")!r}).read())
raise RuntimeError(" ".join(seen))
"""
    try:
        code, out, err = run_import(tmp_path, hostile(tmp_path, body), capsys=capsys)
    finally:
        listener.close()
    assert code == 2 and out == ""
    line = err.strip()
    assert len(line.splitlines()) == 1 and line.startswith("refused hostile.py: line ")
    assert "file:PermissionError" in line and "env=none" in line and "write:PermissionError" in line
    assert "proc:PermissionError" in line and "checkout:PermissionError" in line  # where a .env may be
    if landlock_abi() >= 4:  # TCP is walled from Landlock ABI 4 on
        assert "net:PermissionError" in line
    assert SECRET not in line and not stolen.exists()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the seccomp filter is Linux's")
def test_a_module_cannot_start_a_process_and_leaves_none(tmp_path: Path, capsys) -> None:
    body = """
seen = []
for what, fn in (("fork", os.fork), ("spawn", lambda: subprocess.Popen(["sleep", "600"]))):
    try:
        pid = fn()
        if pid == 0:  # a child that escaped its group would live on
            os.setsid()
            time.sleep(600)
        seen.append(what + ":ok")
    except Exception as exc:
        seen.append(what + ":" + type(exc).__name__)
raise RuntimeError(" ".join(seen))
"""
    path = hostile(tmp_path, body, "forker")
    code, out, err = run_import(tmp_path, path, capsys=capsys)
    assert code == 2 and out == "", err
    assert "fork:PermissionError" in err and "spawn:PermissionError" in err, err
    assert left_running(path) == []


def test_a_module_that_sleeps_is_stopped_at_its_time_limit(tmp_path: Path, capsys) -> None:
    path = hostile(tmp_path, "time.sleep(3600)\n", "sleeper")
    start = time.monotonic()
    code, out, err = run_import(tmp_path, path, "--timeout", "20", capsys=capsys)
    took = time.monotonic() - start
    assert code == 2 and out == ""
    assert err.strip() == "refused sleeper.py: took longer than 20 s to import (stopped; --timeout raises it)"
    assert took < 60, took
    deadline = time.monotonic() + 10
    while left_running(path) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert left_running(path) == []


@pytest.mark.parametrize("allocate", ["torch.ones(50 * 2**30 // 4)", "bytearray(50 * 2**30)"])
def test_a_module_that_allocates_50_gb_is_refused_in_one_line(tmp_path: Path, capsys, allocate: str) -> None:
    path = hostile(tmp_path, f"hoard = {allocate}\n", "hoarder")
    start = time.monotonic()
    code, out, err = run_import(tmp_path, path, capsys=capsys)
    assert code == 2 and out == ""
    line = err.strip()
    assert len(line.splitlines()) == 1 and line.startswith("refused hoarder.py: "), line
    assert "memory" in line.lower() or "allocate" in line.lower(), line
    assert time.monotonic() - start < 120
