"""`--approve`: the CLI asks before each tool call runs; y runs it, n or another answer does not."""

from __future__ import annotations

import pytest

import agentloop as al
from agentloop.cli._approve import answer_of
from agentloop.testing import Response, ScriptedModel, ScriptedToolCall

from .support import text
from .test_cli import cli, use_model


def calculator_script() -> ScriptedModel:
    return ScriptedModel(
        [Response(content=[ScriptedToolCall("c1", "calculator", {"expression": "17*23"})]), "It is 391."]
    )


def tool_result(model: ScriptedModel) -> al.ToolResultMessage:
    [result] = [m for m in model.calls[1].messages if isinstance(m, al.ToolResultMessage)]
    return result


@pytest.mark.parametrize(
    ("line", "answer"),
    [
        ("y\n", (True, None)),
        ("YES", (True, None)),
        ("\n", (False, "The user did not allow this tool call")),
        ("n", (False, "The user did not allow this tool call")),
        (None, (False, "The user did not allow this tool call")),
        ("use 17*24 instead\n", (False, "The user did not allow this tool call: use 17*24 instead")),
    ],
)
def test_an_answer_typed_is_read_as_yes_no_or_a_reason(line: str | None, answer: tuple[bool, str | None]) -> None:
    assert answer_of(line) == answer


async def test_run_approve_runs_the_call_on_yes(anyio_backend: object, monkeypatch: pytest.MonkeyPatch) -> None:
    model = calculator_script()
    use_model(monkeypatch, model)
    code, out, err = await cli(["run", "17*23?", "--approve"], stdin="y\n")
    assert code == 0 and out == "It is 391.\n"
    assert 'Run calculator {"expression": "17*23"}? [y/N/reason]' in err
    result = tool_result(model)
    assert not result.is_error and text(result.content[0]) == "17*23 = 391"


async def test_run_approve_tells_the_model_the_reason_on_no(
    anyio_backend: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = calculator_script()
    use_model(monkeypatch, model)
    code, _out, err = await cli(["run", "17*23?", "--approve"], stdin="do it in your head\n")
    assert code == 0 and "Run calculator" in err
    result = tool_result(model)
    assert result.is_error
    assert text(result.content[0]) == "The user did not allow this tool call: do it in your head"


async def test_run_without_approve_does_not_ask(anyio_backend: object, monkeypatch: pytest.MonkeyPatch) -> None:
    model = calculator_script()
    use_model(monkeypatch, model)
    code, _out, err = await cli(["run", "17*23?"], stdin="n\n")
    assert code == 0 and "Run calculator" not in err and not tool_result(model).is_error


async def test_a_piped_chat_reads_the_answer_as_the_next_line(
    anyio_backend: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = ScriptedModel(
        [
            Response(content=[ScriptedToolCall("c1", "calculator", {"expression": "17*23"})]),
            "It is 391.",
            Response(content=[ScriptedToolCall("c2", "calculator", {"expression": "2*2"})]),
            "I was not allowed.",
        ]
    )
    use_model(monkeypatch, model)
    code, out, err = await cli(["chat", "--approve"], stdin="17*23?\ny\n2*2?\nn\n")
    assert code == 0 and out == "It is 391.\nI was not allowed.\n"
    assert err.count("? [y/N/reason]") == 2
    results = [m for m in model.calls[3].messages if isinstance(m, al.ToolResultMessage)]
    assert [(r.tool_call_id, r.is_error) for r in results] == [("c1", False), ("c2", True)]
    assert len(model.calls) == 4  # the answers were not taken for prompts
