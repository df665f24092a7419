"""The one error tree: every error pickles with its fields, and the public ones are exported."""

from __future__ import annotations

import inspect
import pickle
from pathlib import Path
from typing import Any

import pytest

import lessonbank
from lessonbank import errors

ERRORS = sorted(
    (
        value
        for value in vars(errors).values()
        if inspect.isclass(value) and issubclass(value, BaseException) and value.__module__ == errors.__name__
    ),
    key=lambda cls: cls.__name__,
)

SAMPLE_ARGUMENTS: dict[str, Any] = {
    "message": "what went wrong and how to fix it",
    "field": "task",
    "kind": "lesson",
    "record_id": "01HZX",
    "provider": "openai",
    "status_code": 429,
    "raw": "<situation>half a reply",
    "budget": 500.0,
    "needed": 612.0,
    "command": "pytest -q",
}


def _example(cls: type[BaseException]) -> BaseException:
    arguments: list[Any] = []
    keywords: dict[str, Any] = {}
    try:
        parameters = list(inspect.signature(cls).parameters.items())
    except ValueError:  # Exception's own constructor: a message
        parameters = list(inspect.signature(lambda message: None).parameters.items())
    for name, parameter in parameters:
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            continue
        if parameter.kind == parameter.KEYWORD_ONLY:
            keywords[name] = SAMPLE_ARGUMENTS[name]
        else:
            arguments.append(SAMPLE_ARGUMENTS.get(name, "what went wrong"))
    return cls(*arguments, **keywords)


def test_every_error_derives_from_the_base() -> None:
    assert len(ERRORS) >= 10
    assert all(issubclass(cls, errors.LessonbankError) for cls in ERRORS)


@pytest.mark.parametrize("cls", ERRORS, ids=lambda cls: cls.__name__)
def test_every_error_round_trips_through_pickle(cls: type[BaseException]) -> None:
    error = _example(cls)
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is cls
    assert str(copy) == str(error)
    assert copy.args == error.args
    assert vars(copy) == vars(error)


def test_every_public_error_is_exported_from_the_package() -> None:
    internal = {"LeaseLostError"}  # between a store's job queue and the worker; lessonbank.errors has it
    exported = {name for name in lessonbank.__all__ if name.endswith("Error")}
    assert exported == {cls.__name__ for cls in ERRORS} - internal
    assert all(getattr(lessonbank, name) is getattr(errors, name) for name in exported)


def test_a_store_raises_the_lease_error_of_errors(tmp_path: Path) -> None:
    """Finishing a job another worker holds is errors.LeaseLostError, the class the worker catches."""
    from lessonbank.models import Job
    from lessonbank.stores import open_store

    store = open_store(f"sqlite:///{tmp_path / 'bank.db'}")
    try:
        job = Job(namespace="default", kind="reflect", episode_id="ep_1", dedupe_key="k")
        store.enqueue_job(job)
        assert store.lease_job("worker-a", None, 60) is not None
        with pytest.raises(errors.LeaseLostError):
            store.fail_job(job.id, "worker-b", error="boom", retry_at=None)
    finally:
        store.close()
