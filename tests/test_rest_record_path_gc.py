"""``lessonbank serve`` keeps the garbage collector off busy requests: what exists once the app is
built is frozen (never walked by a full collection again) and young collections run less often."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path

import pytest

from lessonbank.cli.server import GC_YOUNG_THRESHOLD, _settle_garbage_collector
from lessonbank.server.app import create_app
from lessonbank.settings import Settings


@pytest.fixture
def collector() -> Iterator[None]:
    threshold = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*threshold)


def test_the_built_app_is_frozen_and_young_collections_are_spaced(tmp_path: Path, collector: None) -> None:
    app = create_app(Settings(home=tmp_path / "home", db=f"sqlite:///{tmp_path / 'bank.db'}"), worker=False)
    gc.unfreeze()
    _settle_garbage_collector()
    assert gc.get_freeze_count() > 10_000  # the app, its routes and schemas among them
    assert gc.get_threshold()[0] == GC_YOUNG_THRESHOLD > 700
    # Frozen objects are out of every generation a collection walks.
    walked = {id(item) for generation in range(3) for item in gc.get_objects(generation)}
    assert id(app) not in walked and id(app.router) not in walked
