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
    mcp_network = ["fetch"]           # MCP servers (by name; "*": all) that may
    writable = ["~/.npm"]             # directories children may write besides the workspace
    hidden = ["~/.config/secrets"]    # unreadable to children too, besides ~/.ssh, ~/.aws, ...

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
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal, get_args

import attrs

from parley.core.context_windows import known_context_window
from parley.core.thought_levels import (
    LEVELS,
    Thinking,
    ThinkingStyle,
    ThoughtLevel,
    nearest_level,
    thinking_of,
    thinks_by_default,
)
from parley.core.usage import DEFAULT_PRICES, Price
from parley.sandbox import SandboxSettings
from parley.tools.kernel import KernelSettings

FALLBACK_MODEL = "openai:gpt-4.1-mini"
# Seconds a provider may send nothing (no header, no chunk, no byte of a synchronous answer)
# before the request is abandoned; a synchronous call sends nothing until its reply is whole.
DEFAULT_STALL_TIMEOUT = 60.0


# How a server is asked to continue a partial assistant message (docs/local-models.md):
# "vllm": a trailing assistant message with `continue_final_message` and no generation
# prompt; "prefill": a trailing assistant message alone (llama.cpp's server, Ollama);
# "deepseek": a trailing assistant message marked `prefix` (DeepSeek's beta API).
ContinuationForm = Literal["vllm", "prefill", "deepseek"]
CONTINUATION_FORMS: tuple[ContinuationForm, ...] = get_args(ContinuationForm)


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
    kernel: KernelSettings = attrs.field(factory=KernelSettings)
    sandbox: SandboxSettings = attrs.field(factory=SandboxSettings)
    budget: Budget = attrs.field(factory=Budget)
    environ: Mapping[str, str] = attrs.field(factory=dict, repr=False)
    # The share of a model's context window a request may fill before it is compacted.
    compaction_threshold: float = 0.8

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
        style: ThinkingStyle = "budget" if provider.kind == "anthropic" else "effort"
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
    environ = dict(os.environ if environ is None else environ)
    path = config_path(environ)
    table: dict[str, Any] = {}
    if path.exists():
        try:
            table = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError) as error:
            raise ConfigError(f"Cannot read {path}: {error}") from error

    stall_timeout = _seconds(table, "stall_timeout", DEFAULT_STALL_TIMEOUT, path)
    providers = {
        name: attrs.evolve(provider, stall_timeout=stall_timeout)
        for name, provider in _builtin_providers(environ).items()
    }
    for name, entry in table.get("providers", {}).items():
        base = providers.get(name)
        kind = entry.get("kind", base.kind if base else "openai")
        if kind not in ("openai", "anthropic"):
            raise ConfigError(f"{path}: providers.{name}.kind must be 'openai' or 'anthropic'")
        providers[name] = ProviderConfig(
            name=name,
            kind=kind,
            base_url=entry.get("base_url", base.base_url if base else None),
            api_key_env=entry.get("api_key_env", base.api_key_env if base else None),
            default_api_key=entry.get("default_api_key", base.default_api_key if base else name),
            max_retries=int(entry.get("max_retries", 2)),
            timeout_seconds=float(entry.get("timeout_seconds", 600.0)),
            stall_timeout=_seconds(
                entry, "stall_timeout", stall_timeout, path, f"providers.{name}."
            ),
            prompt_cache_key=bool(
                entry.get("prompt_cache_key", base.prompt_cache_key if base else False)
            ),
            continue_streamed=_continuation_form(entry, base, path, name),
        )

    models = {model.id: model for model in _BUILTIN_MODELS}
    for model_id, entry in table.get("models", {}).items():
        if ":" not in model_id:
            raise ConfigError(f"{path}: model {model_id!r} must be named 'provider:model'")
        tool_format = entry.get("tool_format", "native")
        if tool_format not in ("native", "text"):
            raise ConfigError(f"{path}: models.{model_id}.tool_format must be 'native' or 'text'")
        think_tags = entry.get("think_tags", _think_tags_by_default(model_id))
        if not isinstance(think_tags, bool):
            raise ConfigError(f"{path}: models.{model_id}.think_tags must be true or false")
        vision = entry.get("vision")
        if vision is not None and not isinstance(vision, bool):
            raise ConfigError(f"{path}: models.{model_id}.vision must be true or false")
        thinking = entry.get("thinking")
        if thinking is not None and not isinstance(thinking, bool):
            raise ConfigError(f"{path}: models.{model_id}.thinking must be true or false")
        thinking_budget = entry.get("thinking_budget")
        if thinking_budget is not None and (
            isinstance(thinking_budget, bool)
            or not isinstance(thinking_budget, int)
            or thinking_budget < 0
        ):
            raise ConfigError(
                f"{path}: models.{model_id}.thinking_budget must be a number of tokens"
            )
        context_window = entry.get("context_window")
        if context_window is not None and (
            isinstance(context_window, bool)
            or not isinstance(context_window, int)
            or context_window <= 0
        ):
            raise ConfigError(
                f"{path}: models.{model_id}.context_window must be a positive number of tokens"
            )
        models[model_id] = ModelConfig(
            id=model_id,
            context_window=context_window,
            tool_format=tool_format,
            max_tokens=entry.get("max_tokens"),
            thinking_budget=thinking_budget,
            think_tags=think_tags,
            vision=vision,
            thinking=thinking,
        )

    prices = {**DEFAULT_PRICES, **_LOCAL_PRICES}
    for model_id, entry in table.get("prices", {}).items():
        try:
            prices[model_id] = Price(
                input=float(entry["input"]),
                output=float(entry["output"]),
                cached_read=entry.get("cached_read"),
                cached_write=entry.get("cached_write"),
            )
        except (KeyError, TypeError, ValueError) as error:
            raise ConfigError(
                f"{path}: prices.{model_id} needs numbers input and output"
            ) from error

    default_model = environ.get("PARLEY_MODEL") or table.get("default_model") or FALLBACK_MODEL
    sandbox = sandbox_settings(table.get("sandbox", {}), path)
    return Settings(
        home=data_home(environ),
        default_model=default_model,
        providers=providers,
        models=models,
        prices=prices,
        max_turn_requests=int(table.get("max_turn_requests", 25)),
        tool_timeout_seconds=float(table.get("tool_timeout_seconds", 120.0)),
        mcp_start_timeout_seconds=_seconds(table, "mcp_start_timeout_seconds", 10.0, path),
        kernel=attrs.evolve(
            _kernel_settings(table.get("kernel", {}), path, providers.values()), sandbox=sandbox
        ),
        sandbox=sandbox,
        budget=_budget(table.get("budget", {}), path),
        environ=environ,
        compaction_threshold=_compaction_threshold(table.get("compaction", {}), path),
    )


