"""config.toml's shape: attrs classes with their defaults, structured by cattrs.

Every value is checked by its type: the hooks below say what a type takes (a strict TOML
type, then its range), and a mistake becomes one line naming the key's path and what was
expected (`providers.local.stall_timeout: expected a number, got "slow"`). `[sandbox]`,
`[commands]`, `[checkpoints]`, `[chat]` and `[budget]` refuse a key they do not know; the
other tables ignore one (as Parley always has).
`config.py` turns the structured file into `Settings`.
"""

from __future__ import annotations

import datetime
import json
import math
import re
from collections.abc import Callable
from typing import Any, Literal, NewType, get_args, get_origin

import attrs
import cattrs
from cattrs.cols import homogenous_tuple_structure_factory, mapping_structure_factory
from cattrs.errors import ForbiddenExtraKeysError
from cattrs.gen import make_dict_structure_fn

from parley.core.setting_types import (
    CommandsTable,
    Count,
    KernelTable,
    NonNegative,
    PathText,
    Positive,
    PositiveCount,
    Share,
)
from parley.core.wire_kinds import WireKindName
from parley.sandbox import SandboxSettings

# How a server is asked to continue a partial assistant message (docs/local-models.md):
# "vllm": a trailing assistant message with `continue_final_message` and no generation
# prompt; "prefill": a trailing assistant message alone (llama.cpp's server, Ollama);
# "deepseek": a trailing assistant message marked `prefix` (DeepSeek's beta API).
ContinuationForm = Literal["vllm", "prefill", "deepseek"]
CONTINUATION_FORMS: tuple[ContinuationForm, ...] = get_args(ContinuationForm)

# Seconds a provider may send nothing (no header, no chunk, no byte of a synchronous answer)
# before the request is abandoned; a synchronous call sends nothing until its reply is whole.
DEFAULT_STALL_TIMEOUT = 60.0

ModelId = NewType("ModelId", str)  # "provider:model"
# `continue_streamed`: a form's name, or true (the preset's form) or false (none).
ContinueStreamed = NewType("ContinueStreamed", object)


@attrs.frozen
class CheckpointsTable:
    """[checkpoints]: the snapshots that let `/undo` put back everything a turn did
    (`agent/snapshots.py`). Unknown keys are refused."""

    ignore: tuple[str, ...] = ()  # `.gitignore` patterns left out besides `.gitignore`'s
    max_turn_megabytes: Count = Count(256)  # new content a turn's snapshots keep at most
    keep_days: Count = Count(30)  # a turn's snapshots are kept this long (0: with the session)


@attrs.frozen
class ChatTable:
    """[chat]: `parley chat`'s defaults. Unknown keys are refused."""

    store: bool = True  # keep each chat's session (false: as if --no-store)


@attrs.frozen
class BudgetTable:
    """[budget], in US dollars; absent: no limit. Unknown keys are refused."""

    session_usd: Positive | None = None
    day_usd: Positive | None = None


@attrs.frozen
class CompactionTable:
    threshold: Share = Share(0.8)  # the share of the window a request may fill


@attrs.frozen
class ProviderTable:
    """[providers.NAME]; a key left out keeps the preset's value (a preset's name) or the
    default."""

    kind: WireKindName | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    default_api_key: str | None = None
    max_retries: Count | None = None
    timeout_seconds: Positive | None = None
    stall_timeout: Positive | None = None  # absent: the file's `stall_timeout`
    prompt_cache_key: bool | None = None
    continue_streamed: ContinueStreamed | None = None


@attrs.frozen
class ModelTable:
    """[models."provider:model"]; a key left out: the model's default."""

    context_window: PositiveCount | None = None
    tool_format: Literal["native", "text"] | None = None
    max_tokens: PositiveCount | None = None
    thinking_budget: Count | None = None
    think_tags: bool | None = None
    vision: bool | None = None
    thinking: bool | None = None


@attrs.frozen
class PriceTable:
    """[prices."provider:model"], US dollars per million tokens."""

    input: NonNegative
    output: NonNegative
    cached_read: NonNegative | None = None  # absent: the input price
    cached_write: NonNegative | None = None


