"""``cacao serve``'s flags: mistakes are one line and exit 2, before anything listens; the token and
the loopback rule (the browser test is tests/ui/test_serve_browser.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from cacao_tui.cli import main
from cacao_tui.ui import serve


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["serve", "--problems", "nowhere"], "--problems: nowhere: no such directory"),
        (["serve", "--port", "70000"], "--port: 70000 is not a port number"),
        (["serve", "--bogus"], "unrecognized arguments: --bogus"),
    ],
)
def test_mistakes_are_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "problems").mkdir()
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err


def test_without_textual_serve_it_says_how_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "textual_serve", None)  # as if not installed
    assert main(["serve", "--problems", str(tmp_path)]) == 2
    assert "pip install 'cacao-tui[serve]'" in capsys.readouterr().err


def test_loopback_and_the_command() -> None:
    assert serve.is_loopback("127.0.0.1") and serve.is_loopback("::1") and serve.is_loopback("localhost")
    assert not serve.is_loopback("0.0.0.0") and not serve.is_loopback("10.1.2.3") and not serve.is_loopback("gpu-box")
    command = serve.app_command(Path("/p q"))
    assert command.startswith(f"TEXTUAL_DRIVER={serve.WEB_DRIVER} exec ") and command.endswith("--problems '/p q'")


def test_another_host_warns_and_still_needs_the_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    made: list[tuple[str, int, str]] = []

    class _NoServer:  # the server's seam: nothing listens in this test
        def serve(self) -> None:
            pass

    def fake_make(command: str, host: str, port: int, token: str, public_url: str | None = None) -> _NoServer:
        made.append((host, port, token))
        return _NoServer()

    monkeypatch.setattr(serve, "make_server", fake_make)
    assert main(["serve", "--problems", str(tmp_path), "--host", "0.0.0.0", "--port", "8123"]) == 0
    err = capsys.readouterr().err
    assert "warning: listening on 0.0.0.0:8123, beyond this machine" in err and err.count("\n") == 1
    assert main(["serve", "--problems", str(tmp_path), "--port", "8124"]) == 0
    assert capsys.readouterr().err == ""  # loopback: no warning
    (host1, _, token1), (host2, _, token2) = made
    assert (host1, host2) == ("0.0.0.0", "127.0.0.1")
    assert len(token1) == 40 and token1 != token2  # a new random token each start, always required
