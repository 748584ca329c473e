"""Token counts and what they cost."""

from __future__ import annotations

from .._types._messages import Cost, Model, Usage

__all__ = ("calculate_cost", "make_usage")


def calculate_cost(model: Model, usage: Usage) -> Usage:
    """`usage` with its cost in dollars, from the model's prices per million tokens."""
    prices = model.cost
    cost_input = prices.input * usage.input / 1e6
    cost_output = prices.output * usage.output / 1e6
    cost_read = prices.cache_read * usage.cache_read / 1e6
    cost_write = prices.cache_write * usage.cache_write / 1e6
    return Usage(
        input=usage.input,
        output=usage.output,
        cache_read=usage.cache_read,
        cache_write=usage.cache_write,
        total_tokens=usage.total_tokens,
        cost=Cost(
            input=cost_input,
            output=cost_output,
            cache_read=cost_read,
            cache_write=cost_write,
            total=cost_input + cost_output + cost_read + cost_write,
        ),
    )


def make_usage(
    model: Model, *, input: int, output: int, cache_read: int = 0, cache_write: int = 0, total: int | None = None
) -> Usage:
    """A `Usage` with its cost; `total` defaults to the sum of the four counts."""
    if total is None:
        total = input + output + cache_read + cache_write
    return calculate_cost(
        model,
        Usage(input=input, output=output, cache_read=cache_read, cache_write=cache_write, total_tokens=total),
    )
