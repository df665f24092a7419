"""What tests of a new process's first recall share: a bank of each SQL store, and a script run in a
fresh interpreter that prints its answer as JSON on its last line (the environment is the test's,
which the autouse ``_isolated`` fixture has cleared of ``LESSONBANK_*`` settings)."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.contract.conftest import POSTGRES_URL, drop_postgres_schema, require


def sql_bank_url(backend: str, tmp_path: Path, label: str) -> Iterator[str]:
    """A bank's URL on ``backend`` (``sqlite`` or ``postgres``: a schema of its own, dropped after)."""
    if backend == "sqlite":
        yield f"sqlite:///{tmp_path / 'bank.db'}"
        return
    require("postgres")
    schema = f"lbtest_{label}_{uuid.uuid4().hex[:10]}"
    try:
        yield f"{POSTGRES_URL}?schema={schema}"
    finally:
        drop_postgres_schema(schema)


def answer_of(script: str, *args: str) -> Any:
    """Run ``script`` in a new interpreter with ``args``; the JSON its last line printed."""
    done = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])
