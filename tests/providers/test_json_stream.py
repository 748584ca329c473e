"""Partial JSON of whole texts (pi-ai's parseStreamingJson), repairs, and the strict final parse."""

from __future__ import annotations

import json

import pytest

from agentloop.providers import parse_streaming_json
from agentloop.providers._json_stream import ToolArguments, parse_final_arguments, repair_json


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", {}),
        ("   ", {}),
        ("{", {}),
        ('{"location": "San Fra', {"location": "San Fra"}),
        ('{"a":1,"b":[1,2', {"a": 1, "b": [1, 2]}),
        # An unfinished literal shows its value and an exponent without digits its mantissa, as in
        # pi-ai's streaming parser (these used to be dropped); the values below are pi-ai 1.6.0's.
        ('{"a": tr', {"a": True}),
        ('{"a": 1, "b": tr', {"a": 1, "b": True}),
        ('{"deep":[tr', {"deep": [True]}),
        ('{"a":nul', {"a": None}),
        ('{"a":n', {"a": None}),
        ('{"a":f', {"a": False}),
        ('{"a":[1,tr', {"a": [1, True]}),
        ('{"a":"x","b":fals', {"a": "x", "b": False}),
        ('{"a":{"b":tr', {"a": {"b": True}}),
        ('{"a":1e', {"a": 1}),
        ('{"a":1.5e+', {"a": 1.5}),
        ('{"a":1.', {}),
        ('{"a":-', {}),
        ('{"a": tru ', {}),
        ('{"a":trux', {}),
        ('{"a":"x tr', {"a": "x tr"}),
        ('{"a":"q\\"","b":nu', {"a": 'q"', "b": None}),
        ('{"a":"q\\" nul', {"a": 'q" nul'}),
        ('{"a": "x", "b"', {"a": "x"}),
        ('{"unit": celsius}', {}),
        ('{"a": 1, "unit": celsius}', {"a": 1}),
        ("[1, 2]", {}),
        ('"text"', {}),
        ('{"path": "C:\\Users\\me"}', {"path": "C:\\Users\\me"}),
        ('{"text": "line one\nline two"}', {"text": "line one\nline two"}),
        ('{"nested": {"deep": [{"x": "y', {"nested": {"deep": [{"x": "y"}]}}),
    ],
)
def test_partial_parse(text: str, expected: dict[str, object]) -> None:
    assert parse_streaming_json(text) == expected


def test_every_prefix_of_a_document_parses_to_a_dict() -> None:
    document = json.dumps(
        {"query": 'weather in "Paris" \u00e9 \U0001f600', "n": [1, 2.5, -3], "ok": True, "none": None}
    )
    for end in range(len(document) + 1):
        assert isinstance(parse_streaming_json(document[:end]), dict)
    assert parse_streaming_json(document) == json.loads(document)


def test_repair_escapes_raw_control_characters_and_bad_escapes() -> None:
    assert repair_json('{"a": "x\ty"}') == '{"a": "x\\ty"}'
    assert repair_json('{"a": "\\q"}') == '{"a": "\\\\q"}'
    assert repair_json('{"a": "\\u00e9 \\n"}') == '{"a": "\\u00e9 \\n"}'
    assert repair_json('{"a": "end\\') == '{"a": "end\\\\'
    plain = '{"a": 1}'
    assert repair_json(plain) is plain


@pytest.mark.parametrize(
    ("text", "arguments", "error"),
    [
        ("", {}, None),
        ('{"a": 1}', {"a": 1}, None),
        ('{"a": "x\ny"}', {"a": "x\ny"}, None),
        ('{"unit": celsius}', {}, "the arguments are not valid JSON"),
        ('{"a": 1', {}, "the arguments are not valid JSON"),
        ("[1]", {}, "the arguments must be a JSON object, got list"),
        ("null", {}, "the arguments must be a JSON object, got NoneType"),
    ],
)
def test_final_parse(text: str, arguments: dict[str, object], error: str | None) -> None:
    got, message = parse_final_arguments(text)
    assert got == arguments
    if error is None:
        assert message is None
    else:
        assert message is not None and message.startswith(error)
        assert repr(text[:50])[:-1] in message


def test_tool_arguments_replace_continues_the_text_or_starts_again() -> None:
    args = ToolArguments()
    args.append('{"a": 1')
    assert args.replace('{"a": 12}') == {"a": 12} and args.text == '{"a": 12}'
    assert args.replace('{"b": 2}') == {"b": 2} and args.text == '{"b": 2}'
    assert args.append("") == {"b": 2}
    assert args.final() == ({"b": 2}, None)
