"""From a model id (`provider:model`) to the provider that serves it."""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import threading
from typing import Any

import attrs

from parley.config import ProviderConfig, Settings
from parley.core.errors import ProviderError
from parley.core.off_loop import collector_paused
from parley.core.wire_kinds import WIRE_KINDS
from parley.providers.base import Provider
from parley.providers.text_tools import TextToolProvider, ThinkTagProvider

logger = logging.getLogger(__name__)


@attrs.frozen
class ResolvedModel:
    id: str  # "provider:model"
    provider: Provider
    model: str  # what is sent to the provider


def split_model_id(model_id: str) -> tuple[str, str]:
    provider, sep, model = model_id.partition(":")
    if not sep or not provider or not model:
        raise ValueError(
            f"A model is named 'provider:model' (like 'openai:gpt-4.1'), not {model_id!r}"
        )
    return provider, model


class ProviderRegistry:
    """Builds each provider's SDK client once, on first use, and shares it."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._providers: dict[str, Provider] = {}
        self._preload_done: asyncio.Event | None = None  # set when `preload` has ended
        self._preloading = ""  # the provider whose SDK `preload` imports

    def availability(self, provider_name: str) -> tuple[bool, str | None]:
        config = self._settings.providers.get(provider_name)
        if config is None:
            known = ", ".join(sorted(self._settings.providers))
            return False, f"Unknown provider {provider_name!r}; known: {known}."
        if config.api_key_env and not self._settings.api_key(config):
            return False, f"Set {config.api_key_env} to use {provider_name} models."
        if config.name == "demo" and not config.base_url:
            return (
                False,
                "The demo model runs only under `parley demo` or `parley chat --model demo`.",
            )
        return True, None

    def resolve(self, model_id: str, tool_format: str | None = None) -> ResolvedModel:
        """The provider for `model_id`, reading local models' text as their config says.

        `tool_format` ("native" or "text"), when given, is the session's choice and wins
        over the model's configured one.
        """
        try:
            provider_name, model = split_model_id(model_id)
        except ValueError as error:
            raise ProviderError(str(error), provider="parley", type="invalid_model") from error
        available, reason = self.availability(provider_name)
        if not available:
            raise ProviderError(
                reason or "unavailable", provider=provider_name, type="not_configured"
            )
        provider = self._providers.get(provider_name)
        if provider is None:
            provider = self._providers[provider_name] = self._build(
                self._settings.providers[provider_name]
            )
        model_config = self._settings.model_config(model_id)
        if (tool_format or model_config.tool_format) == "text":
            provider = TextToolProvider(provider, think_tags=model_config.think_tags)
        elif model_config.think_tags:
            provider = ThinkTagProvider(provider)
        return ResolvedModel(model_id, provider, model)

    async def resolved(self, model_id: str, tool_format: str | None = None) -> ResolvedModel:
        """`resolve`, for the event loop: a provider not built yet is built in a thread
        (importing its SDK takes a second; the preload may be importing it right now, and
        the import lock would hold the loop until it is done)."""
        provider_name = model_id.partition(":")[0]
        if self._preload_done is not None and self._preloading == provider_name:
            await self._preload_done.wait()  # its client, rather than a second one
        config = self._settings.providers.get(provider_name)
        if (
            config is not None
            and provider_name not in self._providers
            and self.availability(provider_name)[0]
        ):
            provider = await asyncio.to_thread(self._imported_and_built, config)
            self._providers.setdefault(provider_name, provider)
        return self.resolve(model_id, tool_format)

    def preload(self) -> threading.Thread:
        """In a background thread (started at once): import the default model's SDK and
        build its client, so the first prompt is as quick as the next (the import alone
        takes a second or more). Call it from the event loop's thread; the first request
        that needs this provider (`resolved`) waits for it, nothing else does."""
        loop = asyncio.get_running_loop()
        name = self._preloading = self._settings.default_model.partition(":")[0]
        config = self._settings.providers.get(name)
        done = self._preload_done = asyncio.Event()

        def keep(provider: Provider | None) -> None:
            if provider is not None:  # unless a prompt built one meanwhile (this one unused)
                self._providers.setdefault(name, provider)
            done.set()

        def preload() -> None:
            kind = config.kind if config is not None else "openai"
            provider = None
            try:
                if config is None or not self.availability(name)[0]:
                    with collector_paused():
                        import_sdk(kind)
                else:
                    provider = self._imported_and_built(config)
            except Exception:  # the first prompt does it again, and says what is wrong
                logger.debug("Preloading the %s SDK failed", kind, exc_info=True)
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody waits
                loop.call_soon_threadsafe(keep, provider)

        thread = threading.Thread(target=preload, name="sdk-preload", daemon=True)
        thread.start()
        return thread

    def _imported_and_built(self, config: ProviderConfig) -> Provider:
        """`_build`, its SDK imported first, with the collector paused (`collector_paused`):
        call it in a thread."""
        with collector_paused():
            import_sdk(config.kind)
            return self._build(config)

    def _build(self, config: ProviderConfig) -> Provider:
        api_key = self._settings.api_key(config) or "none"
        model_settings: dict[str, Any] = {
            "name": config.name,
            "api_key": api_key,
            "base_url": config.base_url,
            "max_retries": config.max_retries,
            "timeout": config.timeout_seconds,
            "stall_timeout": config.stall_timeout,
        }
        # The SDKs are imported on first use: they are slow to import, and most sessions
        # use only one of them.
        kind = WIRE_KINDS[config.kind]
        module, _, name = kind.provider.partition(":")
        provider_class = getattr(importlib.import_module(module), name)
        options = {option: getattr(config, option) for option in kind.options}
        return provider_class(**options, **model_settings)

    def model_infos(self) -> list[dict[str, Any]]:
        """`ModelInfo`s for `_parley/models` and `initialize`: configured models, and the
        default model even when it is not listed."""
        ids = list(self._settings.models)
        if self._settings.default_model not in ids:
            ids.insert(0, self._settings.default_model)
        infos = []
        for model_id in ids:
            provider_name = model_id.partition(":")[0]
            available, reason = self.availability(provider_name)
            info: dict[str, Any] = {
                "id": model_id,
                "provider": provider_name,
                "available": available,
                "vision": self._settings.takes_images(model_id),
            }
            window = self._settings.context_window(model_id)
            if window:
                info["contextWindow"] = window
            if reason:
                info["reason"] = reason
            infos.append(info)
        return infos

    async def aclose(self) -> None:
        for provider in self._providers.values():
            await provider.aclose()
        self._providers.clear()


def import_sdk(kind: str) -> None:
    """What the SDK imports (here: in a thread) rather than at its first request (on the
    event loop)."""
    # httpcore makes anyio's first Event at the first request: anyio then imports its
    # asyncio backend (a tenth of a second).
    importlib.import_module("anyio._backends._asyncio")
    wire = WIRE_KINDS[kind]
    for module in (*wire.warm_up, wire.provider.partition(":")[0]):
        importlib.import_module(module)
