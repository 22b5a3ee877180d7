""".env files: a run's provider keys, endpoints and choices, and nothing else.

Where they are looked for, the user's own first:

- ``~/.config/cacao_tui/.env`` (``$XDG_CONFIG_HOME/cacao_tui/.env``): the user's config;
- problem-side files, whoever wrote them: ``.env`` in the problem directory and in every
  directory above it (the original CACAO loads the ``.env`` at the root of its checkout,
  with the problems below it), the nearest first, then the working directory's.

A problem directory is untrusted (docs/SECURITY.md), so a problem-side file supplies only
provider keys (the registry's ``*_API_KEY`` variables) and the run's choices
(``LLM_PROVIDER``, ``LLM_MODEL``, ``CACAO_LLM_TIMEOUT``). Its endpoints (``*_BASE_URL``,
``CERIT_API_BASE``) are ignored, with one warning, unless the user's environment or config
says ``CACAO_DOTENV_ENDPOINTS=1``: an endpoint chosen by a problem would receive the user's
key. The user's config supplies keys, endpoints, choices and that switch. Whatever the file,
every other name is ignored, nothing is written to ``os.environ`` (so nothing reaches a
child process: ``KTT_*``, ``PYTHONPATH``, ``LD_*``, ``CC``/``CXX`` come only from the user's
environment), and the user's environment always wins over every file. A file is read only
when it is a regular file of this user, capped and without blocking (a FIFO or a link to
/dev/zero named ``.env`` is skipped with a note). Every value a file holds is remembered as
a secret for redaction (``redaction``).
"""

from __future__ import annotations

import io
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from cacao_tui.llm.redaction import remember_env_file_values
from cacao_tui.llm.registry import SELECTION_VARS, endpoint_variables, key_variables
from cacao_tui.llm.timeouts import LLM_TIMEOUT_ENV
from cacao_tui.settings import user_config_dir
from ktt.capped_read import describe_read_error, read_text_capped

ENDPOINTS_SWITCH = "CACAO_DOTENV_ENDPOINTS"  # in the user's environment or config: problem-side endpoints count
MAX_ENV_FILE_BYTES = 64 * 1024
MAX_PARENTS = 64  # directories above the problem looked at (a path deeper than this is not a checkout)
_TRUE = frozenset({"1", "true", "yes", "on"})


def _keys() -> frozenset[str]:
    return frozenset(key_variables())


def _choices() -> frozenset[str]:
    return frozenset({*SELECTION_VARS, LLM_TIMEOUT_ENV})


def _endpoints() -> frozenset[str]:
    return frozenset(endpoint_variables())


@dataclass(frozen=True)
class EnvFile:
    path: Path
    user: bool  # the user's own config (else problem-side)


@dataclass
class LLMEnvironment:
    """What a run's LLM layer reads: the user's environment plus what the .env files may add.

    ``values`` is a new mapping (``os.environ`` is never changed); ``files`` the files read,
    highest precedence first; ``notes`` one line per thing ignored (an endpoint a problem-side
    file may not set, a file that is not a regular file of this user).
    """

    values: dict[str, str]
    files: list[Path] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _owned_regular(path: Path) -> bool | None:
    """True for a regular file of this user; False for something else to skip; None when absent."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    except OSError:
        return False
    return st.st_uid == os.getuid() if path.is_file() else False


def env_files(problem_dir: Path | None, *, cwd: Path | None = None, config_dir: Path | None = None) -> list[EnvFile]:
    """The .env files that exist, highest precedence first: the user's config, then the problem
    directory and each directory above it (nearest first), then the working directory."""
    candidates = [EnvFile(Path(config_dir if config_dir is not None else user_config_dir()) / ".env", True)]
    if problem_dir is not None:
        here = Path(problem_dir).absolute()
        for d in [here, *here.parents][: MAX_PARENTS + 1]:
            candidates.append(EnvFile(d / ".env", False))
    candidates.append(EnvFile(Path(cwd if cwd is not None else Path.cwd()) / ".env", False))
    seen: set[Path] = set()
    found: list[EnvFile] = []
    for c in candidates:
        try:
            resolved = c.path.resolve()
        except (OSError, RuntimeError):
            continue
        if resolved in seen or (not c.path.exists() and not c.path.is_symlink()):
            continue
        seen.add(resolved)
        found.append(c)
    return found


def _read(file: EnvFile, notes: list[str]) -> dict[str, str]:
    from dotenv import dotenv_values

    owned = _owned_regular(file.path)
    if owned is None:
        return {}
    if not owned:
        notes.append(f"{file.path}: not read (not a regular file of yours)")
        return {}
    try:
        text = read_text_capped(file.path, MAX_ENV_FILE_BYTES, errors="replace")
    except OSError as exc:
        notes.append(f"{file.path}: not read ({describe_read_error(exc)})")
        return {}
    try:
        # No ${VAR} expansion in a problem-side file: it could copy another secret of the
        # environment into a key variable, to be sent to a provider.
        values = dotenv_values(stream=io.StringIO(text), interpolate=file.user)
    except ValueError:
        notes.append(f"{file.path}: not read (not a .env file)")
        return {}
    remember_env_file_values(values)
    return {k: v for k, v in values.items() if v is not None}


def _switch_on(value: str | None) -> bool:
    return (value or "").strip().lower() in _TRUE


def llm_environment(
    problem_dir: Path | None = None,
    *,
    cwd: Path | None = None,
    config_dir: Path | None = None,
    base: Mapping[str, str] | None = None,
) -> LLMEnvironment:
    """The environment a run's provider selection, client and timeouts read (see the module docstring)."""
    env = dict(os.environ if base is None else base)
    result = LLMEnvironment(env)
    files = env_files(problem_dir, cwd=cwd, config_dir=config_dir)
    read = [(f, _read(f, result.notes)) for f in files]
    user_values = next((values for f, values in read if f.user), {})
    endpoints_allowed = _switch_on(env.get(ENDPOINTS_SWITCH)) or _switch_on(user_values.get(ENDPOINTS_SWITCH))
    keys, choices, endpoints = _keys(), _choices(), _endpoints()
    for f, values in read:
        if not values and not f.path.is_file():
            continue
        result.files.append(f.path)
        for name, value in values.items():
            allowed = name in keys or name in choices or (name in endpoints and (f.user or endpoints_allowed))
            if not allowed:
                if name in endpoints and name not in env:
                    result.notes.append(
                        f"{f.path}: {name} ignored: an endpoint in a .env beside or above the problem would "
                        f"receive your key; set {ENDPOINTS_SWITCH}=1 in your environment or in "
                        f"{user_config_dir() / '.env'} to use it"
                    )
                continue
            env.setdefault(name, value)  # the environment, then a file read earlier, wins
    return result
