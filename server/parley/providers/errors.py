"""SDK errors turned into `ProviderError`s a person can act on.

The openai and anthropic SDKs share one exception design (status errors carry
`status_code` and the parsed error `body`; timeouts and connection failures have their own
classes), so one translation serves both, given the SDK's classes (`SDKErrors`). The SDKs
themselves are not imported here: each is imported only with its provider.
"""

from __future__ import annotations

import sys
from types import ModuleType

import attrs

from parley.core.errors import ProviderError
from parley.providers.context_limits import window_in_refusal


@attrs.frozen
class SDKErrors:
    """An SDK's exception classes, by what they mean."""

    base: type[Exception]  # every error the SDK raises
    status: type[Exception]  # the provider answered an HTTP error: `status_code`, `body`
    timeout: type[Exception]  # no answer in time (the SDKs make it a connection error too)
    connection: type[Exception]  # the provider could not be reached, or the connection broke

    @classmethod
    def of(cls, sdk: ModuleType, base: type[Exception]) -> SDKErrors:
        """The classes of an SDK made like openai's (anthropic's is): its base error, and
        `APIStatusError`, `APITimeoutError`, `APIConnectionError`."""
        return cls(
            base=base,
            status=sdk.APIStatusError,
            timeout=sdk.APITimeoutError,
            connection=sdk.APIConnectionError,
        )


_STATUS_KINDS: dict[int, tuple[str, str]] = {
    400: ("invalid_request", "The request was refused; the message above says why."),
    401: ("authentication", "Check the API key configured for this provider."),
    403: ("permission_denied", "This API key may not use this model."),
    404: ("not_found", "Check the model name."),
    413: ("request_too_large", "The conversation is too long for this model."),
    429: ("rate_limit", "Wait a little, or switch to another model."),
    529: ("overloaded", "The provider is overloaded; try again shortly."),
}


def provider_error(name: str, error: Exception, sdk: SDKErrors) -> ProviderError:
    status = getattr(error, "status_code", None) if isinstance(error, sdk.status) else None
    if isinstance(status, int) and status >= 400:
        detail = _error_message(getattr(error, "body", None)) or str(error)
        kind, hint = _STATUS_KINDS.get(
            status, ("server_error" if status >= 500 else "invalid_request", "")
        )
        retryable = status in (408, 409, 429) or status >= 500
        if retryable:
            hint = f"Still failing after retries. {hint or 'Try again in a moment.'}"
        body = getattr(error, "body", None)
        too_long = _context_exceeded(body, detail)
        return ProviderError(
            f"{name} answered {status} ({kind}): {detail} {hint}".strip(),
            provider=name,
            type=kind,
            status=status,
            retryable=retryable,
            context_exceeded=too_long,
            window=window_in_refusal(body, detail) if too_long else None,
        )
    if isinstance(error, sdk.timeout):
        return ProviderError(
            f"{name} did not answer in time. Try again, or raise the timeout in config.toml.",
            provider=name,
            type="timeout",
            retryable=True,
        )
    if isinstance(error, sdk.connection):
        return ProviderError(
            f"Could not reach {name} ({error}). Check its base URL and that it is running.",
            provider=name,
            type="connection",
            retryable=True,
        )
    # An error event inside a 200 stream, or a reply the SDK could not read.
    detail = _error_message(getattr(error, "body", None)) or str(error)
    return ProviderError(
        f"{name} reported an error mid-reply: {detail}",
        provider=name,
        type="stream_error",
        retryable=True,
    )


def stalled(provider: str, seconds: float) -> ProviderError:
    return ProviderError(
        f"{provider} sent nothing for {seconds:g} s, so the request was abandoned. Try again; "
        "if this model is slow to start its answers, raise stall_timeout in config.toml.",
        provider=provider,
        type="stalled",
        retryable=True,
    )


def read_timed_out(error: BaseException) -> bool:
    """Whether `error` comes from httpx2's read timeout (the stall timeout), raised as it is
    or wrapped by an SDK (and then by `ProviderError`)."""
    httpx2 = sys.modules.get("httpx2")  # imported with the SDKs: without it, no such error
    if httpx2 is None:
        return False
    seen: BaseException | None = error
    for _ in range(8):  # a cause chain is short; a cycle must not loop forever
        if seen is None:
            return False
        if isinstance(seen, httpx2.ReadTimeout):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def stream_interrupted(name: str, error: BaseException) -> ProviderError:
    return ProviderError(
        f"The connection to {name} broke off mid-reply ({type(error).__name__}: {error}). "
        "Try again.",
        provider=name,
        type="stream_interrupted",
        retryable=True,
    )


# How providers say a request is longer than the model's window: OpenAI's error code,
# llama.cpp's error type, and the messages of OpenAI, Anthropic ("prompt is too long", "exceed
# context limit"), llama.cpp ("exceeds the available context size", which Ollama quotes),
# vLLM ("maximum context length", and V1's "maximum model length") and other servers.
_CONTEXT_EXCEEDED_CODES = {"context_length_exceeded", "string_above_max_length"}
_CONTEXT_EXCEEDED_TYPES = {"exceed_context_size_error"}
_CONTEXT_EXCEEDED_WORDS = (
    "context_length_exceeded",
    "exceed_context_size_error",
    "prompt is too long",
    "maximum context length",
    "maximum model length",  # vLLM V1: "… longer than the maximum model length of N"
    "context length",
    "context window",
    "context size",
    "context limit",
    "too many tokens",
)


def _context_exceeded(body: object, detail: str) -> bool:
    inner = body.get("error", body) if isinstance(body, dict) else None
    if isinstance(inner, dict) and (
        str(inner.get("code")) in _CONTEXT_EXCEEDED_CODES
        or str(inner.get("type")) in _CONTEXT_EXCEEDED_TYPES
    ):
        return True
    lowered = detail.lower()
    return any(words in lowered for words in _CONTEXT_EXCEEDED_WORDS)


def _error_message(body: object) -> str | None:
    if not isinstance(body, dict):
        return None
    inner = body.get("error", body)
    if isinstance(inner, dict) and isinstance(inner.get("message"), str):
        return inner["message"]
    message = body.get("message")
    return message if isinstance(message, str) else None
