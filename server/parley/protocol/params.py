"""Typed params of the client's requests, structured strictly from camelCase JSON.

A request whose params do not fit gets `-32602` with a message naming each bad field
(`sessionId: required field missing`), never silence. Unknown keys are ignored, as ACP
clients may send more than Parley reads.
"""

from __future__ import annotations

import re
from typing import Any, Literal, TypeVar, get_args, get_origin

import attrs
import cattrs
from cattrs.gen import make_dict_structure_fn, override
from pygls.exceptions import JsonRpcInvalidParams

from parley.core.choices import SessionOptions, ToolFormat, ToolPolicy
from parley.core.conversation import ContentBlock, ResourceBlock, TextBlock
from parley.protocol.updates import camel
from parley.tools.base import ToolSpec

T = TypeVar("T")


def _camel(name: str) -> str:
    return "_meta" if name == "meta" else camel(name)


@attrs.frozen
class ClientToolSpec(ToolSpec):
    """A tool the editor runs itself (ToolSpec in the protocol, which may leave out the
    description and the schema)."""

    description: str = ""
    input_schema: dict[str, Any] = attrs.field(factory=lambda: {"type": "object"})


@attrs.frozen
class ParleyClientCapabilities:
    tools: list[ClientToolSpec] = attrs.field(factory=list)
    revisions: bool = False  # the client replaces a hybrid round's streamed text when told


@attrs.frozen
class ClientMeta:
    parley: ParleyClientCapabilities = ParleyClientCapabilities()


@attrs.frozen
class ClientCapabilities:
    fs: dict[str, Any] | None = None
    meta: ClientMeta = ClientMeta()


@attrs.frozen
class ClientInfo:
    name: str
    version: str | None = None


@attrs.frozen
class InitializeParams:
    protocol_version: int
    client_capabilities: ClientCapabilities = ClientCapabilities()
    client_info: ClientInfo | None = None


@attrs.frozen
class SessionMeta:
    parley: SessionOptions = attrs.field(factory=SessionOptions)


@attrs.frozen
class NewSessionParams:
    cwd: str
    mcp_servers: list[Any] = attrs.field(factory=list)
    meta: SessionMeta = SessionMeta()


@attrs.frozen
class EmbeddedResource:
    uri: str
    text: str
    mime_type: str | None = None


@attrs.frozen
class PromptBlock:
    type: str
    text: str | None = None
    resource: EmbeddedResource | None = None
    uri: str | None = None  # resource_link
    name: str | None = None  # resource_link


@attrs.frozen
class PromptParams:
    session_id: str
    prompt: list[PromptBlock]


@attrs.frozen
class SessionIdParams:
    session_id: str


@attrs.frozen
class LoadSessionParams:
    session_id: str
    cwd: str
    mcp_servers: list[Any] = attrs.field(factory=list)


@attrs.frozen
class ListSessionsParams:
    cwd: str | None = None
    cursor: str | None = None


@attrs.frozen
class ConfigureParams:
    session_id: str
    model: str | None = None
    tool_policy: ToolPolicy | None = None
    auto_approve: list[str] | None = None
    tool_format: ToolFormat | None = None


@attrs.frozen
class UsageParams:
    session_id: str | None = None


def _strict(kind: type) -> Any:
    def structure(value: Any, _: type) -> Any:
        # bool is an int in Python; a JSON true is not a number here.
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise TypeError(f"expected {kind.__name__}, got {type(value).__name__}")
        return value

    return structure


class _NotOneOf(ValueError):
    """A value outside a `Literal`: its message says what is allowed."""


def _one_of(literal: Any) -> Any:
    allowed = get_args(literal)

    def structure(value: Any, _: type) -> Any:
        if not any(value == choice and type(value) is type(choice) for choice in allowed):
            raise _NotOneOf(f"must be one of {', '.join(map(str, allowed))}, not {value!r}")
        return value

    return structure


def _make_converter() -> cattrs.Converter:
    converter = cattrs.Converter()
    for kind in (str, int, bool):
        converter.register_structure_hook(kind, _strict(kind))
    converter.register_structure_hook_factory(lambda t: get_origin(t) is Literal, _one_of)
    converter.register_structure_hook_factory(
        attrs.has,
        lambda cls: make_dict_structure_fn(
            cls,
            converter,
            **{field.name: override(rename=_camel(field.name)) for field in attrs.fields(cls)},
        ),
    )
    return converter


_converter = _make_converter()


def parse_params(cls: type[T], params: Any) -> T:
    """Structure `params` as `cls`, or raise JSON-RPC invalid params with what is wrong."""
    if not isinstance(params, dict):
        raise JsonRpcInvalidParams(
            f"params must be an object with the fields of {cls.__name__}, got {_json_type(params)}"
        )
    try:
        return _converter.structure(params, cls)
    except cattrs.BaseValidationError as error:
        messages = cattrs.transform_error(error, format_exception=_format_exception)
        problems = "; ".join(_describe(message) for message in messages)
        raise JsonRpcInvalidParams(f"invalid params: {problems}") from error


def _format_exception(error: BaseException, kind: type | None) -> str:
    if isinstance(error, _NotOneOf):
        return str(error)
    return cattrs.v.format_exception(error, kind)


def _describe(message: str) -> str:
    # cattrs says "required field missing @ $.sessionId"; say "sessionId: required field missing".
    text, _, path = message.rpartition(" @ ")
    if not path:
        return message
    # cattrs names the attributes; the client knows the camelCase keys.
    path = re.sub(r"[a-z]+(?:_[a-z]+)+", lambda match: _camel(match.group()), path)
    path = re.sub(r"(?<=\.)meta\b", "_meta", path)
    return f"{path.removeprefix('$.') or 'params'}: {text}"


def _json_type(value: Any) -> str:
    if value is None:
        return "nothing"
    return {list: "an array", str: "a string", bool: "a boolean"}.get(type(value), "a number")


def prompt_content(blocks: list[PromptBlock]) -> tuple[ContentBlock, ...]:
    """The prompt as conversation blocks; unsupported block types are refused by name."""
    content: list[ContentBlock] = []
    for position, block in enumerate(blocks):
        where = f"prompt[{position}]"
        if block.type == "text":
            if block.text is None:
                raise JsonRpcInvalidParams(f"{where}: a text block needs 'text'")
            content.append(TextBlock(block.text))
        elif block.type == "resource":
            if block.resource is None:
                raise JsonRpcInvalidParams(f"{where}: a resource block needs 'resource'")
            resource = block.resource
            content.append(ResourceBlock(resource.uri, resource.text, resource.mime_type))
        elif block.type == "resource_link":
            if not block.uri:
                raise JsonRpcInvalidParams(f"{where}: a resource_link block needs 'uri'")
            content.append(TextBlock(f"[{block.name or block.uri}]({block.uri})"))
        else:
            raise JsonRpcInvalidParams(
                f"{where}: '{block.type}' blocks are not supported "
                "(text, resource and resource_link are)"
            )
    if not any(
        (isinstance(block, TextBlock) and block.text.strip()) or isinstance(block, ResourceBlock)
        for block in content
    ):
        raise JsonRpcInvalidParams("prompt: the prompt is empty")
    return tuple(content)
