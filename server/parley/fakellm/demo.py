"""The scripted model of `parley demo`: it runs the project's tests, reads the failing code,
fixes it with an edit, and runs the tests again. The model is scripted; the commands, the
edit and their output are real (the server runs them, sandboxed, in the demo's project)."""

from __future__ import annotations

from pathlib import Path

from parley.fakellm.script import Pacing, Reply, ScriptedToolCall

# A human reading pace: the stream is visibly a stream.
_PACE = Pacing(first_token_delay=0.3, chunks_per_second=40)

DEMO_PROMPT = "The tests fail. Find out why and fix it."
TEST_COMMAND = "python3 -m unittest -v"

GEOMETRY = '''"""Plane shapes."""


def area(width: float, height: float) -> float:
    """The area of a width x height rectangle."""
    return width * height


def perimeter(width: float, height: float) -> float:
    """The perimeter of a width x height rectangle."""
    return width + height
'''

TESTS = """import unittest

import geometry


class RectangleTest(unittest.TestCase):
    def test_area(self):
        self.assertEqual(geometry.area(3, 4), 12)

    def test_perimeter(self):
        self.assertEqual(geometry.perimeter(3, 4), 14)


if __name__ == "__main__":
    unittest.main()
"""

BROKEN_LINE = "    return width + height\n"
FIXED_LINE = "    return 2 * (width + height)\n"


def write_demo_workspace(root: Path) -> Path:
    """The sample project, with its failing test (written again: the demo fixes it)."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "geometry.py").write_text(GEOMETRY)
    (root / "test_geometry.py").write_text(TESTS)
    return root


def demo_script() -> list[Reply]:
    run_tests = ScriptedToolCall("run_command", {"command": TEST_COMMAND})
    return [
        Reply(
            thinking="The user says the tests fail. Run them first to see which and how.",
            text="Let me run the tests first.",
            tool_calls=(run_tests,),
            usage=(420, 38),
            pacing=_PACE,
        ),
        Reply(
            text="`test_perimeter` fails: `perimeter(3, 4)` gives 7, not 14. Let me read it.",
            tool_calls=(ScriptedToolCall("read_file", {"path": "geometry.py"}),),
            usage=(780, 41),
            pacing=_PACE,
        ),
        Reply(
            text="`perimeter` adds each side once; a rectangle has two of each. Fixing it:",
            tool_calls=(
                ScriptedToolCall(
                    "edit_file",
                    {"path": "geometry.py", "old_text": BROKEN_LINE, "new_text": FIXED_LINE},
                ),
            ),
            usage=(1010, 64),
            pacing=_PACE,
        ),
        Reply(
            text="Now the tests again.",
            tool_calls=(run_tests,),
            usage=(1240, 30),
            pacing=_PACE,
        ),
        Reply(
            text=(
                "Fixed. `geometry.perimeter` returned `width + height`, the length of two "
                "sides; a rectangle's perimeter is `2 * (width + height)`, so a 3 by 4 "
                "rectangle has a perimeter of **14**. Both tests pass now."
            ),
            usage=(1460, 58),
            chunk_size=6,
            pacing=_PACE,
        ),
    ]
