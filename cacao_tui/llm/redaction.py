"""Secrets never reach a record, a log line or the terminal: ``redact`` replaces them.

Two kinds are replaced by ``[REDACTED]``:

- known values: the value of every key variable in the provider registry (from the
  environment, .env files included once loaded), and every value read from a .env file
  (``remember_env_file_values``) except the variables that only steer selection or name
  an endpoint; values shorter than 8 characters are left alone (they would match
  ordinary words);
- key-shaped strings, whoever they belong to: ``sk-...`` (OpenAI, Anthropic's
  ``sk-ant-...``), ``AIza...`` (Google), GitHub, Hugging Face, AWS and Slack tokens, the
  token after ``Bearer``, the value in ``NAME_KEY=...`` / ``NAME_TOKEN=...`` /
  ``..._SECRET=...`` / ``..._PASSWORD=...`` assignments (an environment dump), and the
  password in a URL's ``user:password@``.

Every pattern runs only when a literal it needs is present, and none can backtrack
more than linearly, so redacting a large reply stays cheap.
"""

from __future__ import annotations

import os
import re
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from cacao_tui.llm.registry import SELECTION_VARS, endpoint_variables, key_variables
from cacao_tui.llm.timeouts import LLM_TIMEOUT_ENV

REDACTED = "[REDACTED]"
MIN_SECRET_CHARS = 8
# Variables read from .env files that are configuration, not secrets.
PUBLIC_VARIABLES = frozenset({*SELECTION_VARS, *endpoint_variables(), LLM_TIMEOUT_ENV})

_env_file_values: set[str] = set()

_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL")


def _starts_word(m: re.Match[str]) -> bool:
    """True when the match does not begin inside a longer word (``task-...`` is no ``sk-``)."""
    i = m.start()
    return i == 0 or not (m.string[i - 1].isalnum() or m.string[i - 1] == "_")


def _whole_token(m: re.Match[str]) -> str:
    return REDACTED if _starts_word(m) else m.group(0)


def _secret_assignment(m: re.Match[str]) -> str:
    if _starts_word(m) and _SECRET_NAME.search(m.group(1)):
        return m.group(1) + REDACTED
    return m.group(0)


# (trigger literals, pattern, replacement). A pattern runs only when one trigger occurs;
# each starts with a literal or a single character test, so a scan is linear and quick.
_Rule = tuple[tuple[str, ...], re.Pattern[str], str | Callable[[re.Match[str]], str]]
_RULES: tuple[_Rule, ...] = (
    (("sk-",), re.compile(r"sk-[A-Za-z0-9_\-]{16,}"), _whole_token),
    (("AIza",), re.compile(r"AIza[0-9A-Za-z_\-]{30,}"), REDACTED),
    (("ghp_", "gho_", "ghu_", "ghs_", "ghr_"), re.compile(r"gh[pousr]_[A-Za-z0-9]{30,}"), REDACTED),
    (("github_pat_",), re.compile(r"github_pat_[A-Za-z0-9_]{30,}"), REDACTED),
    (("hf_",), re.compile(r"hf_[A-Za-z0-9]{30,}"), _whole_token),
    (("AKIA",), re.compile(r"AKIA[0-9A-Z]{16}"), REDACTED),
    (("xox",), re.compile(r"xox[abprs]-[A-Za-z0-9\-]{10,}"), REDACTED),
    (
        ("earer", "EARER"),
        re.compile(r"([bB][eE][aA][rR][eE][rR]\s+)[A-Za-z0-9._~+/=\-]{20,}"),
        rf"\1{REDACTED}",
    ),
    (
        ("KEY", "TOKEN", "SECRET", "PASSW", "CREDENTIAL"),
        # The name is taken whole (possessive), then judged: no backtracking through it.
        re.compile(r"(?=[A-Z])(?<![A-Za-z0-9_])([A-Z][A-Z0-9_]*+=)[^\s\"'\\\x00]{8,}+"),
        _secret_assignment,
    ),
    (
        ("key", "Key", "KEY", "token", "Token", "secret", "Secret"),
        re.compile(
            r"(?=[acxACX])((?i:api[_-]?key|x-api-key|access[_-]?token|auth[_-]?token|client[_-]?secret)"
            r"[\"']?\s*[:=]\s*[\"']?)[A-Za-z0-9._\-+/]{16,}"
        ),
        rf"\1{REDACTED}",
    ),
    (("://",), re.compile(r"(://[^/\s:@\"']{1,256}:)[^/\s@\"']{1,256}@"), rf"\1{REDACTED}@"),
)

