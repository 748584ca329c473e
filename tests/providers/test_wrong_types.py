"""A wrong type given to a provider function is a TypeError naming the parameter and what was
expected, not an AttributeError from deep inside."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from agentloop.providers import (
    AssistantMessageEventStream,
    local_model,
    openai_compatible_model,
    parse_streaming_json,
)

NONE: Any = None  # typed Any: the point is the wrong type at run time
ONE: Any = 1
EMPTY: Any = []

CALLS: dict[str, tuple[Callable[[], Any], str]] = {
    "parse_streaming_json(1)": (lambda: parse_streaming_json(ONE), r"^text must be a str .*got int$"),
    "parse_streaming_json(None)": (lambda: parse_streaming_json(NONE), r"^text must be a str .*got NoneType$"),
    "openai_compatible_model(base_url=None)": (
        lambda: openai_compatible_model("m", base_url=NONE),
        r"^base_url must be a str \(the API root, usually ending in /v1\), got NoneType$",
    ),
    "openai_compatible_model(None, url)": (
        lambda: openai_compatible_model(NONE, "http://127.0.0.1:8080/v1"),
        r"^model_id must be a str, got NoneType$",
    ),
    "local_model(None)": (
        lambda: local_model(NONE),
        r"^url must be a str \(the llama.cpp server root\), got NoneType$",
    ),
    "AssistantMessageEventStream(None)": (
        lambda: AssistantMessageEventStream(NONE),
        r"^events must be an async generator of AssistantMessageEvent, got NoneType$",
    ),
    "AssistantMessageEventStream([])": (
        lambda: AssistantMessageEventStream(EMPTY),
        r"^events must be an async generator of AssistantMessageEvent, got list$",
    ),
}


@pytest.mark.parametrize("call", sorted(CALLS))
def test_a_wrong_type_is_a_type_error_naming_the_parameter(call: str) -> None:
    fn, message = CALLS[call]
    with pytest.raises(TypeError, match=message):
        fn()
