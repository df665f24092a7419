"""Errors raised by lessonbank.

Every error the library raises on purpose derives from :class:`LessonbankError` and says
how to fix the problem::

    LessonbankError
    ├── ConfigError          the caller's setup is wrong (unknown URL scheme, missing extra, bad env var)
    │   └── OnnxBuildError       onnxruntime is installed but cannot build or load the MiniLM graph
    ├── InputError           a value passed in is invalid (also a ValueError): empty task, 2 MB field, bad UTF-8
    ├── NotFoundError        no record with that id (also a LookupError)
    ├── ConflictError        what a proposal was made from changed since (also a ValueError): not applied
    ├── StoreError           the database failed or is in an unexpected state
    ├── LLMError             the model provider failed
    │   ├── LLMTransientError    429, 5xx, timeouts, dropped connections: worth retrying
    │   └── LLMReplyTooLargeError  the reply was over the read cap (LESSONBANK_LLM_MAX_REPLY_BYTES)
    ├── ParseError           model output could not be parsed (carries the raw text)
    ├── BudgetExceededError  a token or cost budget would be exceeded
    ├── CycleFailedError     a consolidation cycle failed for good (its job was dead-lettered)
    ├── EvaluatorError       a loop's verification could not run at all (tool missing, bad directory)
    └── LeaseLostError       a job's lease expired and another worker took it

Every error pickles and unpickles with its fields (worker processes and test runners send them
across processes), whatever its constructor's signature.
"""

from __future__ import annotations

from typing import Any


class LessonbankError(Exception):
    """Base class of every error lessonbank raises on purpose."""

    def __reduce__(self) -> tuple[Any, ...]:
        # The default rebuilds an error by calling its class with ``args`` (the message alone),
        # which fails for constructors that take keyword-only or extra fields.
        return _rebuild, (type(self), self.args), self.__dict__


def _rebuild(cls: type[LessonbankError], args: tuple[Any, ...]) -> LessonbankError:
    return cls.__new__(cls, *args)


class ConfigError(LessonbankError):
    """The caller's configuration is wrong; the message says what to change."""


class OnnxBuildError(ConfigError):
    """onnxruntime is installed but could not build or load the graph (too old a version, a broken
    install). ``MiniLMEmbedder(backend="auto")`` falls back to NumPy on it; ``"onnx"`` raises it."""


class InputError(LessonbankError, ValueError):
    """A value passed to lessonbank is invalid; ``field`` names the culprit when known."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class NotFoundError(LessonbankError, LookupError):
    """No record with the given id exists in this namespace."""

    def __init__(self, kind: str, record_id: str) -> None:
        super().__init__(f"no {kind} with id {record_id!r}")
        self.kind = kind
        self.record_id = record_id


class ConflictError(LessonbankError, ValueError):
    """A stored record changed after a decision was prepared from it (a lesson edited since a
    consolidation proposal was made): nothing was applied. ``record_id`` names it."""

    def __init__(self, message: str, *, record_id: str | None = None) -> None:
        super().__init__(message)
        self.record_id = record_id


class StoreError(LessonbankError):
    """The store failed (locked, corrupted, unreachable) or holds something unexpected."""


class LLMError(LessonbankError):
    """The LLM provider failed in a way retrying will not fix (bad key, unknown model, 400)."""

    def __init__(self, message: str, *, provider: str = "", status_code: int | None = None) -> None:
        super().__init__(message)
        self.provider = provider
        self.status_code = status_code


class LLMTransientError(LLMError):
    """The provider failed in a way that may pass: rate limit, server error, timeout, dropped connection."""


class LLMReplyTooLargeError(LLMError):
    """The provider's reply was over the read cap (the message says how many bytes); reading stopped there.

    Permanent, not transient: a model that ran away once will likely do it again for the same
    prompt, and retrying would spend another oversized reply's tokens."""


class ParseError(LessonbankError):
    """Model output did not match the expected format; ``raw`` keeps what the model said."""

    def __init__(self, message: str, *, raw: str = "") -> None:
        super().__init__(message)
        self.raw = raw


class BudgetExceededError(LessonbankError):
    """A token or cost budget would be exceeded."""

    def __init__(self, message: str, *, budget: float, needed: float) -> None:
        super().__init__(message)
        self.budget = budget
        self.needed = needed


class CycleFailedError(LessonbankError):
    """A consolidation cycle failed and will not be retried: its job (``record_id``) was dead-lettered;
    the message carries its last error, and the dream log its failed row."""

    def __init__(self, message: str, *, record_id: str | None = None) -> None:
        super().__init__(message)
        self.record_id = record_id


class EvaluatorError(LessonbankError):
    """A loop's evaluator could not run its check (as opposed to a check that ran and failed)."""

    def __init__(self, message: str, *, command: str = "") -> None:
        super().__init__(message)
        self.command = command


class LeaseLostError(LessonbankError):
    """The job's lease expired and another worker took it; this worker's result is dropped."""
