"""The error a model provider's failure becomes, whichever layer raises or reports it."""

from __future__ import annotations

from typing import Any

from parley.core.redact import redact


class ProviderError(Exception):
    """A provider failure that survived the SDK's retries, with a message a person can act on.

    The message is redacted here, where every provider error is made: it quotes what the
    provider or a gateway said, which may echo the request's API key, and it goes on to the
    client, the store and the log.
    """

    def __init__(
        self,
        message: str,
        *,
        provider: str,
        type: str,
        status: int | None = None,
        retryable: bool = False,
        context_exceeded: bool = False,
        window: int | None = None,
    ) -> None:
        message = redact(message)
        super().__init__(message)
        self.message = message
        self.provider = provider
        self.type = type
        self.status = status
        self.retryable = retryable
        # The request was longer than the model's context window (compaction and a retry help).
        self.context_exceeded = context_exceeded
        # The context window in tokens that such a refusal named, if it named one.
        self.window = window

    def to_wire_data(self) -> dict[str, Any]:
        data: dict[str, Any] = {"provider": self.provider, "type": self.type}
        data["retryable"] = self.retryable
        if self.status is not None:
            data["status"] = self.status
        return data
