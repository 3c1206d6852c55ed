"""Reading a tool call's arguments. Each helper raises `ValueError` with a sentence the model
can act on; tools turn it into an error result."""

from __future__ import annotations

from typing import Any


def required_string(arguments: dict[str, Any], name: str) -> str:
    value = arguments.get(name)
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"'{name}' must be a non-empty string")
    return value


def optional_string(arguments: dict[str, Any], name: str) -> str | None:
    if arguments.get(name) is None:
        return None
    if not isinstance(arguments[name], str):
        raise ValueError(f"'{name}' must be a string")
    return arguments[name]


def optional_int(arguments: dict[str, Any], name: str) -> int | None:
    value = arguments.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or int(value) != value:
        raise ValueError(f"'{name}' must be a whole number")
    return int(value)
