"""One export format for every client: `_parley/session/export` and `parley export` give the
same Markdown, with the messages' own headings nested under the turn's."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import server_env
from hypothesis import given
from hypothesis import strategies as st
from parley.agent.export import nested_headings
from parley.client import ParleyClient
from parley.fakellm import FakeLLM, Reply
from pygls.exceptions import JsonRpcException
from test_cli import run_parley

ANSWER = "# Summary\n\nShort.\n\n## Details\n\n```python\n# not a heading\n```\n\n####### seven"


def test_headings_move_two_levels_down_outside_code() -> None:
    assert nested_headings(ANSWER) == (
        "### Summary\n\nShort.\n\n#### Details\n\n```python\n# not a heading\n```\n\n####### seven"
    )
    assert nested_headings("##### five\n###### six") == "###### five\n###### six"
    assert nested_headings("   # indented\n    # code") == "   ### indented\n    # code"
    assert nested_headings("#hashtag") == "#hashtag"


MARKDOWN_LINE = st.one_of(
    st.sampled_from(["```", "~~~", "````", "# h", "## h", "###### h", "#", "  # x", "text"]),
    st.text(alphabet="#`~ ab\t", max_size=12),
)


@given(st.lists(MARKDOWN_LINE, max_size=30))
def test_no_heading_of_a_message_reaches_a_speakers_level(lines: list[str]) -> None:
    """Whatever a message holds, none of its headings outside code is at `#` or `##` any
    more (they would end the turn's section), and only headings changed."""
    text = "\n".join(lines)
    nested = nested_headings(text)
    assert len(nested.split("\n")) == len(text.split("\n"))
    fence: str | None = None
    for before, after in zip(text.split("\n"), nested.split("\n"), strict=True):
        opening = re.match(r"^ {0,3}(`{3,}|~{3,})", before)
        if fence is not None or opening:
            if fence is None:
                fence = opening.group(1)  # type: ignore[union-attr]
            elif (
                opening and opening.group(1)[0] == fence[0] and len(opening.group(1)) >= len(fence)
            ):
                fence = None
            assert after == before  # inside code: untouched
            continue
        assert not re.match(r"^ {0,3}#{1,2}(?=[ \t]|$)", after), (before, after)
        assert after.replace("#", "") == before.replace("#", "")


async def test_every_client_gets_the_cli_export(
    start_server, fake: FakeLLM, tmp_path: Path, workspace: Path
) -> None:
    home = tmp_path / "home"
    client: ParleyClient = await start_server(home=home)
    await client.initialize()
    session = await client.new_session(str(workspace))
    fake.set_script([Reply(text=ANSWER)])
    await client.prompt(session, "Sum it up")
    exported = await client.request("_parley/session/export", {"sessionId": session})
    assert exported["format"] == "markdown"
    text = exported["text"]
    assert "\n## You\n\nSum it up\n" in text and "\n## Parley\n\n### Summary\n" in text
    assert "\n#### Details\n" in text and "# not a heading" in text
    assert "1 turn ·" in text and "1 turns" not in text
    cli = run_parley("export", session, env=server_env(fake, home))
    assert cli.stdout == text + "\n"  # print's newline

    as_json = await client.request(
        "_parley/session/export", {"sessionId": session, "format": "json"}
    )
    assert '"role": "assistant"' in as_json["text"]
    for bad in ({"sessionId": "sess_nope"}, {"sessionId": session, "format": "html"}):
        with pytest.raises(JsonRpcException) as refused:
            await client.request("_parley/session/export", bad)
        assert refused.value.code in (-32002, -32602)
