"""Real JavaScript programs for the tests that drive them (Claude Code, jest, vitest, markdownlint):
taken from PATH, else from a cache folder where npm installs them on first use.

The cache (``$LESSONBANK_TEST_CACHE``, default ``~/.cache/lessonbank-tests``) outlives a test run, so
the registry is asked once per machine. Without npm, or when npm cannot install a package, the test
is skipped with the reason: these programs are not part of the project's own dependencies.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

CACHE = Path(os.environ.get("LESSONBANK_TEST_CACHE", Path.home() / ".cache" / "lessonbank-tests"))
NODE_MODULES = CACHE / "node_modules"


def npm_program(package: str, binary: str, *, on_path: bool = True) -> Path:
    """The executable ``binary`` of npm ``package``: on PATH (when ``on_path``), or in the cache,
    installed there if missing; skips the test when it cannot be had."""
    found = shutil.which(binary) if on_path else None
    if found:
        return Path(found)
    cached = NODE_MODULES / ".bin" / binary
    if not cached.exists():
        npm = shutil.which("npm")
        if npm is None:
            pytest.skip(f"npm is not installed, so {package} cannot be installed")
        CACHE.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(
            [npm, "install", "--prefix", str(CACHE), "--no-audit", "--no-fund", package],
            capture_output=True,
            text=True,
            timeout=600,
        )
        if done.returncode != 0 or not cached.exists():
            pytest.skip(f"npm could not install {package}: {(done.stderr or done.stdout)[-500:]}")
    return cached
