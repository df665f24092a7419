"""BLAS held to one thread by concurrent holders: the process's setting comes back as it was."""

from __future__ import annotations

import threading

import pytest

np = pytest.importorskip("numpy")
threadpoolctl = pytest.importorskip("threadpoolctl")

from lessonbank.retrieval.blas import blas_controller, one_blas_thread  # noqa: E402


def blas_threads() -> list[int]:
    np.ones((2, 2)) @ np.ones((2, 2))  # BLAS loaded
    return [lib["num_threads"] for lib in threadpoolctl.threadpool_info() if lib["user_api"] == "blas"]


def test_threads_leaving_out_of_order_restore_the_setting() -> None:
    start = blas_threads()
    if not start or max(start) < 2 or blas_controller() is None:
        pytest.skip("BLAS runs on one thread here already: nothing for the limit to change")
    first_in, second_in, first_may_leave = threading.Event(), threading.Event(), threading.Event()
    inside: list[list[int]] = []

    def first() -> None:
        with one_blas_thread():
            first_in.set()
            second_in.wait()
            inside.append(blas_threads())
        first_may_leave.set()

    def second() -> None:
        first_in.wait()
        with one_blas_thread():
            second_in.set()
            first_may_leave.wait()  # the first holder leaves while this one still holds
            inside.append(blas_threads())

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert inside == [[1] * len(start)] * 2
    assert blas_threads() == start
