""".env files: keys and endpoints live in them, next to a problem or in the user's config."""

from __future__ import annotations

from pathlib import Path

from cacao_tui.llm.redaction import remember_env_file_values
from cacao_tui.settings import user_config_dir


def env_files(problem_dir: Path | None, *, cwd: Path | None = None, config_dir: Path | None = None) -> list[Path]:
    """The .env files read, highest precedence first: problem dir, working dir, user config dir."""
    dirs = [
        problem_dir,
        cwd if cwd is not None else Path.cwd(),
        config_dir if config_dir is not None else user_config_dir(),
    ]
    seen: set[Path] = set()
    found: list[Path] = []
    for d in dirs:
        if d is None:
            continue
        path = Path(d) / ".env"
        try:
            resolved = path.resolve()
        except OSError:
            continue
        if resolved in seen or not path.is_file():
            continue
        seen.add(resolved)
        found.append(path)
    return found


def load_env(problem_dir: Path | None = None, *, cwd: Path | None = None, config_dir: Path | None = None) -> list[Path]:
    """Load .env files into ``os.environ`` and return the ones read.

    A variable already in the environment is never overridden, and a file read earlier
    wins over a later one, so the order is: real environment, problem dir, working dir,
    user config dir. The SDKs then see their variables (base URLs included). Every value
    a file holds is remembered as a secret for redaction (see ``redaction``).
    """
    from dotenv import dotenv_values, load_dotenv

    files = env_files(problem_dir, cwd=cwd, config_dir=config_dir)
    for path in files:
        remember_env_file_values(dotenv_values(path))
        load_dotenv(path, override=False)
    return files
