"""Settings, layered: defaults → environment (``LESSONBANK_*``) → constructor arguments.

``LESSONBANK_HOME`` relocates all state (default ``~/.lessonbank``); the default database is
``$LESSONBANK_HOME/lessons.db``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from lessonbank.errors import ConfigError

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


@dataclass(frozen=True)
class Settings:
    """Everything configurable, with its environment variable in the comment."""

    home: Path = field(default_factory=lambda: Path("~/.lessonbank").expanduser())  # LESSONBANK_HOME
    db: str | None = None  # LESSONBANK_DB: a database URL; default sqlite under home
    namespace: str = "default"  # LESSONBANK_NAMESPACE
    llm: str | None = None  # LESSONBANK_LLM: provider:model, e.g. openai:gpt-4o-mini
    reflection_llm: str | None = None  # LESSONBANK_REFLECTION_LLM: default the main llm
    reflexion_enabled: bool = True  # LESSONBANK_REFLEXION_ENABLED: master switch
    on_error: bool = True  # LESSONBANK_REFLEXION_ON_ERROR: reflect on errors and failed checks
    on_hallucination: bool = True  # LESSONBANK_REFLEXION_ON_HALLUCINATION
    on_low_quality: bool = False  # LESSONBANK_REFLEXION_ON_LOW_QUALITY
    persist: bool = True  # LESSONBANK_REFLEXION_PERSIST: false = generate and log, store nothing
    worker: bool = True  # LESSONBANK_WORKER: run reflections in-process (false: a `lessonbank worker`)
    worker_concurrency: int = 4  # LESSONBANK_WORKER_CONCURRENCY
    job_max_attempts: int = 5  # LESSONBANK_JOB_MAX_ATTEMPTS
    job_timeout_s: float = 120.0  # LESSONBANK_JOB_TIMEOUT_S
    backoff_base_s: float = 1.0  # LESSONBANK_BACKOFF_BASE_S
    backoff_max_s: float = 300.0  # LESSONBANK_BACKOFF_MAX_S
    backoff_factor: float = 2.0
    backoff_jitter: float = 0.2
    lease_s: float | None = None  # LESSONBANK_LEASE_S: default job timeout + 30 s
    poll_interval_s: float = 1.0  # LESSONBANK_POLL_INTERVAL_S: how often an idle worker looks for jobs
    # The policy table (see lessonbank.policy): which reflector each situation selects, or "off".
    route_loop: str = "reflexion"  # LESSONBANK_ROUTE_LOOP
    route_goal: str = "insight"  # LESSONBANK_ROUTE_GOAL
    route_important_failure: str = "dual"  # LESSONBANK_ROUTE_IMPORTANT_FAILURE
    route_signal: str = "lesson"  # LESSONBANK_ROUTE_SIGNAL
    route_important_success: str = "dual"  # LESSONBANK_ROUTE_IMPORTANT_SUCCESS
    long_duration_s: float = 60.0  # LESSONBANK_LONG_DURATION_S: longer episodes count as important
    trivial_duration_s: float = 5.0  # LESSONBANK_TRIVIAL_DURATION_S: quicker one-step successes are skipped
    failure_streak: int = 2  # LESSONBANK_FAILURE_STREAK: this many failures of an agent in the window
    failure_window_s: float = 86_400.0  # LESSONBANK_FAILURE_WINDOW_S: "recently", for the streak
    cooldown_s: float = 0.0  # LESSONBANK_COOLDOWN_S: per-agent pause between reflections (0: none)
    max_reflections_per_episode: int = 1  # LESSONBANK_MAX_REFLECTIONS_PER_EPISODE: >1 runs the next rows too
    # Retrieval (see lessonbank.retrieval): an embedder turns on vector and hybrid recall.
    embedder: str | None = None  # LESSONBANK_EMBEDDER: none, hash, minilm, static, openai:MODEL[@URL], auto
    recall_mode: str = (
        "auto"  # LESSONBANK_RECALL_MODE: auto (hybrid with an embedder), lexical, vector, hybrid
    )
    hyde: bool = False  # LESSONBANK_HYDE: a hypothetical answer written by the reflection LLM joins the query
    dedup_cosine: float = (
        0.92  # LESSONBANK_DEDUP_COSINE: a same-kind lesson this close is reinforced, not added
    )
    hybrid_lexical_weight: float | None = (
        None  # LESSONBANK_HYBRID_LEXICAL_WEIGHT: BM25's share in hybrid fusion (default: the embedder's)
    )
    attribution: bool = (
        True  # LESSONBANK_ATTRIBUTION: credit injected lessons with the next episode's outcome
    )

    def __post_init__(self) -> None:
        if self.hybrid_lexical_weight is not None and not 0.0 <= self.hybrid_lexical_weight <= 1.0:
            raise ConfigError(
                "hybrid_lexical_weight (LESSONBANK_HYBRID_LEXICAL_WEIGHT) must be in [0, 1], "
                f"got {self.hybrid_lexical_weight}"
            )
        if not 0.0 < self.dedup_cosine <= 1.0:
            raise ConfigError(
                f"dedup_cosine (LESSONBANK_DEDUP_COSINE) must be in (0, 1], got {self.dedup_cosine}; "
                "1 merges only identical vectors"
            )

    def routes(self) -> dict[str, str]:
        """The policy table: situation → reflector name (or ``off``)."""
        return {
            "loop": self.route_loop,
            "goal": self.route_goal,
            "important_failure": self.route_important_failure,
            "signal": self.route_signal,
            "important_success": self.route_important_success,
        }

    @property
    def lease_seconds(self) -> float:
        return self.lease_s if self.lease_s is not None else self.job_timeout_s + 30.0

    @property
    def db_url(self) -> str:
        return self.db or f"sqlite:///{self.home / 'lessons.db'}"

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
        """Defaults, then ``LESSONBANK_*`` variables, then ``overrides`` (``None`` values ignored)."""
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for f in fields(cls):
            for name in _env_names(f.name):
                if name in env:
                    values[f.name] = _parse(name, env[name], f.type)
                    break
        settings = cls(**values)
        return settings.with_overrides(**overrides)

    def with_overrides(self, **overrides: Any) -> Settings:
        known = {f.name for f in fields(self)}
        unknown = set(overrides) - known
        if unknown:
            raise ConfigError(f"unknown setting(s): {', '.join(sorted(unknown))}")
        updates = {key: value for key, value in overrides.items() if value is not None}
        if "home" in updates:
            updates["home"] = Path(updates["home"]).expanduser()
        return replace(self, **updates)


_ALIASES = {
    "reflexion_enabled": "LESSONBANK_REFLEXION_ENABLED",
    "on_error": "LESSONBANK_REFLEXION_ON_ERROR",
    "on_hallucination": "LESSONBANK_REFLEXION_ON_HALLUCINATION",
    "on_low_quality": "LESSONBANK_REFLEXION_ON_LOW_QUALITY",
    "persist": "LESSONBANK_REFLEXION_PERSIST",
}


def _env_names(name: str) -> list[str]:
    return [_ALIASES[name]] if name in _ALIASES else [f"LESSONBANK_{name.upper()}"]


def _parse(name: str, raw: str, annotation: Any) -> Any:
    kind = str(annotation)
    text = raw.strip()
    if kind == "bool":
        if text.lower() in _TRUE:
            return True
        if text.lower() in _FALSE:
            return False
        raise ConfigError(f"{name}={raw!r} is not a boolean; use true or false")
    if kind in ("int", "float", "float | None"):
        if kind == "float | None" and not text:
            return None
        try:
            return int(text) if kind == "int" else float(text)
        except ValueError:
            raise ConfigError(f"{name}={raw!r} is not a number") from None
    if kind == "Path":
        return Path(text).expanduser()
    return text or None if "None" in kind else text
