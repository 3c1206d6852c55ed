"""Configuration: environment variables over `$XDG_CONFIG_HOME/parley/config.toml` over defaults.

API keys are only ever read from the environment (the config names the variable); they are
never written anywhere by Parley.

    default_model = "anthropic:claude-sonnet-4-5"
    max_turn_requests = 25
    stall_timeout = 60                # seconds without a byte from a provider: give up

    [kernel]                          # the per-session Python kernel
    timeout_seconds = 30
    cpu_seconds = 60                  # CPU time per call; 0: no cap

    [sandbox]                         # how the kernel and MCP servers run (docs/security.md)
    enabled = true                    # false (or PARLEY_SANDBOX=off): unsandboxed
    pids_max = 1024                   # processes per child (a pids cgroup); 0: no cap
    kernel_network = false            # the Python kernel may use the network
    command_network = false           # the model's shell commands (run_command) may
    mcp_network = ["fetch"]           # MCP servers (by name; "*": all) that may
    writable = ["~/.npm"]             # directories children may write besides the workspace
    hidden = ["~/.config/secrets"]    # unreadable to children too, besides ~/.ssh, ~/.aws, ...
    env = ["JIRA_URL"]                # variables children get besides PATH, HOME, LANG, ...
    unix_sockets = false              # true: children may open Unix sockets (ssh-agent too)

    [commands]                        # the model's shell commands (run_command)
    timeout_seconds = 120             # a call's default
    max_timeout_seconds = 600         # the most a call may ask for

    [checkpoints]                     # /undo's snapshots of every root, around writing calls
    ignore = ["build/", "*.log"]      # left out besides .gitignore's (the undo report says so)
    max_turn_megabytes = 256          # new content a turn keeps; past it: listed, not covered

    [chat]                            # `parley chat`
    store = false                     # keep no chat's session (as --no-store; --store keeps one)

    [providers.lmstudio]              # any OpenAI-compatible server
    kind = "openai"
    base_url = "http://localhost:1234/v1"
    api_key_env = ""                  # none needed
    stall_timeout = 300               # a slow local model: overrides the one above
    prompt_cache_key = false          # send OpenAI's prompt_cache_key (on for `openai` only)
    continue_streamed = false         # hybrid: continue the streamed text, in the server's form:
                                      # "vllm", "prefill" (llama.cpp, Ollama) or "deepseek"; true:
                                      # the preset's (on: vllm, llamacpp, ollama, deepseek)

    [models."ollama:qwen3"]
    context_window = 32768
    tool_format = "text"              # the model has no native tool calling
    think_tags = true                 # <think>…</think> in its text is reasoning
    vision = false                    # it takes images (default: known vision models do)

    [models."anthropic:claude-sonnet-4-5"]
    thinking_budget = 8192            # extended thinking from the start (the level `medium`)
    thinking = true                   # it takes a thinking level (default: known models do)

    [budget]                          # USD; a turn past a budget does not start
    session_usd = 2.0                 # per session (each session's `budget` option overrides)
    day_usd = 10.0                    # all sessions together, since local midnight

    [prices."openai:gpt-4.1"]         # USD per million tokens
    input = 2.0
    output = 8.0
    cached_read = 0.5                 # cache reads (default: the input price)
    cached_write = 2.0                # cache writes (Anthropic's; default: the input price)
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from parley.config_file import (
    DEFAULT_STALL_TIMEOUT,
    ChatTable,
    CheckpointsTable,
    ConfigFile,
    ConfigFileError,
    ContinuationForm,
    ModelTable,
    ProviderTable,
    structure_config,
)
from parley.core.context_windows import known_context_window
from parley.core.setting_types import CommandsTable, KernelTable
from parley.core.thought_levels import (
    LEVELS,
    Thinking,
    ThinkingStyle,
    ThoughtLevel,
    nearest_level,
    thinking_of,
)
from parley.core.usage import DEFAULT_PRICES, Price
from parley.core.wire_kinds import WIRE_KINDS, thinks_by_default
from parley.sandbox import SandboxSettings

FALLBACK_MODEL = "openai:gpt-4.1-mini"


class ConfigError(Exception):
    """The configuration file cannot be used; the message says where and why."""


@attrs.frozen
class ProviderConfig:
    name: str
    kind: str  # "openai" (any OpenAI-compatible server) or "anthropic"
    base_url: str | None = None
    api_key_env: str | None = None  # None or "": the server needs no key
    default_api_key: str | None = None  # what to send when no key is needed (local servers)
    max_retries: int = 2  # the SDKs' retries, and a stream's that breaks off before any output
    timeout_seconds: float = 600.0  # connecting and sending a request
    stall_timeout: float = DEFAULT_STALL_TIMEOUT
    # Send OpenAI's `prompt_cache_key` (the session's, hashed): on for the openai preset;
    # other OpenAI-compatible servers may refuse the unknown field.
    prompt_cache_key: bool = False
    # Hybrid rounds: the synchronous call continues the text already streamed instead of
    # generating it again, in the form this server understands (None: it cannot, the call
    # is a full one). On for the presets whose servers can; OpenAI and Anthropic cannot.
    continue_streamed: ContinuationForm | None = None


# The presets for local servers, whose models often reason inline in <think> tags.
LOCAL_PRESETS = ("ollama", "llamacpp", "vllm")


def _think_tags_by_default(model_id: str) -> bool:
    return model_id.partition(":")[0] in LOCAL_PRESETS


# Models known to take images, by the model's name (after `provider:`, and after the last
# `/` of a router's name such as `openai/gpt-4o`). A model's `vision` setting overrides this.
_VISION_MODELS = re.compile(
    r"""
      (chatgpt-)?gpt-4o.* | gpt-4\.1.* | gpt-4\.5.* | gpt-5.* | gpt-4-turbo.* | gpt-4-vision.*
    | o1(-pro)?(-\d{4}-\d{2}-\d{2})? | o3(-pro)?(-\d{4}-\d{2}-\d{2})? | o4-mini.*
    | claude-3.* | claude-[a-z]+-[4-9].*
    """,
    re.VERBOSE,
)


def _vision_by_default(model_id: str) -> bool:
    name = model_id.partition(":")[2].rsplit("/", 1)[-1].lower()
    return _VISION_MODELS.fullmatch(name) is not None


@attrs.frozen
class ModelConfig:
    id: str  # "provider:model"
    context_window: int | None = None
    tool_format: str = "native"  # or "text" (issue: local models without native tools)
    max_tokens: int | None = None
    thinking_budget: int | None = None  # Anthropic extended thinking
    # <think>/<thinking> sections in the reply's text are reasoning (on for local presets).
    think_tags: bool = attrs.field(
        default=attrs.Factory(lambda model: _think_tags_by_default(model.id), takes_self=True)
    )
    vision: bool | None = None  # it takes images; None: as `_VISION_MODELS` says
    # It takes a thinking level; None: a configured `thinking_budget` or the known models say.
    thinking: bool | None = None


@attrs.frozen
class Budget:
    """config.toml's `[budget]`, in US dollars; None: no limit."""

    session_usd: float | None = None  # a session's default (its `budget` option overrides)
    day_usd: float | None = None  # every session's counted calls since local midnight


