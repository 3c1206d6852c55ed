"""Typed params of the client's requests, structured strictly from camelCase JSON.

A request whose params do not fit gets `-32602` with a message naming each bad field
(`sessionId: required field missing`), never silence. Unknown keys are ignored, as ACP
clients may send more than Parley reads.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, TypeVar, get_args, get_origin

import attrs
import cattrs
from cattrs.gen import make_dict_structure_fn, override
from pygls.exceptions import JsonRpcInvalidParams

from parley.core.choices import Mode
from parley.core.conversation import ContentBlock, ResourceBlock, TextBlock, file_note
from parley.core.images import (
    InvalidImage,
    checked_image,
    decode_base64,
    normal_media_type,
    sniff_image_type,
)
from parley.core.kernel_choice import KernelChoice, kernel_choice
from parley.core.session_settings import (
    CONFIGURE,
    NEW,
    SessionOptions,
    SessionSettings,
    settable,
)
from parley.core.updates import camel
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
    terminal: bool = False  # the client runs `terminal/*` (ACP's; anything but true: no)
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
    capabilities: Any = None  # v2's name for them: read only when v2 is negotiated (v2.py)


def _with_settings(name: str, where: str, fields: dict[str, Any]) -> type:
    """A params class of `fields` and of each session setting a client may set `where`
    (core/session_settings.py), None unless given: the declaration is the only list of them."""
    optional = {
        field.name: attrs.field(type=field.type | None, default=None, validator=field.validator)
        for field in settable(where)
    }
    return attrs.make_class(name, {**fields, **optional}, frozen=True)


# `session/new`'s `_meta.parley`: the settings marked NEW, and the tools always allowed.
NewSessionOptions = _with_settings(
    "NewSessionOptions", NEW, {"auto_approve": attrs.field(type=list[str], factory=list)}
)
# `_parley/session/configure`: the settings marked CONFIGURE (None: unchanged), and the tools
# always allowed (None: unchanged).
ConfigureParams = _with_settings(
    "ConfigureParams",
    CONFIGURE,
    {
        "session_id": attrs.field(type=str),
        "auto_approve": attrs.field(type=list[str] | None, default=None),
    },
)


def settings_given(params: Any, where: str) -> dict[str, Any]:
    """The settings `params` (a `NewSessionOptions` or a `ConfigureParams`) gives."""
    given = {field.name: getattr(params, field.name) for field in settable(where)}
    return {name: value for name, value in given.items() if value is not None}


def session_options(options: Any) -> SessionOptions:
    """A `NewSessionOptions` as the session's settings (the rest their defaults)."""
    return SessionOptions(SessionSettings(**settings_given(options, NEW)), options.auto_approve)


@attrs.frozen
class SessionMeta:
    parley: NewSessionOptions = attrs.field(factory=NewSessionOptions)  # type: ignore[valid-type]


@attrs.frozen
class NameValue:
    """ACP's EnvVariable and HttpHeader."""

    name: str
    value: str


@attrs.frozen
class McpServerParams:
    """ACP's McpServer: stdio (no `type`, or "stdio") with `command`, `args`, `env`; or
    "http" / "sse" with `url`, `headers`. `check_mcp_servers` checks the fields a type needs.
    Another type is not refused here: the server that cannot be started is told to the user,
    and the session goes on."""

    name: str
    type: str = "stdio"
    command: str | None = None
    args: list[str] | None = None
    env: list[NameValue] | None = None
    url: str | None = None
    headers: list[NameValue] | None = None


@attrs.frozen
class NewSessionParams:
    cwd: str
    mcp_servers: list[McpServerParams] = attrs.field(factory=list)
    additional_directories: Any = None  # checked by `additional_roots`
    meta: SessionMeta = SessionMeta()


@attrs.frozen
class EmbeddedResource:
    uri: str
    text: str | None = None  # a text resource has `text`,
    blob: str | None = None  # a binary one `blob` (base64)
    mime_type: str | None = None


@attrs.frozen
class PromptBlock:
    type: str
    text: str | None = None
    resource: EmbeddedResource | None = None
    uri: str | None = None  # resource_link; image (where it came from)
    name: str | None = None  # resource_link
    data: str | None = None  # image (base64)
    mime_type: str | None = None  # image, resource_link


