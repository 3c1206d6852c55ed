"""ACP's official JSON Schema, and the check of what an agent sends against it.

The schema is `schema/v1/schema.json` of the npm package `@agentclientprotocol/sdk`, installed
by `scripts/install` from `tests/acp-schema/package-lock.json`. Each message the agent sends
is checked twice:

- against the schema type of its method (`x-method` in the schema): a response against the
  `…Response` of the request it answers, a `session/update` against `SessionNotification`, a
  request to the client against its `…Request`, an error against `Error`;
- for fields the schema does not define: the schema leaves its objects open, so a custom field
  at a message's root would validate. Parley's additions belong under `_meta`, so every
  object the schema describes field by field may hold only those fields (`_meta` included).

Methods starting with `_` are ACP extension methods: only their envelope is checked.

A few fields ACP has only in its unstable schema (`schema/v1/schema.unstable.json`, drafts
behind an RFD) are sent at their RFD's place rather than under `_meta`: those named in
`UNSTABLE_FIELDS` are checked against the unstable schema's definition of them, and the
answers to `UNSTABLE_METHODS` against its types; any other field or method outside the
stable schema is still a violation.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cache, cached_property
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError, best_match

SCHEMA_PACKAGE = Path(__file__).parent / "acp-schema/node_modules/@agentclientprotocol/sdk"
SCHEMA_FILE = SCHEMA_PACKAGE / "schema/v1/schema.json"
UNSTABLE_FILE = SCHEMA_PACKAGE / "schema/v1/schema.unstable.json"
# (type, field) of the unstable schema that Parley sends: the end-turn-token-usage RFD's
# `usage` on the prompt's result, the session-fork RFD's capability.
UNSTABLE_FIELDS = frozenset({("PromptResponse", "usage"), ("SessionCapabilities", "fork")})
# Methods only the unstable schema defines that Parley answers: checked against it.
UNSTABLE_METHODS = frozenset({"session/fork"})
ENVELOPE_FIELDS = frozenset({"jsonrpc", "id", "method", "params", "result", "error"})

Schema = dict[str, Any]


@dataclass(frozen=True)
class Violation:
    """A message the agent sent, where in it the schema is not met, and how."""

    message: dict[str, Any]
    path: str
    complaint: str
    method: str | None = None  # the message's method, or that of the request it answers

    def __str__(self) -> str:
        shown = json.dumps(self.message, ensure_ascii=False)
        if len(shown) > 600:
            shown = shown[:600] + "…"
        return f"{self.path}: {self.complaint}\n    in {shown}"


class AcpSchema:
    """The schema's types, found by the method and the side that handles it."""

    def __init__(self, document: Schema, unstable: Schema | None = None) -> None:
        self.document = document
        # The unstable schema, for the fields of it Parley sends (`UNSTABLE_FIELDS`).
        self.unstable = AcpSchema(unstable) if unstable is not None else None
        self.defs: dict[str, Schema] = document["$defs"]
        self._validator = Draft202012Validator(document)
        # (side that handles the method, method) → type name, for each kind of message.
        self._types: dict[tuple[str, str, str], str] = {}
        for name, definition in self.defs.items():
            method, side = definition.get("x-method"), definition.get("x-side")
            for kind in ("Request", "Response", "Notification"):
                if method and name.endswith(kind):
                    self._types[(kind, side, method)] = name

    @classmethod
    def installed(cls) -> AcpSchema:
        if not SCHEMA_FILE.is_file():
            raise FileNotFoundError(
                f"ACP's JSON Schema is missing ({SCHEMA_FILE}): run scripts/install"
            )
        unstable = json.loads(UNSTABLE_FILE.read_text(encoding="utf-8"))
        return cls(json.loads(SCHEMA_FILE.read_text(encoding="utf-8")), unstable)

    @cached_property
    def version(self) -> str:
        return json.loads((SCHEMA_PACKAGE / "package.json").read_text())["version"]

    def type_for(self, kind: str, side: str, method: str) -> str | None:
        """`kind` is Request, Response or Notification; `side` the peer that handles the
        method ("agent" for the client's requests, "client" for the agent's)."""
        return self._types.get((kind, side, method))

    # --- checking one value against one type ------------------------------------------

    def violations(self, type_name: str, instance: Any, path: str) -> Iterator[tuple[str, str]]:
        """(path, complaint) for each way `instance` is not a valid `type_name`."""
        yield from self._violations({"$ref": f"#/$defs/{type_name}"}, instance, path, type_name)

    def _violations(
        self, schema: Schema, instance: Any, path: str, label: str
    ) -> Iterator[tuple[str, str]]:
        for error in self._validator.evolve(schema=schema).iter_errors(instance):
            for cause in _causes(error):
                yield _join(path, cause.absolute_path), f"{cause.message} (schema: {label})"
        yield from self._undefined_fields(instance, schema, path)

    def unstable_violations(
        self, owners: list[str], name: str, value: Any, path: str
    ) -> Iterator[tuple[str, str]] | None:
        """How `value` breaks the unstable schema's field `name` of one of `owners` (types);
        None when Parley sends no such unstable field."""
        owner = next((o for o in owners if (o, name) in UNSTABLE_FIELDS), None)
        if owner is None or self.unstable is None:
            return None
        field = self.unstable.defs[owner]["properties"][name]
        return self.unstable._violations(field, value, path, f"{owner}.{name}, unstable")

    def _undefined_fields(
        self, instance: Any, schema: Schema, path: str
    ) -> Iterator[tuple[str, str]]:
        """Fields of objects the schema spells out that it does not define. Walks the schema
        alongside the value: through `$ref`, `allOf`, and the `anyOf`/`oneOf` options the
        value matches (all of them when it matches none: the type error is reported apart)."""
        applying = self._applying(schema, instance)
        if isinstance(instance, dict):
            yield from self._fields_of(instance, applying, path)
        elif isinstance(instance, list):
            items = [s["items"] for s in applying if isinstance(s.get("items"), dict)]
            if items:
                for index, item in enumerate(instance):
                    yield from self._undefined_fields(item, {"allOf": items}, f"{path}[{index}]")

    def _fields_of(
        self, instance: dict[str, Any], applying: list[Schema], path: str
    ) -> Iterator[tuple[str, str]]:
        defined: dict[str, list[Schema]] = {}
        open_to_any = False
        for schema in applying:
            for name, subschema in schema.get("properties", {}).items():
                defined.setdefault(name, []).append(subschema)
            extra = schema.get("additionalProperties")
            if extra is True or isinstance(extra, dict):
                open_to_any = True  # a map, or a free-form object (`_meta`, `rawInput`)
        if not defined or open_to_any:
            return
        for name, value in instance.items():
            if name == "_meta":
                continue  # ACP's place for additions: anything goes under it
            if name not in defined:
                titles = sorted({_title(s) for s in applying if "properties" in s} - {""})
                unstable = self.unstable_violations(titles, name, value, f"{path}.{name}")
                if unstable is not None:
                    yield from unstable
                    continue
                where = f" of {', '.join(titles)}" if titles else ""
                yield f"{path}.{name}", f"{name!r} is not a field{where} (add it under _meta)"
                continue
            yield from self._undefined_fields(value, {"allOf": defined[name]}, f"{path}.{name}")

    def _applying(self, schema: Any, instance: Any) -> list[Schema]:
        """The schema and every subschema that applies to `instance`, flattened."""
        if not isinstance(schema, dict):
            return []
        found = [schema]
        if "$ref" in schema:
            found += self._applying(self._resolve(schema["$ref"]), instance)
        for subschema in schema.get("allOf", []):
            found += self._applying(subschema, instance)
        for keyword in ("anyOf", "oneOf"):
            options = schema.get(keyword, [])
            matching = [option for option in options if self._is_valid(option, instance)]
            for option in matching or options:
                found += self._applying(option, instance)
        return found

    def _resolve(self, ref: str) -> Schema:
        prefix = "#/$defs/"
        if not ref.startswith(prefix):
            raise ValueError(f"unexpected $ref {ref!r} in ACP's schema")
        return {"title": ref.removeprefix(prefix), **self.defs[ref.removeprefix(prefix)]}

    def _is_valid(self, schema: Schema, instance: Any) -> bool:
        return self._validator.evolve(schema=schema).is_valid(instance)

    # --- checking what an agent sent over a whole connection --------------------------

    def check_agent_messages(
        self, sent_by_client: Iterable[dict[str, Any]], sent_by_agent: Iterable[Any]
    ) -> list[Violation]:
        """Every violation in what the agent sent; the client's messages say which request
        each response answers."""
        methods = {
            message["id"]: message["method"]
            for message in sent_by_client
            if isinstance(message, dict) and "method" in message and "id" in message
        }
        found: list[Violation] = []
        for message in sent_by_agent:
            method = _method_of(message, methods)
            found += [Violation(message, p, c, method) for p, c in self._check(message, methods)]
        return found

    def _check(self, message: Any, methods: dict[Any, str]) -> Iterator[tuple[str, str]]:
        if not isinstance(message, dict):
            yield "$", "not a JSON object (one JSON-RPC message per line)"
            return
        if message.get("jsonrpc") != "2.0":
            yield "jsonrpc", 'must be "2.0"'
        for name in sorted(set(message) - ENVELOPE_FIELDS):
            yield name, f"{name!r} is not a JSON-RPC message field"
        method = message.get("method")
        if isinstance(method, str):
            yield from self._check_call(message, method)
        elif "id" in message:
            yield from self._check_response(message, methods.get(message["id"]))
        else:
            yield "$", "neither a request, a notification nor a response"

    def _check_call(self, message: dict[str, Any], method: str) -> Iterator[tuple[str, str]]:
        """A request or notification from the agent to the client."""
        if method.startswith("_"):
            return  # an extension method: ACP leaves its params to the extension
        kind = "Request" if "id" in message else "Notification"
        type_name = self.type_for(kind, "client", method)
        if type_name is None:
            yield "method", f"ACP defines no {kind.lower()} {method!r} from agent to client"
            return
        yield from self.violations(type_name, message.get("params"), "params")

    def _check_response(
        self, message: dict[str, Any], method: str | None
    ) -> Iterator[tuple[str, str]]:
        if method is None:
            yield "id", "answers no request the client sent"
            return
        if ("result" in message) == ("error" in message):
            yield "$", "a response has exactly one of result and error"
            return
        if "error" in message:
            yield from self.violations("Error", message["error"], "error")
            return
        if method.startswith("_"):
            return
        schema = self.unstable if method in UNSTABLE_METHODS and self.unstable else self
        type_name = schema.type_for("Response", "agent", method)
        if type_name is None:
            yield "id", f"answers {method!r}, which ACP does not define for an agent"
            return
        yield from schema.violations(type_name, message["result"], "result")