@attrs.frozen
class ConfigFile:
    """The whole file; an empty or missing file is all defaults."""

    default_model: str | None = None
    max_turn_requests: PositiveCount = PositiveCount(25)
    stall_timeout: Positive = Positive(DEFAULT_STALL_TIMEOUT)
    tool_timeout_seconds: Positive = Positive(120.0)
    mcp_start_timeout_seconds: Positive = Positive(10.0)
    kernel: KernelTable = KernelTable()
    sandbox: SandboxSettings = SandboxSettings()
    commands: CommandsTable = CommandsTable()
    checkpoints: CheckpointsTable = CheckpointsTable()
    chat: ChatTable = ChatTable()
    budget: BudgetTable = BudgetTable()
    compaction: CompactionTable = CompactionTable()
    providers: dict[str, ProviderTable] = attrs.field(factory=dict)
    models: dict[ModelId, ModelTable] = attrs.field(factory=dict)
    prices: dict[str, PriceTable] = attrs.field(factory=dict)


# They refuse a key they do not know.
CLOSED_TABLES = (SandboxSettings, CommandsTable, CheckpointsTable, ChatTable, BudgetTable)


class Mistake(ValueError):
    """A value that is not what its setting takes."""

    def __init__(self, expected: str, value: Any) -> None:
        super().__init__(f"expected {expected}, got {shown(value)}")


class ConfigFileError(ValueError):
    """The file's mistakes, each `path: what was expected, got what`."""

    def __init__(self, mistakes: list[str]) -> None:
        super().__init__("; ".join(mistakes))
        self.mistakes = mistakes


def structure_config(table: dict[str, Any]) -> ConfigFile:
    """The file's table (as `tomllib` reads it) structured, or `ConfigFileError`."""
    try:
        return _converter.structure(table, ConfigFile)
    except (cattrs.BaseValidationError, Mistake) as error:
        raise ConfigFileError(_mistakes(error, ())) from error


def shown(value: Any) -> str:
    """A value as it is written in TOML (a long string cut), or what it is."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value if len(value) <= 40 else value[:40] + "…", ensure_ascii=False)
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, datetime.date | datetime.time):
        return value.isoformat()
    return {dict: "a table", list: "a list"}.get(type(value), type(value).__name__)


# --- the converter ---------------------------------------------------------------------------


def _number(value: Any) -> float:
    """An integer or a float, finite."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise Mistake("a number", value)
    return float(value)


