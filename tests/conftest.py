"""Test isolation: a temporary LESSONBANK_HOME, a clean LESSONBANK_* environment, no internet.

Any test that tries to open a connection to a non-local address fails at once.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import traceback
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

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


@pytest.fixture
def cli_in_process(tmp_path: Path):  # type: ignore[no-untyped-def]
    """Runs the ``lessonbank`` command in this process, as the ``cli`` fixture runs it in a subprocess.

    Same call and result (a ``CompletedProcess`` with bytes ``stdout`` / ``stderr``), same environment
    (no ``LESSONBANK_*`` but its own ``LESSONBANK_HOME``, plus ``extra_env``), same entry point
    (:func:`lessonbank.cli.main`: global options hoisted, library errors turned into exit codes). For
    tests of what a command does; crashes, signals, the console script and byte-level stdio keep ``cli``.
    """
    from lessonbank.cli import main

    home = str(tmp_path / "home")

    def run(
        *args: str | bytes,
        stdin: bytes | None = None,
        extra_env: dict[str, str] | None = None,
        ok: bool = True,
    ) -> subprocess.CompletedProcess[bytes]:
        argv = [os.fsdecode(arg) for arg in args]  # as the interpreter decodes a command line
        env: dict[str, str | None] = {name: None for name in os.environ if name.startswith("LESSONBANK_")}
        env.update({"LESSONBANK_HOME": home, **(extra_env or {})})
        code: int | str | None = 0
        with CliRunner().isolation(input=stdin, env=env) as (stdout, stderr, _):
            try:
                main(argv)
            except SystemExit as exc:
                code = exc.code
            except Exception:  # what the interpreter does with an uncaught exception
                traceback.print_exc()
                code = 1
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
            if isinstance(code, str):
                sys.stderr.write(code + "\n")
                sys.stderr.flush()
                code = 1
            proc = subprocess.CompletedProcess(
                ["lessonbank", *argv], code or 0, stdout.getvalue(), stderr.getvalue()
            )
        if ok:
            assert proc.returncode == 0, proc.stderr.decode()
        return proc

    return run
