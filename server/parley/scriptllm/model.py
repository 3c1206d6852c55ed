"""The script player: a one-layer llama GGUF whose weights are set by hand.

Residual stream (width D_MODEL), every vector a sum of one-hots:
- `cur`: the current token (each script token its own dimension; all others share one),
- `const`: always 1 (so every embedding has the same norm and RMSNorm scales by a constant),
- `prev`: the previous token, written by head 0,
- `flag`: the playing script, written by head 1.

Head 0 attends to the previous position only: its query and key come from `const` in the
rotated (RoPE) dimensions, the key pre-rotated by one position, so q·k peaks at distance 1
(FREQ_BASE is chosen so that no other distance up to MAX_CONTEXT comes near). Its value copies
`cur` into `prev`. Head 1 is position-free: a constant query, a key only on trigger tokens
(the strongest trigger wins), a value that is the trigger's script flag (non-triggers vote
for the default script). The FFN is a lookup table: one SwiGLU neuron per (flag, prev, cur)
fires only when all three match and writes the next token's `cur` dimension, which the tied
output matrix (the embeddings) turns into a logit hundreds above every other token.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from parley.scriptllm import scripts as scripts_module
from parley.scriptllm.scripts import SCRIPTS, Script
from parley.scriptllm.vocab import MERGES, SmallVocab, cache_dir, small_vocab

D_MODEL = 512
HEADS = 3  # the previous token, the one before it, the script flag
HEAD_DIM = 256
# llama.cpp's llama architecture rotates whole heads; a huge base makes the last pairs'
# frequencies so low (~1e-10) that they are position-free for any context.
ROPE_DIMS = HEAD_DIM
FREQ_BASE = 1e10
# Head 0 uses the first PAIRS (fastest) pairs: sum_k cos(m * theta_k) stays below PAIRS by
# rope_margin() (~1.57) for every distance m != 0 up to MAX_CONTEXT.
PAIRS = 16
MAX_CONTEXT = 8192
RMS_EPS = 1e-6
PREV_SCALE = 50.0  # head 0's q/k pair magnitude: a score unit is PREV_SCALE**2 / 16
FLAG_QUERY = 40.0
FLAG_KEY = 40.0  # times the script's key: the score, 100 a unit of key, outweighs any context
GATE = 40.0
DOWN = 10.0
FALLBACK_DOWN = 10.0  # off script: end the message
OUTPUT_SCALE = 50.0

Tokenize = Callable[[str], list[int]]


def rope_thetas() -> np.ndarray:
    return FREQ_BASE ** (-np.arange(PAIRS) * 2.0 / ROPE_DIMS)


def rope_margin(context: int = MAX_CONTEXT) -> float:
    """How far the previous position's score (sum of cosines, PAIRS at best) stands above
    every other distance's, in units of PREV_SCALE**2 / sqrt(HEAD_DIM)."""
    distances = np.arange(-1, context)
    distances = distances[distances != 0]
    sums = np.cos(np.outer(distances, rope_thetas())).sum(axis=1)
    return float(PAIRS - sums.max())


@dataclass
class Layout:
    """Which residual dimension holds what."""

    script_tokens: list[int]  # vocab ids; index i is cur dim i
    flags: list[str]  # script names; the default script's first

    @property
    def other(self) -> int:
        return len(self.script_tokens)

    def cur(self, token: int) -> int:
        return self.script_tokens.index(token) if token in self.script_tokens else self.other

    def back(self, distance: int, token: int) -> int:
        """The dimension of `token` seen `distance` (1 or 2) positions back."""
        return distance * (self.other + 1) + self.cur(token)

    def flag(self, name: str) -> int:
        return 3 * (self.other + 1) + self.flags.index(name)

    @property
    def const(self) -> int:
        return 3 * (self.other + 1) + len(self.flags)


@dataclass(frozen=True)
class Step:
    flag: str
    before: int  # the token two back
    prev: int
    cur: int
    next: int


def script_steps(scripts: tuple[Script, ...], tokenize: Tokenize) -> list[Step]:
    """Every (flag, prev, cur) -> next of every script, from the real tokenizer; fails
    loudly where two scripts' steps would disagree."""
    steps: dict[tuple[str, int, int, int], int] = {}
    for script in scripts:
        prefix = tokenize("<|im_start|>assistant\n")
        tokens = tokenize("<|im_start|>assistant\n" + script.text)
        if tokens[: len(prefix)] != prefix:
            raise ValueError(f"script {script.name}: the prompt's tokens change: {tokens}")
        sequence = tokens[len(prefix) - 3 :]  # from "<|im_start|>", "assistant", "\n"
        for context in zip(sequence, sequence[1:], sequence[2:], sequence[3:], strict=False):
            *seen, following = context
            known = steps.setdefault((script.name, *seen), following)
            if known != following:
                raise ValueError(
                    f"script {script.name}: after tokens {seen} both {known} and "
                    f"{following}: reword the script"
                )
    return [Step(*key, following) for key, following in steps.items()]


