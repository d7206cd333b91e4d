"""What a model's tokens cost at list price: the table shipped in prices.yaml, looked up by model name (a dated
snapshot costs what its base model costs). Local and unknown models are unpriced (None), never guessed."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from importlib import resources

import yaml

from ehrbench.llm.tool_chat import Usage


@dataclass(frozen=True)
class Price:
    """List price in USD per million tokens."""

    input_per_mtok: float
    output_per_mtok: float


@cache
def prices() -> dict[str, Price]:
    """The price table shipped in prices.yaml, by model name."""
    table = yaml.safe_load(resources.files("ehrbench.llm").joinpath("prices.yaml").read_text(encoding="utf-8"))
    return {name: Price(float(row["input"]), float(row["output"])) for name, row in table["models"].items()}


def price_for(model: str) -> Price | None:
    """The price of `model`: its exact name, else the longest known name it starts with followed by "-"
    (a dated snapshot such as gpt-4o-mini-2024-07-18 costs what gpt-4o-mini costs). None: unpriced."""
    name = model.removeprefix("models/")
    table = prices()
    if name in table:
        return table[name]
    prefixes = [known for known in table if name.startswith(known + "-")]
    return table[max(prefixes, key=len)] if prefixes else None


def cost_usd(model: str, usage: Usage) -> float | None:
    """What `usage` cost at list price; None when the model is unpriced (local and unknown models)."""
    price = price_for(model)
    if price is None:
        return None
    return (usage.input_tokens * price.input_per_mtok + usage.output_tokens * price.output_per_mtok) / 1_000_000
