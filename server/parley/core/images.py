"""Images a user attaches to a prompt: checked before they are stored or sent to a model.

An image arrives as a media type and base64 data (ACP `image` blocks, and `resource` blobs
that are images). It is taken only when the type is one the providers accept, the data is
valid base64, its first bytes are that type's signature, and it is at most `MAX_IMAGE_BYTES`.
"""

from __future__ import annotations

import base64
import binascii

from parley.core.conversation import ImageBlock

# What OpenAI and Anthropic both take.
IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")
MAX_IMAGE_BYTES = 20 * 1024 * 1024


class InvalidImage(ValueError):
    """An image that cannot be sent; `str()` says why, for the user."""


def sniff_image_type(data: bytes) -> str | None:
    """The media type the bytes' signature shows, among `IMAGE_TYPES`; None for others."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def decode_base64(data: str, what: str) -> bytes:
    """`data` decoded, refusing anything that is not base64 (whitespace aside)."""
    try:
        return base64.b64decode("".join(data.split()), validate=True)
    except (binascii.Error, ValueError) as error:
        raise InvalidImage(f"{what} is not valid base64 ({error})") from error


def checked_image(
    media_type: str, data: str, uri: str | None = None, what: str = "the image"
) -> ImageBlock:
    """The image, once it passes every check (its base64 without whitespace); raises
    `InvalidImage` saying which failed."""
    media_type = normal_media_type(media_type)
    if media_type not in IMAGE_TYPES:
        allowed = ", ".join(kind.removeprefix("image/") for kind in IMAGE_TYPES)
        raise InvalidImage(f"{what} is {media_type!r}; images can be {allowed}")
    # Refuse an oversized image before decoding it: base64 is 4 characters per 3 bytes.
    if len(data) * 3 // 4 > MAX_IMAGE_BYTES + 3:
        raise InvalidImage(_too_large(what, len(data) * 3 // 4))
    raw = decode_base64(data, what)
    if len(raw) > MAX_IMAGE_BYTES:
        raise InvalidImage(_too_large(what, len(raw)))
    found = sniff_image_type(raw)
    if found != media_type:
        shows = f"a {found.removeprefix('image/').upper()} image" if found else "no image"
        raise InvalidImage(f"{what} is said to be {media_type}, but its bytes are {shows}")
    return ImageBlock(media_type, base64.b64encode(raw).decode("ascii"), uri)


def normal_media_type(media_type: str) -> str:
    media_type = media_type.strip().lower()
    return "image/jpeg" if media_type == "image/jpg" else media_type


def _too_large(what: str, size: int) -> str:
    return (
        f"{what} is {size / 1024 / 1024:.1f} MB; images can be at most "
        f"{MAX_IMAGE_BYTES // 1024 // 1024} MB"
    )
