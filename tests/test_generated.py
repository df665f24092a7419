"""Generated modules are what ``scripts/unasync.py`` produces from their async source now, and its
rules rewrite code only: strings and comments keep their words (but for the names a pair lists)."""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]


def load_unasync() -> ModuleType:
    spec = importlib.util.spec_from_file_location("unasync_script", ROOT / "scripts" / "unasync.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


unasync = load_unasync()


def test_every_generated_file_is_current(capsys: pytest.CaptureFixture[str]) -> None:
    assert unasync.main(["--check"]) == 0, capsys.readouterr().out


def test_a_hand_edited_target_is_stale(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (real,) = [p for p in unasync.PAIRS if p.target.endswith("bank/sync.py")]
    edited = tmp_path / "sync.py"
    edited.write_text((ROOT / real.target).read_text("utf-8").replace("return self", "return  self", 1))
    pair = unasync.Pair(real.source, str(edited), real.doc, real.names)
    assert unasync.main(["--check"], pairs=[pair]) == 1
    assert "is stale: run `python scripts/unasync.py`" in capsys.readouterr().out
    assert unasync.main([], pairs=[pair]) == 0  # regenerated
    assert unasync.main(["--check"], pairs=[pair]) == 0


def test_the_generated_bank_says_it_is_generated() -> None:
    text = (ROOT / "src/lessonbank/bank/sync.py").read_text("utf-8")
    assert text.startswith("# Generated from src/lessonbank/bank/aio.py by scripts/unasync.py: do not edit.")
    assert "class LessonBank(SyncBankBase):" in text
    coroutine_nodes = (ast.AsyncFunctionDef, ast.Await, ast.AsyncWith, ast.AsyncFor)
    assert not [node for node in ast.walk(ast.parse(text)) if isinstance(node, coroutine_nodes)]


SOURCE = '''"""The async module: its docstring is replaced."""

import asyncio
import time


class AsyncThing(AsyncBase):
    """An AsyncThing: async and await stay in prose; AsyncThingy is another word."""

    async def step(self, client: httpx.AsyncClient) -> AsyncThing:
        # await the client; AsyncThing here
        await asyncio.sleep(0.1)
        async with client.stream("GET", "/async") as response:
            async for line in response.aiter_lines():
                print(f"await {line}")
        await response.aclose()
        return await self._call(time.monotonic)

    async def __aenter__(self) -> AsyncThing:
        return self
'''

EXPECTED = '''# Generated from src/x/aio.py by scripts/unasync.py: do not edit.
# Edit the source, then run `python scripts/unasync.py` (tests/test_generated.py checks this file is current).
"""The sync module."""

import asyncio
import time


class Thing(SyncBase):
    """An Thing: async and await stay in prose; AsyncThingy is another word."""

    def step(self, client: httpx.Client) -> Thing:
        # await the client; Thing here
        time.sleep(0.1)
        with client.stream("GET", "/async") as response:
            for line in response.iter_lines():
                print(f"await {line}")
        response.close()
        return self._call(time.monotonic)

    def __enter__(self) -> Thing:
        return self
'''


def test_the_rules_rewrite_code_and_only_listed_names_in_prose() -> None:
    pair = unasync.Pair(
        "src/x/aio.py", "src/x/sync.py", "The sync module.", {"AsyncThing": "Thing", "AsyncBase": "SyncBase"}
    )
    assert unasync.rewrite(SOURCE, pair) == EXPECTED