# Any trigger of any rule: one scan of a string decides whether a rule can match at all
# (most strings in a call record have none).
_ANY_TRIGGER = re.compile("|".join(re.escape(t) for triggers, _, _ in _RULES for t in triggers))


def remember_env_file_values(values: Mapping[str, str | None]) -> None:
    """Treat every value a .env file set as a secret (selection and endpoint variables aside)."""
    for name, value in values.items():
        if name in PUBLIC_VARIABLES or value is None:
            continue
        value = value.strip()
        if len(value) >= MIN_SECRET_CHARS:
            _env_file_values.add(value)


def forget_env_file_values() -> None:
    """For tests: drop the values remembered from .env files."""
    _env_file_values.clear()


_known: list[tuple[object, tuple[str, ...]]] = []  # the last answer of known_secrets, by what it came from


def known_secrets(env: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The literal values to redact now, longest first (so a key containing another goes whole);
    worked out again only when a key variable or the .env values changed (every record's every
    string asks)."""
    env = os.environ if env is None else env
    raw = tuple(env.get(name) for name in key_variables())
    source = (raw, frozenset(_env_file_values))
    if _known and _known[0][0] == source:
        return _known[0][1]
    values = {v.strip() for v in raw if v}
    values |= _env_file_values
    secrets = tuple(sorted((v for v in values if len(v) >= MIN_SECRET_CHARS), key=len, reverse=True))
    _known[:] = [(source, secrets)]
    return secrets


class _CleanTexts:
    """Texts already found clean for a set of secrets, by (hash, length): history messages
    are resent on every turn of a tool loop and need scanning only once."""

    def __init__(self, size: int = 4096) -> None:
        self.size = size
        self.secrets: tuple[str, ...] = ()
        self._seen: OrderedDict[tuple[int, int], None] = OrderedDict()

    def check(self, text: str, secrets: tuple[str, ...]) -> bool:
        if secrets != self.secrets:
            self.secrets = secrets
            self._seen.clear()
            return False
        key = (hash(text), len(text))
        if key in self._seen:
            self._seen.move_to_end(key)
            return True
        return False

    def add(self, text: str) -> None:
        self._seen[(hash(text), len(text))] = None
        if len(self._seen) > self.size:
            self._seen.popitem(last=False)


_clean = _CleanTexts()


def redact(text: str, secrets: Iterable[str] | None = None) -> str:
    """``text`` with every known secret and key-shaped string replaced by ``[REDACTED]``."""
    if not text:
        return text
    known = tuple(secrets) if secrets is not None else known_secrets()
    if len(text) > 64 and _clean.check(text, known):
        return text
    out = text
    for value in known:
        if value in out:
            out = out.replace(value, REDACTED)
    if _ANY_TRIGGER.search(out) is not None:
        for triggers, pattern, replacement in _RULES:
            if any(t in out for t in triggers):
                out = pattern.sub(replacement, out)
    if out is text or out == text:
        if len(text) > 64:
            _clean.add(text)
        return text
    return out


# The shortest string any rule or known value can change: a URL's "://u:p@" (7 characters).
SHORTEST_SECRET_TEXT = 7


def redact_data(data: Any, secrets: tuple[str, ...] | None = None) -> Any:
    """A copy of JSON-like ``data`` (dicts, lists, strings) with every string redacted."""
    return _redact_data(data, known_secrets() if secrets is None else secrets)


def _redact_data(data: Any, known: tuple[str, ...]) -> Any:
    # Numbers, booleans, None and strings too short to hold a secret are taken as they are
    # without a call (a call record has thousands of them).
    if isinstance(data, str):
        return redact(data, known) if len(data) >= SHORTEST_SECRET_TEXT else data
    if isinstance(data, dict):
        return {k: _redact_data(v, known) if isinstance(v, (str, dict, list, tuple)) else v for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [_redact_data(v, known) if isinstance(v, (str, dict, list, tuple)) else v for v in data]
    return data
