"""How fast the local-model text parsers go, in chunks per second.

`bench_parsers()` feeds a realistic reply (reasoning, prose with code that has `<` in it, and
tool calls), cut into 4-character chunks as a local model streams it, through each parser.
Run `python -m parley.providers.text_parsers_bench` to print the figures.
"""

from __future__ import annotations

import time

from parley.providers.text_parsers import (
    LocalModelStreamParser,
    TextToolCallParser,
    ThinkTagParser,
)

CHUNK_SIZE = 4  # characters: about one token

# One round of a coding agent's reply; repeated to make the text as long as needed.
SAMPLE_REPLY = """<think>
The user asks why `area()` returns a negative number. I should look at the source first,
then check whether the polygon's points are in clockwise order; if len(points) < 3 the
area is zero anyway. Let me read geometry.area.
</think>
I'll start by reading the function that computes the area, then test it on a square.

```python
def area(points: list[tuple[float, float]]) -> float:
    if len(points) < 3:
        return 0.0
    total = sum(x0 * y1 - x1 * y0 for (x0, y0), (x1, y1) in pairwise(points + points[:1]))
    return total / 2  # negative when the points run clockwise
```

<tool><tool_name>python_source</tool_name><arguments>{"target": "geometry.area"}</arguments></tool>
The shoelace formula gives a signed area: for clockwise points it is negative, which is
exactly what you see. Taking `abs(total) / 2` fixes it; a < b comparisons elsewhere are fine.
<tool>
<tool_name>python_eval</tool_name>
<arguments>{"code": "area([(0, 0), (0, 1), (1, 1), (1, 0)])"}</arguments>
</tool>
"""


def _chunks(n_chunks: int) -> list[str]:
    repeats = n_chunks * CHUNK_SIZE // len(SAMPLE_REPLY) + 1
    text = (SAMPLE_REPLY * repeats)[: n_chunks * CHUNK_SIZE]
    return [text[i : i + CHUNK_SIZE] for i in range(0, len(text), CHUNK_SIZE)]


def bench_parsers(n_chunks: int = 20000) -> dict[str, float]:
    """Chunks per second through each parser, keyed by the parser's class name."""
    chunks = _chunks(n_chunks)
    figures: dict[str, float] = {}
    for parser_class in (ThinkTagParser, TextToolCallParser, LocalModelStreamParser):
        parser = parser_class()
        started = time.perf_counter()
        for chunk in chunks:
            parser.feed(chunk)
        parser.finish()
        elapsed = time.perf_counter() - started
        figures[parser_class.__name__] = len(chunks) / elapsed if elapsed > 0 else float("inf")
    return figures


if __name__ == "__main__":
    for name, chunks_per_second in bench_parsers().items():
        print(f"{name:<24} {chunks_per_second:>12,.0f} chunks/s")
