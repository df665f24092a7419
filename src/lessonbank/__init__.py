"""lessonbank: agents report episodes, lessonbank reflects, stores lessons and serves them back.

from lessonbank import LessonBank, Episode
bank = LessonBank()
bank.record(Episode(task="...", status="failure", error="..."))
block = bank.context("the next similar task", budget_tokens=800)
"""

from lessonbank.bank import AsyncLessonBank, LessonBank
from lessonbank.errors import (
    BudgetExceededError,
    ConfigError,
    EvaluatorError,
    InputError,
    LessonbankError,
    LLMError,
    LLMTransientError,
    NotFoundError,
    OnnxBuildError,
    ParseError,
    StoreError,
)
from lessonbank.models import (
    ContextBlock,
    Decision,
    Episode,
    Hit,
    Job,
    Lesson,
    Reflection,
    VerificationResult,
)
from lessonbank.settings import Settings

__all__ = [
    "AsyncLessonBank",
    "BudgetExceededError",
    "ConfigError",
    "ContextBlock",
    "Decision",
    "Episode",
    "EvaluatorError",
    "Hit",
    "InputError",
    "Job",
    "LLMError",
    "LLMTransientError",
    "Lesson",
    "LessonBank",
    "LessonbankError",
    "NotFoundError",
    "OnnxBuildError",
    "ParseError",
    "Reflection",
    "Settings",
    "StoreError",
    "VerificationResult",
]

__version__ = "0.1.0"
