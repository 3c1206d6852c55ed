"""JSON forms of scripts and recorded requests, for the control endpoints and the CLI.

A script is a JSON list of replies with the attrs field names (snake_case): nested objects
for `pacing`, `fault` and `sync`, `tool_calls` as a list of {name, arguments, id?}, `usage`
as [input, output], `raw_stream`/`raw_json` as file paths. Unknown field names are errors, so
a typo does not silently script the wrong thing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import cattrs

from parley.fakellm.script import RecordedRequest, Reply

_converter = cattrs.Converter(forbid_extra_keys=True)
_converter.register_structure_hook(Path, lambda value, _type: Path(value))
_converter.register_unstructure_hook(Path, str)


def _with_paths_resolved(reply: Reply, base_dir: Path) -> Reply:
    def resolve(path: Path | None) -> Path | None:
        return base_dir / path if path is not None and not path.is_absolute() else path

    return attrs.evolve(
        reply,
        raw_stream=resolve(reply.raw_stream),
        raw_json=resolve(reply.raw_json),
        sync=_with_paths_resolved(reply.sync, base_dir) if reply.sync is not None else None,
    )


def replies_from_json(data: Any, base_dir: Path | None = None) -> list[Reply]:
    """Replies from decoded JSON; relative raw paths are taken relative to `base_dir`.

    Raises `ValueError` with a readable message when the data does not describe replies.
    """
    if not isinstance(data, list):
        raise ValueError("a script must be a JSON list of replies")
    try:
        replies = _converter.structure(data, list[Reply])
    except Exception as error:
        details = "; ".join(str(e) for e in cattrs.transform_error(error))
        raise ValueError(f"invalid script: {details}") from error
    if base_dir is not None:
        replies = [_with_paths_resolved(reply, base_dir) for reply in replies]
    return replies


def recorded_requests_to_json(requests: list[RecordedRequest]) -> list[dict[str, Any]]:
    return [attrs.asdict(request) for request in requests]
