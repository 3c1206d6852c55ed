"""Each server tool's arguments are declared once (an attrs class); the schema the model sees
and the reading of a call's arguments come from that declaration."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs
import pytest
from parley.fakellm import FakeLLM, Reply, ScriptedToolCall
from parley.tools.arguments import (
    InvalidArguments,
    NoArguments,
    argument,
    json_schema,
    read_arguments,
)
from parley.tools.base import ToolContext
from parley.tools.server_tools import server_tools
from parley.tools.workspace import ReadFileArguments

DOTTED_TARGET_BEFORE: dict[str, Any] = {
    "type": "object",
    "properties": {
        "target": {
            "type": "string",
            "description": (
                "A dotted path, e.g. 'geometry.Shape.area', or a name defined by python_eval."
            ),
        }
    },
    "required": ["target"],
    "additionalProperties": False,
}

# What every server tool told the model before its arguments were declared as classes: the
# declarations must keep this exactly (names, order, descriptions, what is required).
SCHEMAS_BEFORE: dict[str, dict[str, Any]] = {
    "python_eval": {
        "type": "object",
        "properties": {"code": {"type": "string", "description": "Python statements."}},
        "required": ["code"],
        "additionalProperties": False,
    },
    "python_describe": DOTTED_TARGET_BEFORE,
    "python_source": DOTTED_TARGET_BEFORE,
    "python_members": {
        "type": "object",
        "properties": {
            "target": {
                "type": "string",
                "description": "A module or class, e.g. 'geometry' or 'geometry.Shape'.",
            }
        },
        "required": ["target"],
        "additionalProperties": False,
    },
    "python_apropos": {
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "description": "A Python regular expression."},
            "package": {
                "type": "string",
                "description": "Search this package's modules (from their source).",
            },
        },
        "required": ["pattern"],
        "additionalProperties": False,
    },
    "python_who_calls": {
        "type": "object",
        "properties": {
            "name": {
                "type": "string",
                "description": "The function's name; 'area' also matches 'x.area(...)'.",
            }
        },
        "required": ["name"],
        "additionalProperties": False,
    },
    "python_last_error": {"type": "object", "properties": {}, "additionalProperties": False},
    "read_file": {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "Path relative to the workspace."},
            "startLine": {"type": "integer", "minimum": 1},
            "endLine": {"type": "integer", "minimum": 1},
        },
        "required": ["path"],
        "additionalProperties": False,
    },
    "list_directory": {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "Relative to the workspace; '.'."},
        },
        "additionalProperties": False,
    },
    "search_files": {
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "description": "A Python regular expression."},
            "glob": {"type": "string", "description": "Only files matching, e.g. '*.py'."},
        },
        "required": ["pattern"],
        "additionalProperties": False,
    },
}


def test_every_server_tool_tells_the_model_what_it_did_before(tmp_path: Path) -> None:
    schemas = {tool.spec.name: tool.spec.input_schema for tool in server_tools(tmp_path)}
    # The edit tools (issue 13), run_command and the plan (issue 25) came after these, with
    # schemas of their own.
    assert list(schemas) == [
        *SCHEMAS_BEFORE,
        "edit_file",
        "write_file",
        "run_command",
        "update_plan",
    ]
    for name, schema in schemas.items():
        if name not in SCHEMAS_BEFORE:
            continue
        # As text too: the text tool format shows the model the schema's JSON, key order and all.
        assert json.dumps(schema) == json.dumps(SCHEMAS_BEFORE[name]), name


async def test_the_model_is_sent_the_schemas_and_told_which_argument_is_wrong(
    start_server: Any, fake: FakeLLM, workspace: Path
) -> None:
    client = await start_server()
    await client.initialize()
    wrong = ScriptedToolCall("read_file", {"path": "geometry.py", "startLine": "two"})
    fake.set_script([Reply(tool_calls=(wrong,)), Reply(text="Done.")])
    session = await client.new_session(str(workspace), toolPolicy="sync")
    result = await client.prompt(session, "Read it.", timeout=60)
    assert result["stopReason"] == "end_turn"
    first, second = fake.requests
    sent = {
        tool["function"]["name"]: tool["function"]["parameters"] for tool in first.body["tools"]
    }
    assert {name: sent[name] for name in SCHEMAS_BEFORE} == SCHEMAS_BEFORE
    assert second.body["messages"][-1]["content"] == "'startLine' must be a whole number"


@attrs.frozen
class SliceArguments:
    """A declaration with every kind of argument."""

    text: str = argument("What to cut.")
    code: str = argument(blank=True)
    first_line: int | None = argument("From here.", wire_name="firstLine", minimum=1, default=None)
    label: str | None = argument(default=None)


def test_the_schema_comes_from_the_declaration() -> None:
    assert json_schema(SliceArguments) == {
        "type": "object",
        "properties": {
            "text": {"type": "string", "description": "What to cut."},
            "code": {"type": "string"},
            "firstLine": {"type": "integer", "description": "From here.", "minimum": 1},
            "label": {"type": "string"},
        },
        "required": ["text", "code"],
        "additionalProperties": False,
    }
    assert json_schema(NoArguments) == {
        "type": "object",
        "properties": {},
        "additionalProperties": False,
    }


def test_arguments_are_read_by_their_wire_names_with_defaults() -> None:
    read = read_arguments(SliceArguments, {"text": "abc", "code": "", "firstLine": 3.0})
    assert read == SliceArguments(text="abc", code="", first_line=3, label=None)
    assert isinstance(read.first_line, int)
    # None is "not given"; arguments nobody declared are ignored, as before.
    read = read_arguments(SliceArguments, {"text": "a", "code": "b", "label": None, "x": 1})
    assert read == SliceArguments(text="a", code="b")


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"code": ""}, "'text' must be a non-empty string"),
        ({"text": "   ", "code": ""}, "'text' must be a non-empty string"),
        ({"text": 7, "code": ""}, "'text' must be a non-empty string"),
        ({"text": "a"}, "'code' must be a string"),
        ({"text": "a", "code": ["print(1)"]}, "'code' must be a string"),
        ({"text": "a", "code": "", "firstLine": "3"}, "'firstLine' must be a whole number"),
        ({"text": "a", "code": "", "firstLine": 2.5}, "'firstLine' must be a whole number"),
        ({"text": "a", "code": "", "firstLine": True}, "'firstLine' must be a whole number"),
        (
            {"text": "a", "code": "", "firstLine": float("inf")},
            "'firstLine' must be a whole number",
        ),
        ({"text": "a", "code": "", "label": 3}, "'label' must be a string"),
        # The first wrong argument, in declaration order, is named.
        ({"text": "", "code": 1, "label": 3}, "'text' must be a non-empty string"),
    ],
)
def test_a_wrong_argument_is_named_in_a_sentence(arguments: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidArguments) as raised:
        read_arguments(SliceArguments, arguments)
    assert str(raised.value) == message


def test_only_str_int_float_and_bool_arguments_can_be_declared() -> None:
    @attrs.frozen
    class Listed:
        names: list[str] = attrs.field()

    with pytest.raises(TypeError, match=r"Listed\.names: arguments are str, int, float or bool"):
        json_schema(Listed)

    @attrs.frozen
    class Timed:
        seconds: float | None = argument("Seconds.", default=None)

    assert json_schema(Timed)["properties"] == {
        "seconds": {"type": "number", "description": "Seconds."}
    }
    assert read_arguments(Timed, {"seconds": 2}).seconds == 2.0
    assert read_arguments(Timed, {"seconds": 0.5}).seconds == 0.5
    for wrong in (True, "2", [2]):
        with pytest.raises(InvalidArguments, match="'seconds' must be a number"):
            read_arguments(Timed, {"seconds": wrong})
    for endless in (float("inf"), float("nan"), 10**400):
        with pytest.raises(InvalidArguments, match="'seconds' must be a finite number"):
            read_arguments(Timed, {"seconds": endless})

    @attrs.frozen
    class Flagged:
        every: bool | None = argument("Every one.", default=None)

    assert json_schema(Flagged)["properties"] == {
        "every": {"type": "boolean", "description": "Every one."}
    }
    assert read_arguments(Flagged, {"every": True}).every is True
    assert read_arguments(Flagged, {}).every is None
    with pytest.raises(InvalidArguments, match="'every' must be true or false"):
        read_arguments(Flagged, {"every": 1})


@pytest.mark.parametrize(
    ("tool", "arguments", "message"),
    [
        ("read_file", {"path": " "}, "'path' must be a non-empty string"),
        ("read_file", {"path": "a.py", "startLine": "2"}, "'startLine' must be a whole number"),
        ("read_file", {"path": "a.py", "endLine": 2.5}, "'endLine' must be a whole number"),
        ("list_directory", {"path": 3}, "'path' must be a string"),
        ("search_files", {"pattern": ""}, "'pattern' must be a non-empty string"),
        ("search_files", {"pattern": "x", "glob": ["*.py"]}, "'glob' must be a string"),
        ("python_eval", {"code": 42}, "'code' must be a string"),
        ("python_describe", {}, "'target' must be a non-empty string"),
        ("python_source", {"target": ""}, "'target' must be a non-empty string"),
        ("python_members", {"target": None}, "'target' must be a non-empty string"),
        ("python_apropos", {"pattern": "x", "package": 1}, "'package' must be a string"),
        ("python_who_calls", {"name": "\t"}, "'name' must be a non-empty string"),
    ],
)
async def test_a_tool_answers_a_wrong_argument_with_an_error_result(
    tmp_path: Path, tool: str, arguments: dict[str, Any], message: str
) -> None:
    tools = {tool.spec.name: tool for tool in server_tools(tmp_path)}
    context = ToolContext(session_id="s1", tool_call_id="t1", cwd=tmp_path)
    result = await tools[tool].run(arguments, context)
    assert result.is_error and result.content == message


def test_read_file_reads_its_camel_case_lines() -> None:
    read = read_arguments(ReadFileArguments, {"path": "a.py", "startLine": 4, "endLine": 5})
    assert (read.path, read.start_line, read.end_line) == ("a.py", 4, 5)
