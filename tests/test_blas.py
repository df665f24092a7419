"""BLAS held to one thread by concurrent holders: the first sets the limit, the last restores it."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from lessonbank.retrieval import blas


class RecordingController:
    """Stands for threadpoolctl's controller: BLAS's thread count is one setting per process, and
    each limit restores what it found (as threadpoolctl's limiter does)."""

    def __init__(self, threads: int) -> None:
        self.threads = threads

    def limit(self, *, limits: int, user_api: str) -> Any:
        controller, found = self, self.threads
        self.threads = limits

        class Limiter:
            def restore_original_limits(self) -> None:
                controller.threads = found

        return Limiter()


def test_threads_leaving_out_of_order_restore_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    controller = RecordingController(threads=4)
    monkeypatch.setattr(blas, "blas_controller", lambda: controller)
    first_in, second_in, first_may_leave = threading.Event(), threading.Event(), threading.Event()
    inside: list[int] = []

    def first() -> None:
        with blas.one_blas_thread():
            first_in.set()
            second_in.wait()
            inside.append(controller.threads)
        first_may_leave.set()

    def second() -> None:
        first_in.wait()
        with blas.one_blas_thread():
            second_in.set()
            first_may_leave.wait()  # the first holder leaves while this one still holds
            inside.append(controller.threads)

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert inside == [1, 1]
    assert controller.threads == 4


def test_without_threadpoolctl_products_run_as_numpy_chooses(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(blas, "blas_controller", lambda: None)
    with blas.one_blas_thread():
        pass
    assert blas._holders == 0
