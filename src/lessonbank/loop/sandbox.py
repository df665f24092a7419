"""Run untrusted generated Python in a child process with limits (the HumanEval evaluator's core).

Each run gets a fresh temporary directory as its working directory and a child interpreter
(``python -I``: no user site, no PYTHON* variables, a minimal environment) that, before it
executes the code, sets resource limits — address space (``RLIMIT_AS``), CPU seconds, file
size, open files — and installs an audit hook (:func:`sys.addaudithook`, which cannot be
removed) refusing sockets, process creation (fork, exec, spawn, subprocess, os.system) and
ctypes. The parent kills the whole process group at the wall-clock timeout.

Limits of this design: it is a guard against generated code that misbehaves by accident
(infinite loops, runaway allocation, network calls), not a security boundary against
deliberately hostile code; run that in a container or VM.
"""

from __future__ import annotations

import signal
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from lessonbank.errors import InputError
from lessonbank.loop.evaluators import run_command
from lessonbank.text import truncate

SandboxStatus = Literal["pass", "fail", "timeout", "memory", "blocked"]
DEFAULT_TIMEOUT_S = 10.0
DEFAULT_MEMORY_MB = 512
OUTPUT_MAX_CHARS = 4000
BLOCKED_EXIT = 86

_BOOTSTRAP = r"""
import resource, sys
memory, cpu = int(sys.argv[2]), int(sys.argv[3])
resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
resource.setrlimit(resource.RLIMIT_FSIZE, (16 * 1024 * 1024, 16 * 1024 * 1024))
resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
_BLOCKED = ("socket.", "subprocess.Popen", "os.system", "os.fork", "os.forkpty", "os.exec", "os.spawn",
            "os.posix_spawn", "os.kill", "os.killpg", "ctypes.", "pty.spawn")
def _guard(event, args):
    if event.startswith(_BLOCKED):
        sys.stderr.write(f"SandboxViolation: {event} is not allowed in the sandbox\n")
        sys.stderr.flush()
        import os as _os
        _os._exit(86)
sys.addaudithook(_guard)
path = sys.argv[1]
with open(path, encoding="utf-8") as handle:
    source = handle.read()
del resource, memory, cpu, handle
exec(compile(source, path, "exec"), {"__name__": "__main__", "__file__": path})
"""


@dataclass
class SandboxResult:
    status: SandboxStatus
    exit_code: int | None
    stdout: str
    stderr: str
    duration_ms: int

    @property
    def passed(self) -> bool:
        return self.status == "pass"


def run_python(
    code: str, *, timeout_s: float = DEFAULT_TIMEOUT_S, memory_mb: int = DEFAULT_MEMORY_MB
) -> SandboxResult:
    """Execute ``code`` as a script in the sandbox; ``pass`` means exit code 0."""
    if not isinstance(code, str):
        raise InputError(f"code must be a string, got {type(code).__name__}", field="code")
    if timeout_s <= 0 or memory_mb < 32:
        raise InputError("timeout_s must be > 0 and memory_mb ≥ 32", field="limits")
    with tempfile.TemporaryDirectory(prefix="lessonbank-sandbox-") as scratch:
        program = Path(scratch) / "program.py"
        program.write_text(code, "utf-8", errors="replace")
        argv = [
            sys.executable,
            "-I",
            "-c",
            _BOOTSTRAP,
            str(program),
            str(memory_mb * 1024 * 1024),
            str(max(1, int(timeout_s) + 1)),
        ]
        env = {"PATH": "/usr/bin:/bin", "HOME": scratch, "TMPDIR": scratch, "LANG": "C.UTF-8"}
        code_, stdout, stderr, duration = run_command(argv, cwd=scratch, timeout_s=timeout_s, env=env)
    status: SandboxStatus
    if code_ is None or code_ in (-signal.SIGXCPU, -signal.SIGKILL):
        status = "timeout"
    elif code_ == 0:
        status = "pass"
    elif code_ == BLOCKED_EXIT and "SandboxViolation" in stderr:
        status = "blocked"
    elif "MemoryError" in stderr:
        status = "memory"
    else:
        status = "fail"
    return SandboxResult(
        status, code_, truncate(stdout, OUTPUT_MAX_CHARS), truncate(stderr, OUTPUT_MAX_CHARS), duration
    )
