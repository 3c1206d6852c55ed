"""A tool's arguments, declared once as an attrs class; the JSON schema the model is shown and
the reading of a call's arguments both come from it.

    @attrs.frozen
    class ReadFileArguments:
        path: str = argument("Path relative to the workspace.")
        start_line: int | None = argument(wire_name="startLine", minimum=1, default=None)

A field without a default is required. `str`, `int`, `float` and `bool` are the types a field
may have (optionally `| None`). A required string must not be blank unless `blank=True`.
Arguments the model adds that are not declared are ignored. A wrong argument raises
`InvalidArguments` with a sentence the model can act on; tools turn it into an error result.
`minimum` is only told to the model: a range is the tool's to check (read_file reads
`startLine: 0` from line 1).
"""

from __future__ import annotations

import functools
import math
import types
from collections.abc import Mapping
from typing import Any, TypeVar, Union, get_args, get_origin

import attrs

ArgumentsT = TypeVar("ArgumentsT")

JSON_TYPES: dict[type, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}


class InvalidArguments(ValueError):
    """A call's arguments do not fit the tool's declaration."""


@attrs.frozen
class NoArguments:
    """The declaration of a tool that takes no arguments."""


def argument(
    description: str | None = None,
    *,
    wire_name: str | None = None,
    minimum: int | None = None,
    blank: bool = False,
    default: Any = attrs.NOTHING,
) -> Any:
    """A declared argument: what the model is told about it (`description`, `minimum`), its
    name on the wire when that is not the field's, and whether a required string may be
    blank."""
    metadata = {
        "description": description,
        "wire_name": wire_name,
        "minimum": minimum,
        "blank": blank,
    }
    return attrs.field(default=default, metadata=metadata)


@attrs.frozen
class _Declared:
    """One field, as the schema and the reader need it."""

    field_name: str
    wire_name: str
    json_type: str
    python_type: type
    required: bool
    blank: bool
    description: str | None
    minimum: int | None


@functools.cache
def _declared(cls: type) -> tuple[_Declared, ...]:
    attrs.resolve_types(cls)  # annotations are strings under `from __future__ import annotations`
    declared = []
    for field in attrs.fields(cls):
        python_type = _without_none(field.type)
        if python_type not in JSON_TYPES:
            raise TypeError(f"{cls.__name__}.{field.name}: arguments are str, int, float or bool")
        declared.append(
            _Declared(
                field_name=field.name,
                wire_name=field.metadata.get("wire_name") or field.name,
                json_type=JSON_TYPES[python_type],
                python_type=python_type,
                required=field.default is attrs.NOTHING,
                blank=field.metadata.get("blank", False),
                description=field.metadata.get("description"),
                minimum=field.metadata.get("minimum"),
            )
        )
    return tuple(declared)


def _without_none(annotation: Any) -> Any:
    """`X` for `X | None` (or `Optional[X]`), else the annotation itself."""
    if get_origin(annotation) in (Union, types.UnionType):
        rest = [arg for arg in get_args(annotation) if arg is not type(None)]
        if len(rest) == 1:
            return rest[0]
    return annotation


def json_schema(cls: type) -> dict[str, Any]:
    """The JSON schema of the arguments `cls` declares, as the model is shown it."""
    properties: dict[str, Any] = {}
    for field in _declared(cls):
        described: dict[str, Any] = {"type": field.json_type}
        if field.description is not None:
            described["description"] = field.description
        if field.minimum is not None:
            described["minimum"] = field.minimum
        properties[field.wire_name] = described
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    required = [field.wire_name for field in _declared(cls) if field.required]
    if required:
        schema["required"] = required
    schema["additionalProperties"] = False
    return schema


def read_arguments(cls: type[ArgumentsT], arguments: Mapping[str, Any]) -> ArgumentsT:
    """The call's `arguments` as a `cls`, checked in declaration order; `InvalidArguments`
    names the first one that is wrong."""
    values: dict[str, Any] = {}
    for field in _declared(cls):
        value = arguments.get(field.wire_name)
        if value is None and not field.required:
            continue  # its default
        values[field.field_name] = _checked(field, value)
    return cls(**values)


def _checked(field: _Declared, value: Any) -> Any:
    name = field.wire_name
    if field.python_type is bool:
        if not isinstance(value, bool):
            raise InvalidArguments(f"'{name}' must be true or false")
        return value
    if field.python_type is float:
        # Any finite JSON number: 2 and 2.5 alike, not true nor "2" nor 1e999.
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise InvalidArguments(f"'{name}' must be a number")
        try:
            number = float(value)
        except OverflowError:
            number = math.inf
        if not math.isfinite(number):
            raise InvalidArguments(f"'{name}' must be a finite number")
        return number
    if field.python_type is int:
        # JSON has one number type: 3.0 is a whole number, true is not.
        whole = isinstance(value, int) or (isinstance(value, float) and value.is_integer())
        if isinstance(value, bool) or not whole:
            raise InvalidArguments(f"'{name}' must be a whole number")
        return int(value)
    if field.required and not field.blank:
        if not isinstance(value, str) or not value.strip():
            raise InvalidArguments(f"'{name}' must be a non-empty string")
    elif not isinstance(value, str):
        raise InvalidArguments(f"'{name}' must be a string")
    return value