def _continuation_form(
    entry: Mapping[str, Any], base: ProviderConfig | None, path: Path, name: str
) -> ContinuationForm | None:
    """`continue_streamed`: a form's name, or false; true (what it was before it named a
    form) is the preset's form, or vLLM's, the form `true` always sent."""
    if "continue_streamed" not in entry:
        return base.continue_streamed if base else None
    value = entry["continue_streamed"]
    if value is False:
        return None
    if value is True:
        return (base.continue_streamed if base else None) or "vllm"
    if value in CONTINUATION_FORMS:
        return value  # type: ignore[no-any-return]
    forms = ", ".join(f'"{form}"' for form in CONTINUATION_FORMS)
    raise ConfigError(f"{path}: providers.{name}.continue_streamed must be {forms}, or false")


def _compaction_threshold(table: Mapping[str, Any], path: Path) -> float:
    value = table.get("threshold", 0.8)
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 1:
        raise ConfigError(f"{path}: compaction.threshold must be a share of the window, 0 to 1")
    return float(value)


def _seconds(
    table: Mapping[str, Any], key: str, default: float, path: Path, where: str = ""
) -> float:
    value = table.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ConfigError(f"{path}: {where}{key} must be a positive number of seconds")
    return float(value)


def _budget(entry: Any, path: Path) -> Budget:
    """[budget] session_usd = 2.0, day_usd = 10.0: positive numbers of US dollars."""
    if not isinstance(entry, dict):
        raise ConfigError(f"{path}: [budget] must be a table (session_usd, day_usd)")
    unknown = sorted(set(entry) - {"session_usd", "day_usd"})
    if unknown:
        raise ConfigError(f"{path}: [budget] takes session_usd and day_usd, not {unknown[0]}")
    limits: dict[str, float] = {}
    for key, value in entry.items():
        if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
            raise ConfigError(f"{path}: budget.{key} must be a positive number of US dollars")
        limits[key] = float(value)
    return Budget(**limits)


def _kernel_settings(
    entry: dict[str, Any], path: Path, providers: Iterable[ProviderConfig]
) -> KernelSettings:
    """[kernel] python = "/usr/bin/python3", timeout_seconds = 30, output_limit = 20000,
    cpu_seconds = 60. The kernel never sees the providers' key variables."""
    try:
        return KernelSettings(
            python=entry.get("python"),
            timeout_seconds=float(entry.get("timeout_seconds", 30.0)),
            output_limit=int(entry.get("output_limit", 20_000)),
            memory_limit_bytes=entry.get("memory_limit_bytes", 4 * 1024**3),
            cpu_seconds=float(entry.get("cpu_seconds", 60.0)) or None,
            secret_env_names=tuple(p.api_key_env for p in providers if p.api_key_env),
        )
    except (TypeError, ValueError) as error:
        raise ConfigError(f"{path}: [kernel] {error}") from error


def sandbox_settings(entry: Any, path: Path) -> SandboxSettings:
    """[sandbox] enabled = true, pids_max = 1024, kernel_network = false, mcp_network = [],
    writable = [], hidden = []."""
    if not isinstance(entry, dict):
        raise ConfigError(f"{path}: [sandbox] must be a table")
    known = {"enabled", "pids_max", "kernel_network", "mcp_network", "writable", "hidden"}
    unknown = sorted(set(entry) - known)
    if unknown:
        raise ConfigError(f"{path}: [sandbox] has no setting {unknown[0]}")
    for key in ("enabled", "kernel_network"):
        if not isinstance(entry.get(key, False), bool):
            raise ConfigError(f"{path}: sandbox.{key} must be true or false")
    pids_max = entry.get("pids_max", 1024)
    if isinstance(pids_max, bool) or not isinstance(pids_max, int) or pids_max < 0:
        raise ConfigError(f"{path}: sandbox.pids_max must be a number of processes (0: no cap)")
    servers = entry.get("mcp_network", [])
    if not isinstance(servers, list) or not all(isinstance(name, str) for name in servers):
        raise ConfigError(f"{path}: sandbox.mcp_network must be a list of MCP server names")
    writable = entry.get("writable", [])
    if not isinstance(writable, list) or not all(isinstance(p, str) and p for p in writable):
        raise ConfigError(f"{path}: sandbox.writable must be a list of directories")
    hidden = entry.get("hidden", [])
    if not isinstance(hidden, list) or not all(isinstance(p, str) and p for p in hidden):
        raise ConfigError(f"{path}: sandbox.hidden must be a list of files and directories")
    return SandboxSettings(
        enabled=entry.get("enabled", True),
        pids_max=pids_max,
        kernel_network=entry.get("kernel_network", False),
        mcp_network=tuple(servers),
        writable=tuple(writable),
        hidden=tuple(hidden),
    )
