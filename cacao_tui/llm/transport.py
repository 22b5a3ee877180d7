"""Network failures below the SDKs: what a stream raises while it is being read.

The SDKs map their request errors to their own classes, but an error while a streamed
reply is being read (a read timeout on a stalled stream, a dropped connection) arrives as
the HTTP library's own exception. Each adapter catches these too and reports one
retryable ``ProviderError``.
"""

from __future__ import annotations

import functools
import importlib

from cacao_tui.llm.errors import ProviderError
from cacao_tui.llm.redaction import redact


@functools.cache
def transport_error_types() -> tuple[type[BaseException], ...]:
    """The transport errors of the HTTP libraries the SDKs use (httpx2, httpx)."""
    found: list[type[BaseException]] = []
    for module_name in ("httpx2", "httpx"):
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        found.append(module.TransportError)
    return tuple(found) or (OSError,)


def transport_error(exc: BaseException) -> ProviderError:
    if "timeout" in type(exc).__name__.lower():
        return ProviderError("request timed out (no data within the limit)", kind="timeout", retryable=True)
    return ProviderError(
        f"connection failed: {type(exc).__name__}: {redact(str(exc))}", kind="connection", retryable=True
    )