def script_triggers(scripts: tuple[Script, ...], tokenize: Tokenize) -> list[Trigger]:
    triggers = []
    for script in scripts:
        if script.trigger is None:
            continue
        tokens = tokenize(script.trigger)
        if len(tokens) != 1:
            raise ValueError(f"trigger {script.trigger!r} is not one token: {tokens}")
        triggers.append(Trigger(script.name, tokens[0], script.key))
    return triggers


@dataclass(frozen=True)
class Trigger:
    script: str
    token: int
    key: float  # the strongest trigger in the context wins


def layout_of(end: int, steps: list[Step], triggers: list[Trigger], default: str) -> Layout:
    used = {end, *(t.token for t in triggers)}
    for step in steps:
        used |= {step.before, step.prev, step.cur, step.next}
    layout = Layout(sorted(used), [default, *sorted(t.script for t in triggers)])
    if layout.other + 1 > HEAD_DIM or layout.const >= D_MODEL:
        raise ValueError(f"too many script tokens ({len(layout.script_tokens)}) for the model")
    return layout


def weights(
    vocab_size: int, end: int, steps: list[Step], triggers: list[Trigger], default: str
) -> dict[str, np.ndarray]:
    """The tensors, in llama.cpp's names, (out, in) shaped. `end` ends a message (and is
    said wherever no script step applies); `default` is the script played without trigger."""
    layout = layout_of(end, steps, triggers, default)
    embeddings = np.zeros((vocab_size, D_MODEL), np.float32)
    embeddings[:, layout.const] = 1.0
    for token in range(vocab_size):
        embeddings[token, layout.cur(token)] = 1.0
    # RMSNorm weights that make each one-hot exactly 1 after the norm: the embedding has two
    # ones, the residual before the FFN five (cur, const, two back, one back, flag).
    return {
        "token_embd.weight": embeddings,
        "blk.0.attn_norm.weight": np.full(D_MODEL, np.sqrt(2 / D_MODEL), np.float32),
        **_attention(layout, triggers),
        "blk.0.ffn_norm.weight": np.full(D_MODEL, np.sqrt(5 / D_MODEL), np.float32),
        **_lookup_table(layout, steps, end),
        "output_norm.weight": np.full(D_MODEL, OUTPUT_SCALE, np.float32),
    }


def _attention(layout: Layout, triggers: list[Trigger]) -> dict[str, np.ndarray]:
    const = layout.const
    q = np.zeros((HEADS * HEAD_DIM, D_MODEL), np.float32)
    k = np.zeros((HEADS * HEAD_DIM, D_MODEL), np.float32)
    v = np.zeros((HEADS * HEAD_DIM, D_MODEL), np.float32)
    o = np.zeros((D_MODEL, HEADS * HEAD_DIM), np.float32)
    # Heads 0 and 1: query (1, 0) per pair; key the same rotated 1 or 2 positions ahead.
    for head, distance in ((0, 1), (1, 2)):
        base = head * HEAD_DIM
        for pair, theta in enumerate(rope_thetas()):
            q[base + 2 * pair, const] = PREV_SCALE
            k[base + 2 * pair, const] = PREV_SCALE * np.cos(distance * theta)
            k[base + 2 * pair + 1, const] = PREV_SCALE * np.sin(distance * theta)
        for token_dim in range(layout.other + 1):
            v[base + token_dim, token_dim] = 1.0
            o[distance * (layout.other + 1) + token_dim, base + token_dim] = 1.0
    # Head 2: its last (position-free) rotary pair.
    flag_head = 2 * HEAD_DIM
    flag_q = flag_head + HEAD_DIM - 2
    q[flag_q, const] = FLAG_QUERY
    value_default = flag_head + 0  # layout.flags[0] is the default script
    v[value_default, const] = 1.0  # non-triggers vote for the default script
    for trigger in triggers:
        k[flag_q, layout.cur(trigger.token)] = FLAG_KEY * trigger.key
        v[value_default, layout.cur(trigger.token)] = -1.0
        v[flag_head + layout.flags.index(trigger.script), layout.cur(trigger.token)] = 1.0
    for index, name in enumerate(layout.flags):
        o[layout.flag(name), flag_head + index] = 1.0
    return {
        "blk.0.attn_q.weight": q,
        "blk.0.attn_k.weight": k,
        "blk.0.attn_v.weight": v,
        "blk.0.attn_output.weight": o,
    }


