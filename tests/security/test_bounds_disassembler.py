"""The disassembler behind check_compilation's instruction mix (``nvdisasm``, a dependency) runs on
a cubin built from model-written code, so it is bounded like every other child: its time, what it
prints, its environment, and it is gone when the call returns. Each case replaces the tool through
``KTT_DISASSEMBLER`` with a script that misbehaves."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import pytest

from ktt import instruction_mix
from ktt.procs import pid_alive

CUBIN = b"\x7fELF not really a cubin"


def tool(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "nvdisasm"
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_a_disassembler_that_never_ends_is_killed_at_its_time_limit(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    pidfile = tmp_path / "pid"
    monkeypatch.setenv("KTT_DISASSEMBLER", str(tool(tmp_path, f"echo $$ > {pidfile}; exec sleep 600")))
    started = time.monotonic()
    with pytest.raises(instruction_mix.DisassemblyError, match="did not finish within 1 s"):
        instruction_mix.disassemble(CUBIN, timeout_s=1.0)
    assert time.monotonic() - started < 30
    assert not pid_alive(int(pidfile.read_text()))  # killed with its group, and reaped


def test_a_disassembler_that_prints_without_end_is_cut_at_the_listing_cap(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(instruction_mix, "MAX_LISTING_BYTES", 1 << 20)
    pidfile = tmp_path / "pid"
    endless = f"echo $$ > {pidfile}; exec yes '        /*0010*/ FFMA R1, R2, R3, R4 ;'"
    monkeypatch.setenv("KTT_DISASSEMBLER", str(tool(tmp_path, endless)))
    started = time.monotonic()
    listing = instruction_mix.disassemble(CUBIN, timeout_s=60.0)
    assert len(listing) == 1 << 20 and listing.startswith("        /*0010*/ FFMA")  # the head, then stopped
    assert time.monotonic() - started < 30
    assert not pid_alive(int(pidfile.read_text()))


def test_a_failing_disassembler_says_why_in_one_line(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # 200 KB on stderr first (more than a pipe holds: it is read to its end), then the message.
    noisy = "head -c 200000 /dev/zero | tr '\\0' x >&2; echo >&2; echo 'nvdisasm fatal : not a cubin' >&2; exit 3"
    monkeypatch.setenv("KTT_DISASSEMBLER", str(tool(tmp_path, noisy)))
    with pytest.raises(instruction_mix.DisassemblyError) as caught:
        instruction_mix.disassemble(CUBIN)
    assert str(caught.value) == "nvdisasm failed (exit 3): nvdisasm fatal : not a cubin"


def test_the_disassembler_sees_no_secret_and_only_its_own_cubin(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-disasm0123456789abcdef")
    monkeypatch.setenv("KTT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("KTT_DISASSEMBLER", str(tool(tmp_path, 'env; echo "ARGS $*"; cat "$1" | od -c | head -1')))
    listing = instruction_mix.disassemble(CUBIN)
    names = {line.split("=", 1)[0] for line in listing.splitlines() if "=" in line and not line.startswith("ARGS")}
    allowed = {"PATH", "LC_ALL", "KTT_PARENT_PID", "PWD", "SHLVL", "_", "OLDPWD"}  # the shell adds PWD, SHLVL, _
    assert names <= allowed, names
    assert "sk-ant" not in listing and "KTT_CACHE_DIR" not in listing
    (args,) = [line for line in listing.splitlines() if line.startswith("ARGS ")]
    assert os.path.basename(args.split()[-1]) == "kernel.cubin" and not Path(args.split()[-1]).exists()
