"""What a model call costs: a per-model price table the user can extend.

Prices are US dollars per million tokens, input and output. The built-in table holds a few
common reflection models as published by their providers; prices change, so override or
extend it with :func:`register_price`, or with ``LESSONBANK_PRICES`` (a JSON object
``{"provider:model": [input, output], ...}`` or the path of a file holding one). Local
models (``ollama:``) and the scripted ``fake:`` model cost nothing. A model missing from the
table gets no cost (``None``), never a guess.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from lessonbank.errors import ConfigError
from lessonbank.llm.base import Usage


@dataclass(frozen=True)
class Price:
    input_per_mtok: float
    output_per_mtok: float

    def cost(self, usage: Usage) -> float:
        return (usage.input_tokens * self.input_per_mtok + usage.output_tokens * self.output_per_mtok) / 1e6


_PRICES: dict[str, Price] = {
    "openai:gpt-4o-mini": Price(0.15, 0.60),
    "openai:gpt-4o": Price(2.50, 10.00),
    "openai:gpt-4.1-nano": Price(0.10, 0.40),
    "openai:gpt-4.1-mini": Price(0.40, 1.60),
    "openai:gpt-4.1": Price(2.00, 8.00),
    "anthropic:claude-haiku-4-5": Price(1.00, 5.00),
    "anthropic:claude-sonnet-4-5": Price(3.00, 15.00),
}
_FREE_PROVIDERS = ("ollama", "fake")
_env_loaded: str | None = None


def register_price(model: str, input_per_mtok: float, output_per_mtok: float) -> None:
    """Set the price of ``provider:model`` (dollars per million input and output tokens)."""
    if ":" not in model:
        raise ConfigError(f"price key {model!r} must be 'provider:model', e.g. 'openai:gpt-4o-mini'")
    if input_per_mtok < 0 or output_per_mtok < 0:
        raise ConfigError(f"price of {model!r} must not be negative")
    _PRICES[model] = Price(float(input_per_mtok), float(output_per_mtok))


def price_of(model: str) -> Price | None:
    _load_env_prices()
    if model in _PRICES:
        return _PRICES[model]
    if model.split(":", 1)[0] in _FREE_PROVIDERS:
        return Price(0.0, 0.0)
    return None


def cost_of(model: str, usage: Usage) -> float | None:
    """Dollars for ``usage`` on ``model``, or None when the model's price is unknown."""
    price = price_of(model)
    return None if price is None else price.cost(usage)


def _load_env_prices() -> None:
    global _env_loaded
    raw = os.environ.get("LESSONBANK_PRICES", "").strip()
    if raw == (_env_loaded or ""):
        return
    _env_loaded = raw
    if not raw:
        return
    text = raw if raw.startswith("{") else _read(raw)
    try:
        table = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"LESSONBANK_PRICES is not JSON: {exc}") from None
    if not isinstance(table, dict):
        raise ConfigError("LESSONBANK_PRICES must be a JSON object of 'provider:model': [input, output]")
    for model, pair in table.items():
        if not (isinstance(pair, list) and len(pair) == 2 and all(isinstance(x, int | float) for x in pair)):
            raise ConfigError(
                f"LESSONBANK_PRICES[{model!r}] must be [input, output] dollars per million tokens"
            )
        register_price(model, pair[0], pair[1])


def _read(path: str) -> str:
    try:
        return Path(path).expanduser().read_text("utf-8")
    except OSError as exc:
        raise ConfigError(f"LESSONBANK_PRICES names a file that cannot be read: {exc}") from None
