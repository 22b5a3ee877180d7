"""Scrub anything that looks like a secret out of text that leaves ktt (compiler messages, logs).

A compiler message quotes the file it failed on; if that file was a secret (the process
environment, a key file, /etc/shadow), the message would carry it to the model, the LLM
records and the compile cache. Includes like that are refused before the compiler runs;
this is the last wall, applied to every log and diagnostic ktt reports or caches:

- key-shaped tokens of the common providers (``sk-...``, ``AIza...``, ``ghp_...``,
  ``xoxb-...``, ``AKIA...``, ``hf_...``), JSON web tokens, PEM private keys and password
  hashes (``$6$salt$hash``);
- the value in ``NAME=value`` (or ``NAME: value``) when NAME looks like a secret (KEY,
  TOKEN, SECRET, PASSWORD, ...), the shape of an environment dump or a .env file;
- the values of this process's environment variables whose names look like secrets.

Every pattern is linear in the text (character classes with no nested repetition).
"""

from __future__ import annotations

import os
import re

MASK = "[redacted]"
_SECRET_WORDS = ("KEY", "TOKEN", "SECRET", "PASSW", "PASSPHRASE", "CREDENTIAL", "AUTH", "COOKIE", "PRIVATE", "SESSION")
_KEY_SHAPES = re.compile(
    r"sk-[A-Za-z0-9_\-]{16,}"
    r"|AIza[0-9A-Za-z_\-]{30,}"
    r"|gh[pousr]_[A-Za-z0-9]{30,}"
    r"|github_pat_[A-Za-z0-9_]{30,}"
    r"|xox[abprs]-[A-Za-z0-9\-]{10,}"
    r"|AKIA[0-9A-Z]{16}"
    r"|hf_[A-Za-z0-9]{30,}"
    r"|eyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}"
    r"|\$(?:1|2[aby]?|5|6|y|gy|7)\$[^\s:$]{0,64}\$[^\s:]+"
)
_PEM = re.compile(r"-----BEGIN [A-Z ]{0,40}PRIVATE KEY-----")
_PEM_END = re.compile(r"-----END [A-Z ]{0,40}PRIVATE KEY-----")
# NAME=value / NAME: value, starting only where an identifier starts (one try per run: linear).
_ASSIGN = re.compile(
    r"(?<![A-Za-z0-9_])([A-Za-z_][A-Za-z0-9_]*)(\s?[=:]\s?)(\"[^\"\n]{8,}\"|'[^'\n]{8,}'|[A-Za-z0-9_\-+/=.:@~%]{8,})"
)
MIN_SECRET_LEN = 8


def looks_secret_name(name: str) -> bool:
    upper = name.upper()
    return any(word in upper for word in _SECRET_WORDS)


def _environment_secrets() -> list[str]:
    values = [v for k, v in os.environ.items() if looks_secret_name(k) and len(v) >= MIN_SECRET_LEN]
    return sorted(set(values), key=len, reverse=True)


def redact(text: str, extra: list[str] | None = None) -> str:
    """``text`` with secret-looking parts replaced by ``[redacted]``."""
    if not text:
        return text
    for value in [*(extra or []), *_environment_secrets()]:
        if value and len(value) >= MIN_SECRET_LEN and value in text:
            text = text.replace(value, MASK)
    start = _PEM.search(text)
    while start is not None:
        end = _PEM_END.search(text, start.end())
        stop = end.end() if end else len(text)
        text = text[: start.start()] + MASK + text[stop:]
        start = _PEM.search(text, start.start() + len(MASK))
    text = _KEY_SHAPES.sub(MASK, text)

    def assign(m: re.Match[str]) -> str:
        if looks_secret_name(m.group(1)) and m.group(3) != MASK:
            return f"{m.group(1)}{m.group(2)}{MASK}"
        return m.group(0)

    return _ASSIGN.sub(assign, text)


def cap(text: str, limit: int, what: str = "output") -> str:
    """At most about ``limit`` characters: the head, a marker, and the last lines."""
    if len(text) <= limit:
        return text
    tail = min(2000, limit // 8)
    head = limit - tail
    cut = len(text) - head - tail
    return f"{text[:head]}\n[... {cut:,} characters of {what} cut ...]\n{text[-tail:]}"