@attrs.frozen
class Settings:
    home: Path  # where the database lives
    default_model: str
    providers: Mapping[str, ProviderConfig]
    models: Mapping[str, ModelConfig]
    prices: Mapping[str, Price]
    max_turn_requests: int = 25
    tool_timeout_seconds: float = 120.0  # editor tools; the Python kernel has its own
    mcp_start_timeout_seconds: float = 10.0  # an MCP server's start, up to its tools listed
    kernel: KernelTable = attrs.field(factory=KernelTable)  # the kernel's: server.py
    sandbox: SandboxSettings = attrs.field(factory=SandboxSettings)
    commands: CommandsTable = attrs.field(factory=CommandsTable)  # run_command's: server.py
    checkpoints: CheckpointsTable = attrs.field(factory=CheckpointsTable)  # agent/snapshots.py
    chat: ChatTable = attrs.field(factory=ChatTable)  # `parley chat`'s defaults
    budget: Budget = attrs.field(factory=Budget)
    environ: Mapping[str, str] = attrs.field(factory=dict, repr=False)
    # The share of a model's context window a request may fill before it is compacted.
    compaction_threshold: float = 0.8

    def secret_env_names(self) -> tuple[str, ...]:
        """The variables that hold the providers' keys, whatever their names."""
        return tuple(p.api_key_env for p in self.providers.values() if p.api_key_env)

    def api_key(self, provider: ProviderConfig) -> str | None:
        if not provider.api_key_env:
            return provider.default_api_key
        return self.environ.get(provider.api_key_env) or None

    def model_config(self, model_id: str) -> ModelConfig:
        return self.models.get(model_id) or ModelConfig(id=model_id)

    def takes_images(self, model_id: str) -> bool:
        """Whether the model can be sent images: its `vision` setting, else the built-in
        rule for well-known vision models."""
        vision = self.model_config(model_id).vision
        return _vision_by_default(model_id) if vision is None else vision

    def thinking_style(self, model_id: str) -> ThinkingStyle | None:
        """How the model's thinking is set (its provider's kind), or None when it takes no
        thinking level: its `thinking` setting, else a configured `thinking_budget`
        (Anthropic), else the built-in rule for well-known thinking models."""
        provider = self.providers.get(model_id.partition(":")[0])
        if provider is None:
            return None
        config = self.model_config(model_id)
        style = WIRE_KINDS[provider.kind].thinking_style
        if config.thinking is not None:
            return style if config.thinking else None
        if style == "budget" and config.thinking_budget:
            return style
        return style if thinks_by_default(model_id, provider.kind) else None

    def thought_levels(self, model_id: str) -> tuple[ThoughtLevel, ...]:
        """The levels a session may choose for the model; () when it has none."""
        style = self.thinking_style(model_id)
        return LEVELS[style] if style else ()

    def default_thought_level(self, model_id: str) -> ThoughtLevel | None:
        """The model's level until the session picks one: its configured `thinking_budget`
        as the nearest level (`off` without one), or `medium` (OpenAI's own default)."""
        style = self.thinking_style(model_id)
        if style == "budget":
            return nearest_level(self.model_config(model_id).thinking_budget)
        return "medium" if style == "effort" else None

    def thinking(self, model_id: str, level: ThoughtLevel | None) -> Thinking:
        """What a request to the model sends for the session's level (None, or a level
        the model does not take: the model's default)."""
        if level not in self.thought_levels(model_id):
            level = None
        configured = self.model_config(model_id).thinking_budget
        return thinking_of(self.thinking_style(model_id), level, configured)

    def context_window(self, model_id: str) -> int | None:
        """The model's window in tokens: config.toml's, else the built-in table's; None
        when neither knows it."""
        return self.model_config(model_id).context_window or known_context_window(model_id)


