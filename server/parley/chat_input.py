"""The interactive `parley chat`'s line editor (`prompt_toolkit`): Emacs-style editing, the
history of what was typed kept in Parley's data directory, multi-line input, and the slash
commands the server advertises (`available_commands_update`) completed with Tab.

Enter sends; Alt-Enter (Esc then Enter) starts a new line, and a paste keeps its lines.
Ctrl-C drops the line being typed; at an empty prompt it asks for quitting (`QuitAsked`),
Ctrl-D quits (`EOFError`), as in a shell.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from prompt_toolkit import PromptSession
from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document
from prompt_toolkit.history import FileHistory
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from prompt_toolkit.shortcuts import CompleteStyle

from parley.display import escape_controls

HISTORY_FILE = "chat-history"  # in PARLEY_HOME: what was typed at the interactive chat
PROMPT = "> "
CONTINUATION = "  "  # starts a prompt's second line and the ones after it
MODEL_COMMAND = "model"  # takes a model's id (from `initialize`), completed too
CHOICES_SEPARATOR = "|"  # a command's input hint `ask|accept_edits|plan` lists its choices


class QuitAsked(Exception):
    """Ctrl-C at an empty prompt."""


class SlashCommands(Completer):
    """Completes a slash command's name from what the server advertises, then its argument:
    a model's id for `/model`, one of the choices its hint lists (`ask|accept_edits|plan`)."""

    def __init__(self, models: Iterable[str] = ()) -> None:
        self.commands: list[dict[str, Any]] = []  # as the server sent them (updated live)
        self.models = list(models)

    def advertised(self, commands: Any) -> None:
        """The server's list (`availableCommands`), whatever shape it came in."""
        listed = commands if isinstance(commands, list) else []
        self.commands = [
            c for c in listed if isinstance(c, dict) and isinstance(c.get("name"), str)
        ]

    def choices(self, name: str) -> list[str]:
        """What `/name`'s argument may be, when it is a known list."""
        if name == MODEL_COMMAND:
            return self.models
        for command in self.commands:
            hint = (command.get("input") or {}).get("hint") if command["name"] == name else None
            if isinstance(hint, str) and CHOICES_SEPARATOR in hint:
                return hint.split(CHOICES_SEPARATOR)
        return []

    def get_completions(
        self, document: Document, complete_event: CompleteEvent
    ) -> Iterator[Completion]:
        typed = document.text_before_cursor
        if not typed.startswith("/") or "\n" in typed:
            return
        name, space, argument = typed[1:].partition(" ")
        if not space:
            for command in self.commands:
                if command["name"].startswith(name):
                    yield Completion(
                        f"/{command['name']} ",
                        start_position=-len(typed),
                        display=escape_controls(f"/{command['name']}", one_line=True),
                        display_meta=escape_controls(
                            str(command.get("description") or ""), one_line=True
                        ),
                    )
            return
        for choice in self.choices(name):
            if choice.startswith(argument.lstrip()):
                yield Completion(
                    choice,
                    start_position=-len(argument.lstrip()),
                    display=escape_controls(choice, one_line=True),
                )


def _key_bindings() -> KeyBindings:
    keys = KeyBindings()

    @keys.add("escape", "enter")  # (not Ctrl-J: a line typed ahead ends in it, and is sent)
    def _new_line(event: KeyPressEvent) -> None:
        event.current_buffer.insert_text("\n")

    @keys.add("c-c")
    def _drop_or_quit(event: KeyPressEvent) -> None:
        if event.current_buffer.text:
            event.current_buffer.reset()  # the line is dropped, as a shell drops it
        else:
            event.app.exit(exception=QuitAsked())

    return keys


def line_editor(home: Path, completer: SlashCommands) -> PromptSession[str]:
    """The prompt, its history kept in `home` (Parley's data directory)."""
    return PromptSession(
        history=FileHistory(str(home / HISTORY_FILE)),
        completer=completer,
        complete_while_typing=False,
        complete_style=CompleteStyle.READLINE_LIKE,
        key_bindings=_key_bindings(),
        prompt_continuation=CONTINUATION,
        enable_history_search=False,
        mouse_support=False,
        reserve_space_for_menu=0,  # readline-like: the list is printed above the prompt
    )
