"""A session's conversation in memory: all its messages as one sequence, of which only those
from `offset` on are held — after a compaction, the ones the model still sees. An older one
is read from the store if it is ever asked for (a replay and an export read the store itself).

So a long session, once compacted, costs memory in its recent part only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import overload

from parley.core.conversation import Message

# The messages from the `start`th to before the `stop`th, read from the store.
ReadMessages = Callable[[int, int], list[Message]]


class History(Sequence[Message]):
    def __init__(self, held: Iterable[Message], offset: int = 0, read: ReadMessages | None = None):
        if offset and read is None:
            raise ValueError("a history that does not hold its first messages reads them")
        self._held = list(held)
        self.offset = offset
        self._read = read

    def __len__(self) -> int:
        return self.offset + len(self._held)

    @overload
    def __getitem__(self, index: int) -> Message: ...

    @overload
    def __getitem__(self, index: slice) -> list[Message]: ...

    def __getitem__(self, index: int | slice) -> Message | list[Message]:
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            if step != 1:
                return [self[position] for position in range(start, stop, step)]
            if start >= stop:
                return []
            held = self._held[max(0, start - self.offset) : max(0, stop - self.offset)]
            return held if start >= self.offset else self._older(start, stop) + held
        position = index + len(self) if index < 0 else index
        if not 0 <= position < len(self):
            raise IndexError("history index out of range")
        if position >= self.offset:
            return self._held[position - self.offset]
        return self._older(position, position + 1)[0]

    def __iter__(self) -> Iterator[Message]:
        if self.offset:
            yield from self._older(0, self.offset)
        yield from self._held

    def _older(self, start: int, stop: int) -> list[Message]:
        assert self._read is not None  # an offset comes with a reader (`__init__`)
        return self._read(start, min(stop, self.offset))

    def append(self, message: Message) -> None:
        self._held.append(message)

    def extend(self, messages: Iterable[Message]) -> None:
        self._held.extend(messages)

    def hold_from(self, offset: int, read: ReadMessages) -> None:
        """Hold only the messages from `offset` on (a compaction now covers those before)."""
        offset = min(offset, len(self))
        if offset > self.offset:
            del self._held[: offset - self.offset]
            self.offset = offset
            self._read = read

    @property
    def held(self) -> Sequence[Message]:
        """The messages held in memory (from `offset` on)."""
        return self._held