def _builtin_providers(environ: Mapping[str, str]) -> dict[str, ProviderConfig]:
    ollama_host = environ.get("OLLAMA_HOST", "http://localhost:11434")
    if "://" not in ollama_host:
        ollama_host = f"http://{ollama_host}"
    return {
        "openai": ProviderConfig(
            "openai",
            "openai",
            environ.get("OPENAI_BASE_URL") or None,
            "OPENAI_API_KEY",
            prompt_cache_key=True,
        ),
        "anthropic": ProviderConfig(
            "anthropic", "anthropic", environ.get("ANTHROPIC_BASE_URL") or None, "ANTHROPIC_API_KEY"
        ),
        "ollama": ProviderConfig(
            "ollama",
            "openai",
            f"{ollama_host.rstrip('/')}/v1",
            None,
            default_api_key="ollama",
            continue_streamed="prefill",
        ),
        "llamacpp": ProviderConfig(
            "llamacpp",
            "openai",
            "http://localhost:8080/v1",
            None,
            default_api_key="llamacpp",
            continue_streamed="prefill",
        ),
        "vllm": ProviderConfig(
            "vllm",
            "openai",
            "http://localhost:8000/v1",
            None,
            default_api_key="vllm",
            continue_streamed="vllm",
        ),
        # DeepSeek's prefix completion is a beta feature: its beta base URL serves it.
        "deepseek": ProviderConfig(
            "deepseek",
            "openai",
            "https://api.deepseek.com/beta",
            "DEEPSEEK_API_KEY",
            continue_streamed="deepseek",
        ),
        # The scripted model of `parley demo`: the CLI starts the fake LLM and says where.
        "demo": ProviderConfig(
            "demo", "openai", environ.get("PARLEY_DEMO_BASE_URL"), None, default_api_key="demo"
        ),
    }


