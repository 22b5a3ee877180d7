"""``--cluster``: ``local`` (this machine's GPUs, the default) or ``ray[://ADDRESS]``."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass

INSTALL_HINT = "pip install -e '.[cluster]' (or pip install 'ray>=2.9')"


class ClusterError(Exception):
    """A cluster that cannot be used (bad value, Ray missing, unreachable): one line, exit 2."""


@dataclass(frozen=True)
class ClusterChoice:
    kind: str  # "local" | "ray"
    address: str | None = None  # None with "ray": RAY_ADDRESS, else a running local cluster

    @property
    def is_ray(self) -> bool:
        return self.kind == "ray"

    def describe(self) -> str:
        if not self.is_ray:
            return "this machine's GPUs"
        return f"the Ray cluster at {self.address}" if self.address else "the Ray cluster (RAY_ADDRESS or local)"


LOCAL = ClusterChoice("local")


def parse_cluster(text: str | None) -> ClusterChoice:
    """``local``, ``ray``, ``ray://HOST:PORT`` (Ray client) or ``ray:HOST:PORT`` (a GCS address)."""
    if text is None:
        return LOCAL
    value = text.strip()
    if value in ("", "local"):
        return LOCAL
    if value == "ray":
        return ClusterChoice("ray")
    if value.startswith("ray://"):
        rest = value[len("ray://") :]
        if not rest or any(c.isspace() for c in rest):
            raise ClusterError(f"--cluster: {text!r}: expected ray://HOST:PORT")
        return ClusterChoice("ray", value)
    if value.startswith("ray:"):
        rest = value[len("ray:") :]
        if not rest or any(c.isspace() for c in rest):
            raise ClusterError(f"--cluster: {text!r}: expected ray:HOST:PORT")
        return ClusterChoice("ray", rest)
    raise ClusterError(f"--cluster: {text!r}: expected local, ray, ray://HOST:PORT or ray:HOST:PORT")


def require_ray() -> None:
    """Ray is an optional extra: say how to install it instead of failing on an import."""
    if importlib.util.find_spec("ray") is None:
        raise ClusterError(f"--cluster ray needs Ray, which is not installed; install it with {INSTALL_HINT}")
