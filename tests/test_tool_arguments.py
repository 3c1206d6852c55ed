"""Each server tool's arguments are declared once (an attrs class); the schema the model sees
and the reading of a call's arguments come from that declaration."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from parley.tools.server_tools import server_tools

# What every server tool told the model before its arguments were declared as classes: the
# declarations must keep this exactly (names, order, descriptions, what is required).
SCHEMAS_BEFORE: dict[str, dict[str, Any]] = {
    "python_eval": {
        "type": "object",
        "properties": {"code": {"type": "string", "description": "Python statements."}},
        "required": ["code"],
        "additionalProperties": False,
    },
    "python_describe": {
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
    },
    "python_source": {
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
    },
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
    assert list(schemas) == list(SCHEMAS_BEFORE)
    for name, schema in schemas.items():
        # As text too: the text tool format shows the model the schema's JSON, key order and all.
        assert json.dumps(schema) == json.dumps(SCHEMAS_BEFORE[name]), name