# The models offered by name; their windows are in core/context_windows.py.
_BUILTIN_MODELS = [
    ModelConfig("openai:gpt-4.1"),
    ModelConfig("openai:gpt-4.1-mini"),
    ModelConfig("openai:gpt-4o"),
    ModelConfig("openai:gpt-4o-mini"),
    ModelConfig("anthropic:claude-sonnet-4-5"),
    ModelConfig("anthropic:claude-haiku-4-5"),
    ModelConfig("anthropic:claude-opus-4-1"),
]

# Local servers cost nothing per token.
_LOCAL_PRICES = {f"{name}:*": Price(0.0, 0.0) for name in ("ollama", "llamacpp", "vllm", "demo")}


def config_path(environ: Mapping[str, str]) -> Path:
    if explicit := environ.get("PARLEY_CONFIG"):
        return Path(explicit)
    base = environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "parley" / "config.toml"


def data_home(environ: Mapping[str, str]) -> Path:
    if explicit := environ.get("PARLEY_HOME"):
        return Path(explicit)
    base = environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "parley"


def load_settings(environ: Mapping[str, str] | None = None) -> Settings:
    """The settings: the environment's over config.toml's over the defaults. A file that
    cannot be read, or holds a mistake, is a `ConfigError` naming the key and the mistake."""
    environ = dict(os.environ if environ is None else environ)
    path = config_path(environ)
    table: dict[str, Any] = {}
    if path.exists():
        try:
            table = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
            raise ConfigError(f"Cannot read {path}: {error}") from error
    file = _structured(table, path)
    providers = {
        name: attrs.evolve(provider, stall_timeout=file.stall_timeout)
        for name, provider in _builtin_providers(environ).items()
    }
    for name, entry in file.providers.items():
        providers[name] = _provider(name, entry, providers.get(name), file.stall_timeout)
    return Settings(
        home=data_home(environ),
        default_model=environ.get("PARLEY_MODEL") or file.default_model or FALLBACK_MODEL,
        providers=providers,
        models={
            **{model.id: model for model in _BUILTIN_MODELS},
            **{model_id: _model(model_id, entry) for model_id, entry in file.models.items()},
        },
        prices={
            **DEFAULT_PRICES,
            **_LOCAL_PRICES,
            **{
                model_id: Price(**attrs.asdict(entry, recurse=False))
                for model_id, entry in file.prices.items()
            },
        },
        max_turn_requests=file.max_turn_requests,
        tool_timeout_seconds=file.tool_timeout_seconds,
        mcp_start_timeout_seconds=file.mcp_start_timeout_seconds,
        kernel=file.kernel,
        sandbox=file.sandbox,
        commands=file.commands,
        checkpoints=file.checkpoints,
        chat=file.chat,
        budget=Budget(**attrs.asdict(file.budget, recurse=False)),
        environ=environ,
        compaction_threshold=file.compaction.threshold,
    )


def _structured(table: dict[str, Any], path: Path) -> ConfigFile:
    try:
        return structure_config(table)
    except ConfigFileError as error:
        raise ConfigError("\n".join(f"{path}: {mistake}" for mistake in error.mistakes)) from error


def _given(entry: ProviderTable | ModelTable) -> dict[str, Any]:
    """The keys a table gives (the file has no null: None is a key left out)."""
    return {
        key: value for key, value in attrs.asdict(entry, recurse=False).items() if value is not None
    }


def _provider(
    name: str, entry: ProviderTable, preset: ProviderConfig | None, stall_timeout: float
) -> ProviderConfig:
    """[providers.NAME] over its preset (or over an OpenAI-compatible server's defaults)."""
    base = preset or ProviderConfig(
        name, "openai", default_api_key=name, stall_timeout=stall_timeout
    )
    given = _given(entry)
    continuation = given.pop("continue_streamed", None)
    if continuation is not None:
        # true (what it was before it named a form) is the preset's form, or vLLM's, the
        # form `true` always sent; false is none.
        given["continue_streamed"] = (
            (base.continue_streamed or "vllm") if continuation is True else continuation or None
        )
    return attrs.evolve(base, **given)


def _model(model_id: str, entry: ModelTable) -> ModelConfig:
    return ModelConfig(id=model_id, **_given(entry))