def _method_of(message: Any, methods: dict[Any, str]) -> str | None:
    if not isinstance(message, dict):
        return None
    if isinstance(message.get("method"), str):
        return message["method"]
    return methods.get(message.get("id"))


def _causes(error: ValidationError) -> list[ValidationError]:
    """What is wrong, rather than "not valid under any of the given schemas": the errors of
    the one option the value was meant to be (the one its discriminator names, or the only
    one of its type), else jsonschema's best guess."""
    if not error.context:
        return [error]
    options: dict[Any, list[ValidationError]] = {}
    for cause in error.context:
        options.setdefault(cause.relative_schema_path[0], []).append(cause)
    discriminator = error.schema.get("discriminator", {}) if isinstance(error.schema, dict) else {}
    name = discriminator.get("propertyName")
    if name:
        meant = [e for e in options.values() if not any(list(c.path) == [name] for c in e)]
    else:
        meant = [e for e in options.values() if not any(_wrong_type(c) for c in e)]
    if len(meant) == 1:
        return [deeper for cause in meant[0] for deeper in _causes(cause)]
    return [best_match([error])]


def _wrong_type(error: ValidationError) -> bool:
    return error.validator == "type" and not error.path


def _title(schema: Schema) -> str:
    return schema.get("title", "") if isinstance(schema.get("title"), str) else ""


def _join(path: str, parts: Iterable[Any]) -> str:
    for part in parts:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path


@cache
def acp_schema() -> AcpSchema:
    return AcpSchema.installed()