def _whole(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise Mistake("a whole number", value)
    return value


def _in_range(
    read: Callable[[Any], Any], holds: Callable[[Any], bool], expected: str
) -> Callable[[Any, type], Any]:
    def structure(value: Any, _: type) -> Any:
        number = read(value)
        if not holds(number):
            raise Mistake(expected, value)
        return number

    return structure


def _of_type(kind: type, expected: str) -> Callable[[Any, type], Any]:
    def structure(value: Any, _: type) -> Any:
        if not isinstance(value, kind):
            raise Mistake(expected, value)
        return value

    return structure


def _model_id(value: Any, _: type) -> str:
    if not isinstance(value, str) or not re.fullmatch(r"[^:]+:.+", value):
        raise Mistake('a model named "provider:model"', value)
    return value


def _path(value: Any, _: type) -> str:
    if not isinstance(value, str) or not value:
        raise Mistake("a path (a string, not empty)", value)
    return value


def _continue_streamed(value: Any, _: type) -> object:
    if isinstance(value, bool) or value in CONTINUATION_FORMS:
        return value
    forms = ", ".join(f'"{form}"' for form in CONTINUATION_FORMS)
    raise Mistake(f"one of {forms}, true or false", value)


def _one_of(literal: Any) -> Callable[[Any, type], Any]:
    allowed = get_args(literal)
    expected = "one of " + ", ".join(shown(choice) for choice in allowed)

    def structure(value: Any, _: type) -> Any:
        if not isinstance(value, str) or value not in allowed:
            raise Mistake(expected, value)
        return value

    return structure


def _shaped(
    kind: type, expected: str, factory: Callable[[Any, cattrs.Converter], Any]
) -> Callable[[Any], Callable[[Any, type], Any]]:
    """A container's hook: first its TOML shape (a table, a list), then its parts."""

    def make(type_: Any) -> Callable[[Any, type], Any]:
        structure = factory(type_, _converter)

        def hook(value: Any, _: type) -> Any:
            if not isinstance(value, kind):
                raise Mistake(expected, value)
            return structure(value, type_)

        return hook

    return make


def _table_structure(cls: type, converter: cattrs.Converter) -> Any:
    return make_dict_structure_fn(cls, converter, _cattrs_forbid_extra_keys=cls in CLOSED_TABLES)


def _make_converter() -> cattrs.Converter:
    converter = cattrs.Converter(detailed_validation=True)
    hooks: dict[Any, Callable[[Any, type], Any]] = {
        str: _of_type(str, "a string"),
        bool: _of_type(bool, "true or false"),
        int: lambda value, _: _whole(value),
        float: lambda value, _: _number(value),
        Positive: _in_range(_number, lambda n: n > 0, "a number > 0"),
        NonNegative: _in_range(_number, lambda n: n >= 0, "a number >= 0"),
        Share: _in_range(_number, lambda n: 0 < n <= 1, "a share: a number > 0 and <= 1"),
        Count: _in_range(_whole, lambda n: n >= 0, "a whole number >= 0"),
        PositiveCount: _in_range(_whole, lambda n: n > 0, "a whole number > 0"),
        PathText: _path,
        ModelId: _model_id,
        ContinueStreamed: _continue_streamed,
    }
    for kind, hook in hooks.items():
        converter.register_structure_hook(kind, hook)
    converter.register_structure_hook_factory(lambda t: get_origin(t) is Literal, _one_of)
    converter.register_structure_hook_factory(
        lambda t: get_origin(t) is dict, _shaped(dict, "a table", mapping_structure_factory)
    )
    converter.register_structure_hook_factory(
        lambda t: get_origin(t) is tuple,
        _shaped(list, "a list", homogenous_tuple_structure_factory),
    )
    converter.register_structure_hook_factory(attrs.has, _shaped(dict, "a table", _table_structure))
    return converter


_converter = _make_converter()


# --- the mistakes, by path ------------------------------------------------------------------


def _mistakes(error: BaseException, path: tuple[str, ...]) -> list[str]:
    """Each mistake in a cattrs error tree, as `key.path: what`."""
    if isinstance(error, cattrs.ClassValidationError):
        with_notes, without = error.group_exceptions()
        found = [m for inner, note in with_notes for m in _mistakes(inner, (*path, note.name))]
        return found + [m for inner in without for m in _mistakes(inner, path)]
    if isinstance(error, cattrs.IterableValidationError):
        with_notes, without = error.group_exceptions()
        found = [
            m for inner, note in with_notes for m in _mistakes(inner, (*path, _key(note.index)))
        ]
        return found + [m for inner in without for m in _mistakes(inner, path)]
    if isinstance(error, ForbiddenExtraKeysError):
        known = ", ".join(field.name for field in attrs.fields(error.cl))
        return [
            f"{_dotted((*path, _key(key)))}: unknown setting (expected one of {known})"
            for key in sorted(error.extra_fields)
        ]
    what = str(error) if isinstance(error, Mistake) else _cattrs_words(error)
    return [f"{_dotted(path)}: {what}"]


def _cattrs_words(error: BaseException) -> str:
    """cattrs' own errors: a required key missing (a price's input or output)."""
    if isinstance(error, KeyError):
        return "missing (it is required)"
    return cattrs.v.format_exception(error, None)


def _key(key: object) -> str:
    """A table's key or a list's index as TOML writes it in a dotted path."""
    if isinstance(key, int):
        return f"[{key}]"
    text = str(key)
    return text if re.fullmatch(r"[A-Za-z0-9_-]+", text) else json.dumps(text, ensure_ascii=False)


def _dotted(path: tuple[str, ...]) -> str:
    return "".join(part if part.startswith("[") else f".{part}" for part in path).lstrip(".")
