"""Class 1: every subprocess gets an allow-listed environment, never an API key or a .env value.

The children are what runs model-written or problem code: ``python -m ktt`` (started by the
engine), and what ktt starts (the GPU worker, a host reference, the C compiler, ncu).
"""

from __future__ import annotations

import asyncio
import json
import os
import stat
import sys
from pathlib import Path

import pytest

from cacao_tui.ktt_client import KttTuner
from cacao_tui.subprocesses import run_streaming
from ktt import procs

SECRETS = {
    "OPENAI_API_KEY": "sk-envtest0123456789abcdefabcdef",
    "ANTHROPIC_API_KEY": "sk-ant-envtest0123456789abcdef",
    "CERIT_TOKEN": "cerit-token-value-0123456789",
    "GITHUB_TOKEN": "ghp_envtest0123456789abcdefabcdefabcdef01",
    "DATABASE_PASSWORD": "hunter2hunter2",
    "MY_PROVIDER_SECRET": "a-secret-from-a-dotenv-file",
}
DUMP = "import json, os; print(json.dumps(dict(os.environ)))"


@pytest.fixture(autouse=True)
def secrets_in_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("SOME_UNRELATED_SETTING", "1")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    monkeypatch.setenv("KTT_CACHE_DIR", "/tmp/ktt-cache-for-test")


def assert_clean(env: dict[str, str]) -> None:
    text = json.dumps(env)
    for name, value in SECRETS.items():
        assert name not in env and value not in text
    assert "SOME_UNRELATED_SETTING" not in env
    assert env.get("CUDA_VISIBLE_DEVICES") == "0" and env.get("KTT_CACHE_DIR") == "/tmp/ktt-cache-for-test"
    assert env.get("PATH") == os.environ["PATH"]
    assert all(procs.env_name_allowed(name) for name in env)


def test_ktt_children_get_only_the_allow_list() -> None:
    res = procs.run([sys.executable, "-c", DUMP], timeout_s=60)
    assert res.returncode == 0
    assert_clean(json.loads(res.stdout))


def test_an_explicit_environment_is_filtered_too() -> None:
    """A caller that builds its own env (the host compiler adds LC_ALL) cannot pass a key through."""
    res = procs.run([sys.executable, "-c", DUMP], timeout_s=60, env={**os.environ, "LC_ALL": "C"})
    env = json.loads(res.stdout)
    assert_clean(env)
    assert env["LC_ALL"] == "C"


def test_engine_children_get_only_the_allow_list() -> None:
    result = asyncio.run(run_streaming([sys.executable, "-c", DUMP], timeout_s=60))
    env = json.loads(result.stdout_lines[-1])
    assert_clean(env)
    assert env[procs.PARENT_ENV] == str(os.getpid())


def test_the_ktt_command_line_the_engine_starts_sees_no_key(tmp_path: Path) -> None:
    """KttTuner's own environment for ``python -m ktt check``, captured by a stand-in interpreter."""
    out = tmp_path / "env.json"
    fake = tmp_path / "python"
    dump = f"import json, os\nopen({str(out)!r}, 'w').write(json.dumps(dict(os.environ)))\n"
    fake.write_text(f"#!{sys.executable}\n{dump}")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    tuner = KttTuner(python=str(fake))
    with pytest.raises(Exception):  # noqa: B017 - the stand-in prints no report; only its environment matters
        asyncio.run(tuner.check(tmp_path, tmp_path / "k.cu", tmp_path / "t.yaml", sample=1, arch="sm_90"))
    env = json.loads(out.read_text())
    assert_clean(env)
    assert env["PYTHONPATH"].split(os.pathsep)[0] == str(Path(__file__).resolve().parents[2])
