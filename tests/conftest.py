"""Test isolation: a temporary LESSONBANK_HOME, a clean LESSONBANK_* environment, no internet.

Any test that tries to open a connection to a non-local address fails at once.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from lessonbank import LessonBank
from lessonbank.llm import FakeLLM

_LOCAL = ("127.0.0.1", "::1", "localhost", "0.0.0.0")
_real_connect = socket.socket.connect


def _guarded_connect(self: socket.socket, address: object) -> None:
    host = address[0] if isinstance(address, tuple) else address
    if self.family in (socket.AF_INET, socket.AF_INET6) and host not in _LOCAL:
        raise RuntimeError(f"tests must not reach the internet (tried {address!r})")
    _real_connect(self, address)  # type: ignore[arg-type]


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in list(os.environ):
        if name.startswith("LESSONBANK_") and name != "LESSONBANK_REQUIRE_SERVICES":
            monkeypatch.delenv(name)
    for name in (
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_BASE_URL",
        "OLLAMA_HOST",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LESSONBANK_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(socket.socket, "connect", _guarded_connect)
    yield


SEED_004_REPLY = """<situation>Refactoring large Go files (>1000 lines)</situation>
<mistake>Attempted full rewrite via @coder write</mistake>
<correction>Use @coder patch or Edit tool for surgical changes</correction>
<tags>go, refactor, large-file, edit-tool</tags>"""


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'bank.db'}"


@pytest.fixture
def fake_llm() -> FakeLLM:
    return FakeLLM([SEED_004_REPLY])


@pytest.fixture
def bank(db_url: str, fake_llm: FakeLLM) -> Iterator[LessonBank]:
    with LessonBank(db_url, llm=fake_llm) as b:
        yield b


@pytest.fixture
def cli(tmp_path: Path):  # type: ignore[no-untyped-def]
    """Runs `python -m lessonbank.cli` in a subprocess with its own LESSONBANK_HOME."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("LESSONBANK_")}
    env["LESSONBANK_HOME"] = str(tmp_path / "home")

    def run(
        *args: str | bytes,
        stdin: bytes | None = None,
        extra_env: dict[str, str] | None = None,
        ok: bool = True,
    ) -> subprocess.CompletedProcess[bytes]:
        argv: list[str | bytes] = [sys.executable, "-m", "lessonbank.cli", *args]
        proc = subprocess.run(
            argv, input=stdin, capture_output=True, env={**env, **(extra_env or {})}, timeout=60
        )
        if ok:
            assert proc.returncode == 0, proc.stderr.decode()
        return proc

    return run