@attrs.frozen
class PromptParams:
    session_id: str
    prompt: list[PromptBlock]
    meta: Any = None  # ACP's `_meta`, whatever a client puts there: see `literal`

    @property
    def literal(self) -> bool:
        """`_meta.parley.literal`: the text is the prompt as it is, never a slash command
        (`parley chat` with text that did not come from a terminal: a piped document must
        not run `/undo`). Anything else in `_meta` is not Parley's and is ignored."""
        return self._parley_flag("literal")

    @property
    def retry(self) -> bool:
        """`_meta.parley.retry`: the prompt replaces the last turn if that was cut off."""
        return self._parley_flag("retry")

    def _parley_flag(self, name: str) -> bool:
        parley = self.meta.get("parley") if isinstance(self.meta, dict) else None
        flag = parley.get(name, False) if isinstance(parley, dict) else False
        if not isinstance(flag, bool):
            got = _json_type(flag)
            raise JsonRpcInvalidParams(
                f"invalid params: _meta.parley.{name}: expected a boolean, got {got}"
            )
        return flag


@attrs.frozen
class SessionIdParams:
    session_id: str


@attrs.frozen
class LoadSessionParams:
    """`session/load` and `session/resume`."""

    session_id: str
    cwd: str
    mcp_servers: list[McpServerParams] = attrs.field(factory=list)
    additional_directories: Any = None  # checked by `additional_roots`
    replay_from: Any = None  # v2's `session/resume` cursor: read only on v2 (`v2.replay_start`)


@attrs.frozen
class ListSessionsParams:
    cwd: str | None = None
    cursor: str | None = None


@attrs.frozen
class SetConfigOptionParams:
    session_id: str
    config_id: str
    value: Any  # a select's value id (a string); which values fit, the session's options say


@attrs.frozen
class SetModeParams:
    """ACP's `SetSessionModeRequest`."""

    session_id: str
    mode_id: Mode


@attrs.frozen
class RestoreParams:
    session_id: str
    turn: int  # the session's turn count at that turn: 1 is the first


@attrs.frozen
class RedoParams:
    session_id: str


@attrs.frozen
class CompactParams:
    session_id: str


@attrs.frozen
class ExportParams:
    session_id: str
    format: Literal["markdown", "json"] = "markdown"


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
    if isinstance(error, ValueError) and str(error).startswith("'"):  # an attrs validator's
        return re.sub(r"[a-z]+(?:_[a-z]+)+", lambda match: _camel(match.group()), str(error))
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
    kinds = {list: "an array", str: "a string", bool: "a boolean", dict: "an object"}
    return kinds.get(type(value), "a number")


def kernel_param(raw: Any) -> tuple[bool, KernelChoice | None]:
    """`_meta.parley.kernel` of `session/new`, `session/load` or `session/resume`: whether
    it is given, and the kernel it names (None: Parley's own). A wrong one is invalid params
    naming what is wrong (never quoting a token)."""
    meta = raw.get("_meta") if isinstance(raw, dict) else None
    parley = meta.get("parley") if isinstance(meta, dict) else None
    if not isinstance(parley, dict) or "kernel" not in parley:
        return False, None
    try:
        return True, kernel_choice(parley["kernel"])
    except ValueError as error:
        raise JsonRpcInvalidParams(f"invalid params: _meta.parley.kernel: {error}") from None


def check_mcp_servers(servers: list[McpServerParams]) -> None:
    """Raise invalid params for a server without what its type needs (a command, a URL)."""
    for position, server in enumerate(servers):
        needed = {"stdio": "command", "http": "url", "sse": "url"}.get(server.type)
        if needed is not None and not getattr(server, needed):
            raise JsonRpcInvalidParams(
                f"mcpServers[{position}]: a {server.type} server needs '{needed}'"
            )


def additional_roots(directories: Any) -> tuple[Path, ...]:
    """ACP's `additionalDirectories` (null: none) as paths; invalid params naming the first
    entry that is not an absolute path to an existing directory."""
    if directories is None:
        return ()
    if not isinstance(directories, list):
        raise JsonRpcInvalidParams(
            "invalid params: additionalDirectories: expected an array of absolute paths, "
            f"got {_json_type(directories)}"
        )
    roots = []
    for position, directory in enumerate(directories):
        if not isinstance(directory, str):
            raise JsonRpcInvalidParams(
                f"invalid params: additionalDirectories[{position}]: expected a string, "
                f"got {_json_type(directory)}"
            )
        where = f"additionalDirectories[{position}]: {directory[:300]!r}"
        if "\0" in directory:
            raise JsonRpcInvalidParams(f"{where} has a NUL character")
        if not os.path.isabs(directory):
            raise JsonRpcInvalidParams(f"{where} is not an absolute path")
        if not os.path.isdir(directory):
            raise JsonRpcInvalidParams(f"{where} is not an existing directory")
        roots.append(Path(directory))
    return tuple(roots)


