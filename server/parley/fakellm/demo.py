"""The scripted model of `parley demo`: it reads a file, runs it in the kernel, answers."""

from __future__ import annotations

from pathlib import Path

from parley.fakellm.script import Pacing, Reply, ScriptedToolCall

# A human reading pace: the stream is visibly a stream.
_PACE = Pacing(first_token_delay=0.3, chunks_per_second=40)

GEOMETRY = '''"""Plane shapes."""


def area(width: float, height: float) -> float:
    """The area of a width x height rectangle."""
    return width * height
'''


def write_demo_workspace(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "geometry.py").write_text(GEOMETRY)
    return root


def demo_script() -> list[Reply]:
    return [
        Reply(
            thinking="The user asks about geometry.area. I should read the source first.",
            text="Let me read `geometry.area` first.",
            tool_calls=(ScriptedToolCall("python_source", {"target": "geometry.area"}),),
            usage=(420, 38),
            pacing=_PACE,
        ),
        Reply(
            text="It returns `width * height`. Let me check it on a 3 by 4 rectangle.",
            tool_calls=(
                ScriptedToolCall("python_eval", {"code": "import geometry\ngeometry.area(3, 4)"}),
            ),
            usage=(610, 45),
            pacing=_PACE,
        ),
        Reply(
            text=(
                "`geometry.area(width, height)` computes the area of a rectangle as "
                "`width * height`, so a 3 by 4 rectangle gives **12**, which is right.\n\n"
                "The signature says it takes and returns floats; ints work too."
            ),
            usage=(780, 52),
            chunk_size=6,
            pacing=_PACE,
        ),
    ]
