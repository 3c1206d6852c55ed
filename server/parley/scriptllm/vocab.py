"""A small Qwen2 vocabulary: the real tokenizer's byte tokens, its first BPE merges and its
special tokens, fetched once from llama.cpp's source tree (inside the llama-cpp-python sdist
on PyPI) and cached.

A small vocabulary keeps the model's tied embedding matrix small; the tokenizer model
(`gpt2`) and pre-tokenizer (`qwen2`) stay the real ones, so llama.cpp tokenizes and renders
the chat templates exactly as it does for a Qwen model.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

SDIST_VERSION = "0.3.36"
SDIST_NAME = f"llama_cpp_python-{SDIST_VERSION}.tar.gz"
# PyPI's sdist of that version (immutable): a download or a copy that differs is refused.
SDIST_SHA256 = "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"
_IN_SDIST = f"llama_cpp_python-{SDIST_VERSION}/vendor/llama.cpp/models/"
# The files taken from the sdist, by their path under llama.cpp's models/.
VOCAB_FILE = "ggml-vocab-qwen2.gguf"
TEMPLATES = {
    "qwen2.5": "templates/Qwen-Qwen2.5-7B-Instruct.jinja",
    "qwen3": "templates/Qwen-Qwen3-0.6B.jinja",
}
MERGES = 6000
# Qwen2.5/Qwen3's added tokens: control tokens (hidden when detokenized, end generation)
# and user-defined ones (always parsed from text and shown, as the real GGUFs mark them).
CONTROL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
USER_DEFINED_TOKENS = (
    "<tool_call>",
    "</tool_call>",
    "<tool_response>",
    "</tool_response>",
    "<think>",
    "</think>",
)
TOKEN_NORMAL, TOKEN_CONTROL, TOKEN_USER_DEFINED = 1, 3, 4


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "parley" / "scriptllm"


def _download_sdist(into: Path) -> Path:
    """The llama-cpp-python sdist, through pip (so its index and proxy settings apply)."""
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--quiet",
            "--disable-pip-version-check",
            "--no-deps",
            "--no-binary",
            ":all:",
            "--dest",
            str(into),
            f"llama-cpp-python=={SDIST_VERSION}",
        ],
        check=True,
    )
    return into / SDIST_NAME


def _check_digest(sdist: Path) -> None:
    digest = hashlib.sha256()
    with sdist.open("rb") as file:
        while block := file.read(1 << 20):
            digest.update(block)
    if digest.hexdigest() != SDIST_SHA256:
        raise RuntimeError(f"{sdist}: sha256 {digest.hexdigest()}, expected {SDIST_SHA256}")


def source_files() -> Path:
    """The directory holding the vocab GGUF and the templates, fetched on first use."""
    root = cache_dir() / "llama.cpp-models"
    wanted = [VOCAB_FILE, *TEMPLATES.values()]
    if all((root / name).is_file() for name in wanted):
        return root
    cache_dir().mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache_dir()) as scratch:
        sdist = cache_dir() / SDIST_NAME  # a copy put there by hand is used as is
        if not sdist.is_file():
            sdist = _download_sdist(Path(scratch))
        _check_digest(sdist)
        staged = Path(scratch) / "models"
        with tarfile.open(sdist) as archive:
            for name in wanted:
                member = archive.getmember(_IN_SDIST + name)
                extracted = archive.extractfile(member)
                assert extracted is not None, name
                (staged / name).parent.mkdir(parents=True, exist_ok=True)
                (staged / name).write_bytes(extracted.read())
        if root.exists():
            shutil.rmtree(root)
        staged.rename(root)
    return root


def template_text(name: str) -> str:
    return (source_files() / TEMPLATES[name]).read_text()


@dataclass(frozen=True)
class SmallVocab:
    tokens: list[str]
    token_types: list[int]
    merges: list[str]

    def id_of(self, token: str) -> int:
        return self.tokens.index(token)


def byte_alphabet() -> dict[int, str]:
    """GPT-2's byte-level alphabet: the printable character standing for each byte."""
    printable = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAC + 1), *range(0xAE, 0xFF + 1)]
    alphabet = {byte: chr(byte) for byte in printable}
    extra = 0
    for byte in range(256):
        if byte not in alphabet:
            alphabet[byte] = chr(256 + extra)
            extra += 1
    return alphabet


def in_byte_alphabet(text: str) -> str:
    alphabet = byte_alphabet()
    return "".join(alphabet[byte] for byte in text.encode())


def small_vocab(merges: int = MERGES, texts: tuple[str, ...] = ()) -> SmallVocab:
    """The 256 byte tokens, the results of the first `merges` merges plus of every merge
    whose result occurs in one of `texts` (in rank order, each kept only if both parts are
    kept), and the added tokens, numbered in that order.

    Keeping every merge that can apply inside `texts` makes them tokenize exactly as the
    full Qwen vocabulary does (BPE applies merges in rank order; a skipped merge could only
    have made a token that is not a substring of the text)."""
    from gguf import GGUFReader

    reader = GGUFReader(source_files() / VOCAB_FILE)
    all_tokens: list[str] = reader.fields["tokenizer.ggml.tokens"].contents()
    all_merges: list[str] = reader.fields["tokenizer.ggml.merges"].contents()
    tokens = list(all_tokens[:256])  # GPT-2's byte alphabet comes first
    kept = set(tokens)
    merge_list: list[str] = []
    wanted = [in_byte_alphabet(text) for text in texts]
    for rank, merge in enumerate(all_merges):
        left, _, right = merge.partition(" ")
        if rank >= merges and not any(left + right in text for text in wanted):
            continue
        if left not in kept or right not in kept:
            continue
        merge_list.append(merge)
        if left + right not in kept:
            kept.add(left + right)
            tokens.append(left + right)
    types = [TOKEN_NORMAL] * len(tokens)
    for special, kind in [
        *((token, TOKEN_CONTROL) for token in CONTROL_TOKENS),
        *((token, TOKEN_USER_DEFINED) for token in USER_DEFINED_TOKENS),
    ]:
        tokens.append(special)
        types.append(kind)
    return SmallVocab(tokens, types, merge_list)
