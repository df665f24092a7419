"""Settings, layered: defaults → environment (``LESSONBANK_*``) → constructor arguments.

``LESSONBANK_HOME`` relocates all state (default ``~/.lessonbank``); the default database is
``$LESSONBANK_HOME/lessons.db``. ``Settings(...)`` takes only the defaults and what it is
given; ``Settings.from_env()`` reads the environment first. Every mistake is a ``ConfigError``
that names the setting (and its environment variable) and says what it accepts.

Folders lessonbank creates for its state are private to the user (0700, see
:func:`make_private_folder`): they hold lessons and keys.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Annotated, Any

from pydantic import (
    AliasChoices,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    model_validator,
)

from lessonbank.errors import ConfigError
from lessonbank.models import namespace_problem

_PREFIX = "LESSONBANK_"
# What is read of one provider reply. A reflection asks for a few hundred tokens (consolidation for
# at most 8,000): a megabyte is far past any honest reply, so more is a runaway model or a broken server.
DEFAULT_LLM_MAX_REPLY_BYTES = 1024 * 1024
PRIVATE_FOLDER_MODE = 0o700
# The least input budget of a consolidation cycle: what its five phases' prompts need, cut to the
# bone, with every phase before spending its whole share (services.consolidation.phases.least_tokens_in).
CONSOLIDATION_MIN_TOKENS_IN = 5_000
MAX_IMPORT_WORKERS = 64  # preparing processes per import, at most (a process runs no more than its cores)
_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off", ""})


def _switch(value: Any) -> Any:
    """true / yes / on / 1 and false / no / off / 0 / empty, in any case; anything else is refused."""
    if isinstance(value, str):
        word = value.strip().lower()
        if word in _TRUE:
            return True
        if word in _FALSE:
            return False
        raise ValueError("not a boolean")
    return value


def _blank_is_none(value: Any) -> Any:
    return None if isinstance(value, str) and not value.strip() else value


def _expand_home(value: Any) -> Any:
    return Path(value).expanduser() if isinstance(value, str | Path) else value


Switch = Annotated[bool, BeforeValidator(_switch)]
OptionalText = Annotated[str | None, BeforeValidator(_blank_is_none)]
OptionalFloat = Annotated[float | None, BeforeValidator(_blank_is_none)]
OptionalInt = Annotated[int | None, BeforeValidator(_blank_is_none)]
HomeDir = Annotated[Path, BeforeValidator(_expand_home)]


def _reflexion(variable: str) -> Any:
    """A switch read from ``LESSONBANK_REFLEXION_*`` (seed 004's names) rather than its own name."""
    return Field(default=True, validation_alias=AliasChoices(variable))


COUNT_FIELDS = (
    "consolidation_threshold",
    "consolidation_inactivity_h",
    "consolidation_daily_tokens",
    "consolidation_breaker",
)
RETENTION_FIELDS = ("episode_retention_days", "reflection_retention_days", "done_job_retention_days")


class Settings(BaseModel):
    """Everything configurable, with its environment variable in the comment.

    A plain pydantic model read from the environment by :meth:`from_env` (pydantic-settings' own
    sources are not needed for one flat set of ``LESSONBANK_*`` variables, and importing them cost
    every new process ~35 ms of CPU): names are matched without regard to case, an alias first, and defaults are
    validated, as ``BaseSettings`` did."""

    model_config = ConfigDict(
        frozen=True, extra="forbid", validate_by_name=True, validate_by_alias=True, validate_default=True
    )

    home: HomeDir = Field(default_factory=lambda: Path("~/.lessonbank").expanduser())  # LESSONBANK_HOME
    db: OptionalText = None  # LESSONBANK_DB: a database URL; default sqlite under home
    namespace: str = "default"  # LESSONBANK_NAMESPACE
    llm: OptionalText = None  # LESSONBANK_LLM: provider:model, e.g. openai:gpt-4o-mini
    reflection_llm: OptionalText = None  # LESSONBANK_REFLECTION_LLM: default the main llm
    reflexion_enabled: Switch = _reflexion("LESSONBANK_REFLEXION_ENABLED")  # master switch
    on_error: Switch = _reflexion("LESSONBANK_REFLEXION_ON_ERROR")  # errors and failed checks
    on_hallucination: Switch = _reflexion("LESSONBANK_REFLEXION_ON_HALLUCINATION")
    on_low_quality: Switch = Field(
        default=False, validation_alias=AliasChoices("LESSONBANK_REFLEXION_ON_LOW_QUALITY")
    )
    # LESSONBANK_REFLEXION_PERSIST: false = generate and log, store nothing
    persist: Switch = _reflexion("LESSONBANK_REFLEXION_PERSIST")
    worker: Switch = True  # LESSONBANK_WORKER: run reflections in-process (false: a `lessonbank worker`)
    worker_concurrency: int = 4  # LESSONBANK_WORKER_CONCURRENCY
    job_max_attempts: int = 5  # LESSONBANK_JOB_MAX_ATTEMPTS
    job_timeout_s: float = 120.0  # LESSONBANK_JOB_TIMEOUT_S
    backoff_base_s: float = 1.0  # LESSONBANK_BACKOFF_BASE_S
    backoff_max_s: float = 300.0  # LESSONBANK_BACKOFF_MAX_S
    backoff_factor: float = 2.0  # LESSONBANK_BACKOFF_FACTOR
    backoff_jitter: float = 0.2  # LESSONBANK_BACKOFF_JITTER
    lease_s: OptionalFloat = None  # LESSONBANK_LEASE_S: default job timeout + 30 s
    poll_interval_s: float = 1.0  # LESSONBANK_POLL_INTERVAL_S: how often an idle worker looks for jobs
    # LESSONBANK_IMPORT_WORKERS: processes preparing an import of 3,001 records or more while this one
    # writes (0: none; default 2 on two cores or more); a process runs at most as many as it has cores
    import_workers: OptionalInt = None
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
    embedder: OptionalText = None  # LESSONBANK_EMBEDDER: none, hash, minilm, static, openai:MODEL[@URL], auto
    recall_mode: str = (
        "auto"  # LESSONBANK_RECALL_MODE: auto (hybrid with an embedder), lexical, vector, hybrid
    )
    hyde: Switch = (
        False  # LESSONBANK_HYDE: a hypothetical answer written by the reflection LLM joins the query
    )
    dedup_cosine: float = (
        0.92  # LESSONBANK_DEDUP_COSINE: a same-kind lesson this close is reinforced, not added
    )
    # LESSONBANK_CONSOLIDATION_COSINE: with an embedder, the cosine from which the consolidation pre-pass
    # joins two lessons its guards let through once its pair scorer gives them at least its ``member``
    # probability (below it the scorer's ``join`` decides; bench/consolidation_pairs.py)
    consolidation_cosine: float = 0.92
    # LESSONBANK_HYBRID_LEXICAL_WEIGHT: BM25's share in hybrid fusion (default: the embedder's)
    hybrid_lexical_weight: OptionalFloat = None
    # LESSONBANK_VECTOR_FLOOR: cosine below which a lesson no query word matched is not recalled
    # (default: the embedder's, measured on bench/retrieval.py; 0 for an embedder that declares none)
    vector_floor: OptionalFloat = None
    attribution: Switch = (
        True  # LESSONBANK_ATTRIBUTION: credit injected lessons with the next episode's outcome
    )
    # LESSONBANK_LEARN_FROM_USE: a successful task joins the provenance of the lessons injected for it
    learn_from_use: Switch = True
    llm_max_reply_bytes: int = DEFAULT_LLM_MAX_REPLY_BYTES  # LESSONBANK_LLM_MAX_REPLY_BYTES
    # Retention, applied by `lessonbank purge` / bank.services.retention (see lessonbank.services.retention).
    # Days after which records are deleted; empty or 0 keeps them forever (the default: keeping is safe).
    episode_retention_days: OptionalFloat = None  # LESSONBANK_EPISODE_RETENTION_DAYS
    reflection_retention_days: OptionalFloat = None  # LESSONBANK_REFLECTION_RETENTION_DAYS
    done_job_retention_days: OptionalFloat = None  # LESSONBANK_DONE_JOB_RETENTION_DAYS
    # Consolidation (seed 002, seed 000's dream mode; see lessonbank.services.consolidation).
    # Automatic triggers are checked by `lessonbank worker`; 0 or empty turns one off.
    consolidation_schedule: OptionalText = None  # LESSONBANK_CONSOLIDATION_SCHEDULE: cron, e.g. "0 3 * * *"
    consolidation_threshold: int = 50  # LESSONBANK_CONSOLIDATION_THRESHOLD: new episodes since the last cycle
    consolidation_inactivity_h: float = (
        2.0  # LESSONBANK_CONSOLIDATION_INACTIVITY_H: dream mode after this idle time
    )
    # Budgets of one cycle (seed 002: ~30,000 tokens in, 8,000 out), counted and never exceeded.
    consolidation_max_tokens_in: int = 30_000  # LESSONBANK_CONSOLIDATION_MAX_TOKENS_IN
    consolidation_max_tokens_out: int = 8_000  # LESSONBANK_CONSOLIDATION_MAX_TOKENS_OUT
    consolidation_max_cost_usd: OptionalFloat = None  # LESSONBANK_CONSOLIDATION_MAX_COST_USD: per cycle
    # Per namespace and UTC day, over every cycle: a cycle that would pass them does not start.
    consolidation_daily_tokens: int = 200_000  # LESSONBANK_CONSOLIDATION_DAILY_TOKENS: in + out
    consolidation_daily_cost_usd: OptionalFloat = None  # LESSONBANK_CONSOLIDATION_DAILY_COST_USD
    # Automatic cycles stop after this many failed or empty ones in a row (a manual cycle resets it).
    consolidation_breaker: int = 3  # LESSONBANK_CONSOLIDATION_BREAKER
    # Agents whose lessons arrive quarantined, for the next cycle to review: comma-separated names.
    untrusted_agents: OptionalText = None  # LESSONBANK_UNTRUSTED_AGENTS
    # A git repository the namespace is mirrored into as Markdown after every applied change.
    mirror_dir: OptionalText = None  # LESSONBANK_MIRROR_DIR

    def __init__(self, **values: Any) -> None:
        try:
            super().__init__(**_by_field(values))
        except ValidationError as error:
            raise _config_error(error, values) from None

    @model_validator(mode="after")
    def _check_ranges(self) -> Settings:
        problem = namespace_problem(self.namespace)
        if problem is not None:
            raise ConfigError(f"namespace (LESSONBANK_NAMESPACE) {repr(self.namespace)[:80]} {problem}")
        if self.hybrid_lexical_weight is not None and not 0.0 <= self.hybrid_lexical_weight <= 1.0:
            raise ConfigError(
                "hybrid_lexical_weight (LESSONBANK_HYBRID_LEXICAL_WEIGHT) must be in [0, 1], "
                f"got {self.hybrid_lexical_weight}"
            )
        if self.vector_floor is not None and not -1.0 <= self.vector_floor <= 1.0:
            raise ConfigError(
                f"vector_floor (LESSONBANK_VECTOR_FLOOR) must be a cosine in [-1, 1], got {self.vector_floor}"
            )
        if self.llm_max_reply_bytes < 1:
            raise ConfigError(
                f"llm_max_reply_bytes (LESSONBANK_LLM_MAX_REPLY_BYTES) must be 1 or more, got {self.llm_max_reply_bytes}"
            )
        for name in RETENTION_FIELDS:
            days = getattr(self, name)
            if days is not None and not 0.0 <= days < float("inf"):
                raise ConfigError(
                    f"{name} ({env_variable(name)}) must be a number of days ≥ 0 (0 or empty: keep forever), "
                    f"got {days}"
                )
        for name in COUNT_FIELDS:
            if getattr(self, name) < 0:
                raise ConfigError(
                    f"{name} ({env_variable(name)}) must be 0 or more, got {getattr(self, name)}"
                )
        if self.import_workers is not None and not 0 <= self.import_workers <= MAX_IMPORT_WORKERS:
            raise ConfigError(
                f"import_workers (LESSONBANK_IMPORT_WORKERS) must be 0 to {MAX_IMPORT_WORKERS} "
                f"(0: prepare in the importing process), got {self.import_workers}"
            )
        for name in ("consolidation_max_cost_usd", "consolidation_daily_cost_usd"):
            cost = getattr(self, name)
            if cost is not None and not 0.0 <= cost < float("inf"):
                raise ConfigError(
                    f"{name} ({env_variable(name)}) must be a number of dollars ≥ 0, got {cost}"
                )
        if (
            self.consolidation_max_tokens_in < CONSOLIDATION_MIN_TOKENS_IN
            or self.consolidation_max_tokens_out < 500
        ):
            raise ConfigError(
                f"a consolidation cycle needs at least {CONSOLIDATION_MIN_TOKENS_IN:,} input and 500 output tokens "
                "(LESSONBANK_CONSOLIDATION_MAX_TOKENS_IN / _OUT), got "
                f"{self.consolidation_max_tokens_in} and {self.consolidation_max_tokens_out}"
            )
        if not 0.0 < self.dedup_cosine <= 1.0:
            raise ConfigError(
                f"dedup_cosine (LESSONBANK_DEDUP_COSINE) must be in (0, 1], got {self.dedup_cosine}; "
                "1 merges only identical vectors"
            )
        if not 0.0 < self.consolidation_cosine <= 1.0:
            raise ConfigError(
                "consolidation_cosine (LESSONBANK_CONSOLIDATION_COSINE) must be in (0, 1], got "
                f"{self.consolidation_cosine}; 1 clusters only identical vectors"
            )
        return self

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
    def untrusted(self) -> frozenset[str]:
        """The agents named in ``untrusted_agents``."""
        names = (self.untrusted_agents or "").split(",")
        return frozenset(name.strip() for name in names if name.strip())

    @property
    def lease_seconds(self) -> float:
        return self.lease_s if self.lease_s is not None else self.job_timeout_s + 30.0

    @property
    def db_url(self) -> str:
        return self.db or f"sqlite:///{self.home / 'lessons.db'}"

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
        """Defaults, then ``LESSONBANK_*`` variables, then ``overrides`` (``None`` values ignored)."""
        values = _environment(os.environ if environ is None else environ)
        return cls(**values).with_overrides(**overrides)

    def with_overrides(self, **overrides: Any) -> Settings:
        unknown = set(overrides) - set(type(self).model_fields)
        if unknown:
            raise ConfigError(f"unknown setting(s): {', '.join(sorted(unknown))}")
        updates = {key: value for key, value in overrides.items() if value is not None}
        return type(self)(**{**self.model_dump(), **updates})


@cache
def _input_names() -> list[tuple[str, tuple[str, ...]]]:
    """Per field: the key its value is validated under (its first alias, else its name) and the
    names, lower-cased, that set it (its aliases, then its name)."""
    names = []
    for name, info in Settings.model_fields.items():
        alias = info.validation_alias
        aliases = [alias] if isinstance(alias, str) else []
        if isinstance(alias, AliasChoices):
            aliases = [choice for choice in alias.choices if isinstance(choice, str)]
        matched = [alias.lower() for alias in aliases]
        names.append((aliases[0] if aliases else name, tuple(dict.fromkeys([*matched, name.lower()]))))
    return names


def _by_field(values: Mapping[str, Any]) -> dict[str, Any]:
    """Constructor arguments keyed for validation: a name matches a field's alias or its name in any
    case (the first match wins, the others go); a name that matches no field stays, and is refused."""
    given: dict[str, list[str]] = {}
    for key in values:
        given.setdefault(key.lower(), []).append(key)
    left, keyed = set(values), {}
    for key, names in _input_names():
        matched = [original for name in names for original in given.get(name, ()) if original in left]
        if matched:
            left.difference_update(matched)
            keyed[key] = values[matched[0]]
    keyed.update((key, value) for key, value in values.items() if key in left)
    return keyed


def _environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The settings ``environ`` sets, each value stripped, keyed as :func:`_by_field` keys them: a
    field is set by its own variable (its alias, e.g. ``LESSONBANK_REFLEXION_ON_ERROR``) or else by
    ``LESSONBANK_<FIELD>``, spelled in capitals."""
    variables = {
        name.lower(): value.strip()
        for name, value in environ.items()
        if name.startswith(_PREFIX) and name == name.upper()
    }
    values = {}
    for key, names in _input_names():
        field = names[-1]
        found = next((name for name in (*names[:-1], f"{_PREFIX}{field}".lower()) if name in variables), None)
        if found is not None:
            values[key] = variables[found]
    return values


def make_private_folder(path: Path) -> Path:
    """Create the folder ``path`` and every missing parent private to this user (0700): the home
    and a bank's folder hold lessons and keys, which other local users must not list or read.
    A folder that already exists keeps its mode (it is the user's choice)."""
    missing: list[Path] = []
    folder = path
    while not folder.exists() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    for folder in reversed(missing):
        # Made meanwhile by another process: its mode is that process's choice.
        with contextlib.suppress(FileExistsError):
            folder.mkdir(mode=PRIVATE_FOLDER_MODE)
    if not path.is_dir():
        raise NotADirectoryError(errno.ENOTDIR, "a file is in the way of the folder", str(path))
    return path


def env_variable(field: str) -> str:
    """The environment variable that sets ``field``."""
    alias = Settings.model_fields[field].validation_alias
    if isinstance(alias, AliasChoices):
        return str(alias.choices[0])
    return f"{_PREFIX}{field.upper()}"


def _config_error(error: ValidationError, values: Mapping[str, Any]) -> ConfigError:
    """The first problem of ``error`` as a ConfigError naming the variable, as the user wrote it."""
    problem = error.errors()[0]
    location = str(problem["loc"][0]) if problem["loc"] else ""
    if location.startswith(_PREFIX.lower()):
        location = location.upper()
    if problem["type"] == "extra_forbidden":
        return ConfigError(f"unknown setting(s): {location}")
    field = next(
        (name for name in Settings.model_fields if location in (name, env_variable(name))),
        location,
    )
    variable = env_variable(field) if field in Settings.model_fields else location
    raw = values.get(location, problem.get("input"))
    kind = problem["type"]
    if kind == "value_error" or kind.startswith("bool"):
        what = "is not a boolean; use true or false"
    elif kind.startswith(("int", "float")):
        what = "is not a number"
    else:
        what = f"is not valid: {problem['msg']}"
    return ConfigError(f"{variable}={raw!r} {what}")