# A `resource_link`'s file read as content: (uri, name, mimeType) → a resource or a note.
AttachLink = Callable[[str, str | None, str | None], ContentBlock]


def prompt_content(blocks: list[PromptBlock], attach_link: AttachLink) -> tuple[ContentBlock, ...]:
    """The prompt as conversation blocks; what cannot be taken is refused by name.

    Images (`image` blocks, and `resource` blobs that are images) are checked: type, base64,
    signature, size. Another blob becomes a note naming the file; a `resource_link` is read
    by `attach_link`, which may block (call this off the event loop).
    """
    content = [
        _content_block(block, f"prompt[{position}]", attach_link)
        for position, block in enumerate(blocks)
    ]
    if not any(not isinstance(block, TextBlock) or block.text.strip() for block in content):
        raise JsonRpcInvalidParams("prompt: the prompt is empty")
    return tuple(content)


def _content_block(block: PromptBlock, where: str, attach_link: AttachLink) -> ContentBlock:
    try:
        if block.type == "text":
            if block.text is None:
                raise JsonRpcInvalidParams(f"{where}: a text block needs 'text'")
            return TextBlock(block.text)
        if block.type == "image":
            if block.data is None or block.mime_type is None:
                raise JsonRpcInvalidParams(f"{where}: an image block needs 'data' and 'mimeType'")
            return checked_image(block.mime_type, block.data, block.uri, f"{where} (image)")
        if block.type == "resource":
            if block.resource is None:
                raise JsonRpcInvalidParams(f"{where}: a resource block needs 'resource'")
            return _embedded(block.resource, where)
        if block.type == "resource_link":
            if not block.uri:
                raise JsonRpcInvalidParams(f"{where}: a resource_link block needs 'uri'")
            attached = attach_link(block.uri, block.name, block.mime_type)
            if isinstance(attached, TextBlock):  # a note: the link is what the user sent
                return attrs.evolve(attached, sent=_link_sent(block.uri, block))
            return attached
    except InvalidImage as error:
        raise JsonRpcInvalidParams(f"{where}: {error}") from error
    raise JsonRpcInvalidParams(
        f"{where}: '{block.type}' blocks are not supported "
        "(text, image, resource and resource_link are)"
    )


def _embedded(resource: EmbeddedResource, where: str) -> ContentBlock:
    """A text resource as it is; a blob that is an image (by its type, or by its bytes when
    it has none) as an image; another blob as a note naming the file, its type and size."""
    if resource.text is not None:
        return ResourceBlock(resource.uri, resource.text, resource.mime_type)
    if resource.blob is None:
        raise JsonRpcInvalidParams(f"{where}: a resource needs 'text' or 'blob'")
    what = f"{where} ({resource.uri})"
    media_type = normal_media_type(resource.mime_type or "")
    if media_type.startswith("image/") and media_type != "image/svg+xml":
        return checked_image(media_type, resource.blob, resource.uri, what)
    raw = decode_base64(resource.blob, what)
    if not media_type and (sniffed := sniff_image_type(raw)):
        return checked_image(sniffed, resource.blob, resource.uri, what)
    note = file_note(
        resource.uri, resource.mime_type, len(raw), "binary content, not shown to the model"
    )
    sent = {"uri": resource.uri, "blob": resource.blob}
    if resource.mime_type:
        sent["mimeType"] = resource.mime_type
    return attrs.evolve(note, sent={"type": "resource", "resource": sent})


def _link_sent(uri: str, block: PromptBlock) -> dict[str, Any]:
    """The `resource_link` as the user sent it (a name is required on the wire)."""
    sent = {"type": "resource_link", "uri": uri, "name": block.name or uri}
    if block.mime_type:
        sent["mimeType"] = block.mime_type
    return sent