def _lookup_table(layout: Layout, steps: list[Step], end: int) -> dict[str, np.ndarray]:
    """One SwiGLU neuron per step, firing only when its four inputs all match; one more,
    always on and weaker, says `end` where no step applies."""
    neurons = len(steps) + 1
    gate = np.zeros((neurons, D_MODEL), np.float32)
    up = np.zeros((neurons, D_MODEL), np.float32)
    down = np.zeros((D_MODEL, neurons), np.float32)
    for neuron, step in enumerate(steps):
        gate[neuron, layout.cur(step.cur)] += GATE
        gate[neuron, layout.back(1, step.prev)] += GATE
        gate[neuron, layout.back(2, step.before)] += GATE
        gate[neuron, layout.flag(step.flag)] += GATE
        gate[neuron, layout.const] = -3.5 * GATE
        up[neuron, layout.const] = 1.0
        down[layout.cur(step.next), neuron] = DOWN
    gate[-1, layout.const] = 1.0
    up[-1, layout.const] = 1.0
    down[layout.cur(end), -1] = FALLBACK_DOWN
    return {"blk.0.ffn_gate.weight": gate, "blk.0.ffn_up.weight": up, "blk.0.ffn_down.weight": down}


def write_gguf(path: Path, vocab: SmallVocab, tensors: dict[str, np.ndarray]) -> None:
    import gguf

    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name("parley-scriptllm")
    writer.add_context_length(MAX_CONTEXT)
    writer.add_embedding_length(D_MODEL)
    writer.add_block_count(1)
    writer.add_feed_forward_length(tensors["blk.0.ffn_gate.weight"].shape[0])
    writer.add_head_count(HEADS)
    writer.add_head_count_kv(HEADS)
    writer.add_key_length(HEAD_DIM)
    writer.add_value_length(HEAD_DIM)
    writer.add_rope_dimension_count(ROPE_DIMS)
    writer.add_rope_freq_base(FREQ_BASE)
    writer.add_layer_norm_rms_eps(RMS_EPS)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("qwen2")
    writer.add_token_list(vocab.tokens)
    writer.add_token_types(vocab.token_types)
    writer.add_token_merges(vocab.merges)
    writer.add_bos_token_id(vocab.id_of("<|endoftext|>"))
    writer.add_eos_token_id(vocab.id_of("<|im_end|>"))
    writer.add_pad_token_id(vocab.id_of("<|endoftext|>"))
    writer.add_add_bos_token(False)
    for name, tensor in tensors.items():
        writer.add_tensor(name, tensor)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def _zero_tensors(vocab: SmallVocab) -> dict[str, np.ndarray]:
    """A model of the same shapes that says nothing in particular: for the tokenizer."""
    tensors = weights(len(vocab.tokens), vocab.id_of(scripts_module.END), [], [], "")
    return {name: np.zeros_like(tensor) for name, tensor in tensors.items()}


def _fingerprint() -> str:
    here = Path(__file__).parent
    digest = hashlib.sha256()
    for name in ("model.py", "scripts.py", "vocab.py"):
        digest.update((here / name).read_bytes())
    digest.update(str(MERGES).encode())
    return digest.hexdigest()[:16]


def script_vocab() -> SmallVocab:
    """The small vocabulary, holding every token the full one would use for the scripts."""
    texts = ("<|im_start|>assistant\n", *(s.text for s in SCRIPTS))
    texts += tuple(s.trigger for s in SCRIPTS if s.trigger)
    return small_vocab(texts=texts)


def built_model() -> Path:
    """The script model, built on first use and cached by its builder's source."""
    path = cache_dir() / f"scriptllm-{_fingerprint()}.gguf"
    if path.is_file():
        return path
    vocab = script_vocab()
    cache_dir().mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache_dir()) as scratch:
        tokenizer_model = Path(scratch) / "tokenizer.gguf"
        write_gguf(tokenizer_model, vocab, _zero_tensors(vocab))
        tokenize = ServerTokenizer(tokenizer_model, Path(scratch) / "tokenizer.log")
        try:
            steps = script_steps(SCRIPTS, tokenize)
            triggers = script_triggers(SCRIPTS, tokenize)
        finally:
            tokenize.close()
        default = next(s.name for s in SCRIPTS if s.trigger is None)
        tensors = weights(
            len(vocab.tokens), vocab.id_of(scripts_module.END), steps, triggers, default
        )
        staged = Path(scratch) / "model.gguf"
        write_gguf(staged, vocab, tensors)
        os.replace(staged, path)
    for stale in cache_dir().glob("scriptllm-*.gguf"):
        if stale != path:
            stale.unlink(missing_ok=True)  # built by an older builder
    return path


class ServerTokenizer:
    """llama.cpp's own tokenizer, through a server's POST /tokenize (special tokens parsed)."""

    def __init__(self, model: Path, log: Path) -> None:
        from parley.scriptllm.serve import ScriptServer

        self.server = ScriptServer(model, log, ctx=512)

    def __call__(self, text: str) -> list[int]:
        import httpx

        response = httpx.post(
            f"{self.server.url}/tokenize", json={"content": text, "parse_special": True}
        )
        response.raise_for_status()
        return list(response.json()["tokens"])

    def close(self) -> None:
        self.server.kill()
