"""The images an evaluation in the user's kernel displayed (`display_data` or an
`execute_result` with `image/png` and the like), shown to the user as ACP image blocks in the
tool call's content (docs/tools.md, "The user's own kernel"). The model is sent the text only
(`user_kernel.shown_data` names each image with its size).

A kernel's output is input Parley does not trust: an image is shown only when it passes
`core/images.py`'s checks (a type the editors show, valid base64, its bytes that type's), is
at most `MAX_SHOWN_IMAGE_BYTES`, and among the first `MAX_SHOWN_IMAGES` of the evaluation.
"""

from __future__ import annotations

from typing import Any

from parley.core.conversation import ImageBlock
from parley.core.images import IMAGE_TYPES, InvalidImage, checked_image

MAX_SHOWN_IMAGES = 4  # per evaluation: a loop of plots shows its first ones
MAX_SHOWN_IMAGE_BYTES = 2 * 1024 * 1024  # a plot is tens of kilobytes; a photo is not shown


def shown_images(outputs: list[dict[str, Any]]) -> tuple[ImageBlock, ...]:
    """The images of an evaluation's iopub outputs that may be shown, in their order."""
    images: list[ImageBlock] = []
    for output in outputs:
        data = output.get("data")
        if output.get("msg_type") not in ("execute_result", "display_data"):
            continue
        if not isinstance(data, dict):
            continue
        for media_type in IMAGE_TYPES:
            image = _checked(data.get(media_type), media_type)
            if image is not None and len(images) < MAX_SHOWN_IMAGES:
                images.append(image)
                break  # one picture per output: its best type
    return tuple(images)


def _checked(data: Any, media_type: Any) -> ImageBlock | None:
    # Refused unread when its base64 is longer than the limit's (4 characters per 3 bytes).
    if not isinstance(data, str) or len(data) > (MAX_SHOWN_IMAGE_BYTES + 2) // 3 * 4 + 256:
        return None
    if not isinstance(media_type, str):
        return None
    try:
        image = checked_image(media_type, data, what="an output image")
    except InvalidImage:
        return None
    return image if len(image.data) * 3 // 4 <= MAX_SHOWN_IMAGE_BYTES else None


def image_content(image: ImageBlock) -> dict[str, Any]:
    """An image as one item of a tool call's `content` (ACP's image content block)."""
    return {
        "type": "content",
        "content": {"type": "image", "mimeType": image.media_type, "data": image.data},
    }


def images_shown(items: tuple[dict[str, Any], ...]) -> list[dict[str, Any]]:
    """The image items of a tool call's `content` (`ToolResult.shown_first`), to be stored
    with its result: a replay shows them again."""
    return [item for item in items if _image_of(item) is not None]


def stored_images(items: Any) -> list[dict[str, Any]]:
    """The images a call's stored result says it showed, checked again as a kernel's are
    (a row may have been changed outside Parley): the content items a replay shows."""
    shown: list[dict[str, Any]] = []
    for item in items if isinstance(items, list) else []:
        block = _image_of(item)
        image = None if block is None else _checked(block.get("data"), block.get("mimeType"))
        if image is not None and len(shown) < MAX_SHOWN_IMAGES:
            shown.append(image_content(image))
    return shown


def _image_of(item: Any) -> dict[str, Any] | None:
    block = item.get("content") if isinstance(item, dict) else None
    return block if isinstance(block, dict) and block.get("type") == "image" else None
