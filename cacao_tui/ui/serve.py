"""``cacao serve``: the same app (the home screen and everything it opens) in a web browser.

Through textual-serve (MIT, by Textual's makers; the ``serve`` extra): each browser tab that
connects starts ``cacao --problems DIR`` as a process of its own, driven over a websocket, so a
tab is one home screen as in a terminal; runs started there are processes of their own, as in
the terminal, and outlive the tab.

It listens on 127.0.0.1 unless ``--host`` says otherwise; reach it from elsewhere through an SSH
tunnel (docs/UI.md). Every page and websocket needs the random token in the URL it prints
(``/?token=...``; the websocket's path carries it): a loopback port is reachable by every user
of the machine, and whoever drives the app starts runs with this user's keys. With ``--host``
other than loopback a warning says so as well. A token is compared in constant time; a request
without the right one gets 403 and starts nothing. Sessions are bounded (``MAX_SESSIONS``).
"""

from __future__ import annotations

import argparse
import hmac
import ipaddress
import secrets
import shlex
import socket
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
MAX_SESSIONS = 8  # browser tabs driving an app at once
EXIT_OK, EXIT_USAGE = 0, 2
INSTALL_HINT = "pip install 'cacao-tui[serve]' (textual-serve)"


class ServeUsage(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise ServeUsage(message)


def serve_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="cacao serve", description="The cacao app in a web browser (textual-serve).")
    p.add_argument("--problems", metavar="DIR", default="problems", help="the home screen's folder (default problems)")
    p.add_argument("--host", default=DEFAULT_HOST, help=f"address to listen on (default {DEFAULT_HOST}: this machine)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT}; 0: a free one)")
    p.add_argument("--public-url", metavar="URL",
                   help="the URL the browser reaches this server by, behind a proxy that changes it "
                        "(default: what the browser asked for)")  # fmt: skip
    return p


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def free_port(host: str) -> int:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


WEB_DRIVER = "cacao_tui.ui.web_driver:LoopWebDriver"  # the home screen's views in one session


def app_command(problems: Path) -> str:
    """The shell command each browser session runs: this Python, this package, the home screen,
    with the driver that keeps the session open from one view to the next (textual-serve sets its
    own TEXTUAL_DRIVER in the environment; the command's assignment comes after it)."""
    python = shlex.quote(sys.executable)
    return f"TEXTUAL_DRIVER={WEB_DRIVER} exec {python} -m cacao_tui --problems {shlex.quote(str(problems))}"


def make_server(command: str, host: str, port: int, token: str, public_url: str | None = None) -> Any:
    """A textual-serve Server that asks for ``token`` on every page and websocket."""
    import aiohttp_jinja2
    import jinja2
    from aiohttp import web
    from textual_serve.server import Server, to_int

    class TokenServer(Server):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__(command, host=host, port=port, title="cacao", public_url=public_url)
            self.token = token
            self.own_public_url = public_url
            self.sessions = 0

        def allowed(self, given: str | None) -> bool:
            return given is not None and hmac.compare_digest(given.encode(), self.token.encode())

        async def _make_app(self) -> web.Application:
            app = web.Application()
            aiohttp_jinja2.setup(app, loader=jinja2.FileSystemLoader(self.templates_path))
            app.add_routes([
                web.get("/", self.handle_index, name="index"),
                web.get("/ws/{token}", self.handle_websocket, name="websocket"),
                web.static("/static", self.statics_path, show_index=False, name="static"),
            ])  # fmt: skip
            app.on_startup.append(self.on_startup)
            return app

        def base_url(self, request: web.Request) -> str:
            if self.own_public_url:
                return self.own_public_url.rstrip("/")
            return f"{request.scheme}://{request.host}"

        async def handle_index(self, request: web.Request) -> web.Response:  # type: ignore[override]
            if not self.allowed(request.query.get("token")):
                raise web.HTTPForbidden(text="cacao serve: open the URL it printed (with its ?token=...)\n")
            base = self.base_url(request)
            ws = ("wss" if base.startswith("https") else "ws") + base[base.index(":") :]
            context = {
                "font_size": to_int(request.query.get("fontsize", "16"), 16),
                "app_websocket_url": f"{ws}/ws/{self.token}",
                "config": {"static": {"url": f"{base}/static/"}},
                "application": {"name": "cacao"},
            }
            return aiohttp_jinja2.render_template("app_index.html", request, context)

        async def handle_websocket(self, request: web.Request) -> web.StreamResponse:
            if not self.allowed(request.match_info.get("token")):
                raise web.HTTPForbidden(text="cacao serve: wrong token\n")
            if self.sessions >= MAX_SESSIONS:
                raise web.HTTPServiceUnavailable(text=f"cacao serve: {MAX_SESSIONS} sessions already open\n")
            self.sessions += 1
            try:
                return await super().handle_websocket(request)
            finally:
                self.sessions -= 1

        async def on_startup(self, app: web.Application) -> None:
            where = self.own_public_url or f"http://{'localhost' if is_loopback(host) else host}:{port}"
            print(f"cacao serve: open {where.rstrip('/')}/?token={self.token}  (Ctrl-C stops it)", flush=True)

    return TokenServer()


def serve_main(argv: Sequence[str]) -> int:
    args = serve_parser().parse_args(list(argv))
    problems = Path(args.problems).expanduser()
    if not problems.is_dir():
        raise ServeUsage(f"--problems: {args.problems}: no such directory")
    if not 0 <= args.port <= 65535:
        raise ServeUsage(f"--port: {args.port} is not a port number")
    try:
        import textual_serve  # noqa: F401
    except ModuleNotFoundError:
        raise ServeUsage(f"needs textual-serve, which is not installed: {INSTALL_HINT}") from None
    port = args.port or free_port(args.host)
    if not is_loopback(args.host):
        print(
            f"cacao serve: warning: listening on {args.host}:{port}, beyond this machine: whoever reaches it with "
            "the URL's token drives the app (starts runs with your API keys, edits problems). Prefer the default "
            "127.0.0.1 and an SSH tunnel (docs/UI.md)",
            file=sys.stderr,
        )
    server = make_server(app_command(problems.resolve()), args.host, port, secrets.token_hex(20), args.public_url)
    server.serve()
    return EXIT_OK


def main(argv: Sequence[str]) -> int:
    try:
        return serve_main(argv)
    except ServeUsage as exc:
        print(f"cacao serve: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as exc:  # the port is taken, the address is not this machine's
        print(f"cacao serve: error: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return EXIT_OK
