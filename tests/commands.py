"""Command-line tools the tests call: found on PATH, else a failure under CI (.ci/run
installs every one of them) and a skip elsewhere."""

from __future__ import annotations

import os
import shutil

import pytest


def need(*tools: str, hint: str) -> list[str]:
    """The paths of `tools`; `hint` says how to install a missing one."""
    paths = [shutil.which(t) for t in tools]
    missing = [t for t, p in zip(tools, paths) if p is None]
    if missing:
        msg = f"{' and '.join(missing)} not on PATH ({hint})"
        if os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)
    return paths
