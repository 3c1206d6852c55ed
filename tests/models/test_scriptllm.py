"""The script model's design, checked without llama.cpp: a numpy forward pass written from
llama.cpp's llama graph (RMSNorm, RoPE on adjacent pairs, causal softmax attention scaled by
1/sqrt(head_dim), SwiGLU, tied output) plays every script exactly, whatever precedes it.

(tests/models/test_llamacpp_real.py checks the real server plays the real scripts.)
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from parley.scriptllm.model import (
    FREQ_BASE,
    HEAD_DIM,
    HEADS,
    RMS_EPS,
    ROPE_DIMS,
    Trigger,
    rope_margin,
    script_steps,
    weights,
)
from parley.scriptllm.scripts import Script

IM_START, ASSISTANT, NEWLINE, END = 0, 1, 2, 3
PROMPT_END = [IM_START, ASSISTANT, NEWLINE]
WORDS = range(4, 24)  # what scripts say and prompts hold
TRIGGERS = range(24, 30)
VOCAB = 30


def rms(x: np.ndarray, weight: np.ndarray) -> np.ndarray:
    return x / np.sqrt((x**2).mean(-1, keepdims=True) + RMS_EPS) * weight


def rope(x: np.ndarray) -> np.ndarray:
    """llama.cpp's "normal" RoPE: pairs (2i, 2i+1) of each head turned by position * theta_i."""
    positions = np.arange(x.shape[0])[:, None, None]
    theta = FREQ_BASE ** (-np.arange(ROPE_DIMS // 2) * 2.0 / ROPE_DIMS)
    angle = positions * theta
    even, odd = x[..., 0::2], x[..., 1::2]
    turned = np.empty_like(x)
    turned[..., 0::2] = even * np.cos(angle) - odd * np.sin(angle)
    turned[..., 1::2] = even * np.sin(angle) + odd * np.cos(angle)
    return turned


def predictions(t: dict[str, np.ndarray], tokens: list[int]) -> list[int]:
    """The model's next token after each position (teacher-forced: one causal pass)."""
    embeddings = t["token_embd.weight"]
    x = embeddings[tokens]
    h = rms(x, t["blk.0.attn_norm.weight"])
    length = len(tokens)
    q, k, v = (
        (h @ t[f"blk.0.attn_{name}.weight"].T).reshape(length, HEADS, HEAD_DIM) for name in "qkv"
    )
    q, k = rope(q), rope(k)
    scores = np.einsum("ihd,jhd->hij", q, k) / np.sqrt(HEAD_DIM)
    scores[:, np.triu(np.ones((length, length), bool), 1)] = -np.inf
    attention = np.exp(scores - scores.max(-1, keepdims=True))
    attention /= attention.sum(-1, keepdims=True)
    out = np.einsum("hij,jhd->ihd", attention, v).reshape(length, HEADS * HEAD_DIM)
    x = x + out @ t["blk.0.attn_output.weight"].T
    h = rms(x, t["blk.0.ffn_norm.weight"])
    gate = h @ t["blk.0.ffn_gate.weight"].T
    hidden = gate / (1 + np.exp(-gate)) * (h @ t["blk.0.ffn_up.weight"].T)
    x = x + hidden @ t["blk.0.ffn_down.weight"].T
    logits = rms(x, t["output_norm.weight"]) @ embeddings.T
    ranked = np.sort(logits, axis=-1)
    assert (ranked[:, -1] - ranked[:, -2] > 100).all(), "the next token must win by far"
    return [int(best) for best in np.argmax(logits, axis=-1)]


def next_token(t: dict[str, np.ndarray], tokens: list[int]) -> int:
    return predictions(t, tokens)[-1]


def as_float64(tensors: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {name: tensor.astype(np.float64) for name, tensor in tensors.items()}


def tokenizer(text: str) -> list[int]:
    """Scripts here are written one character per token: chr(id)."""
    prefix = "<|im_start|>assistant\n"
    head = PROMPT_END if text.startswith(prefix) else []
    return head + [ord(char) for char in text.removeprefix(prefix)]


def as_text(tokens: list[int]) -> str:
    return "".join(map(chr, tokens))


def conflicting(sequence: list[int]) -> bool:
    seen: dict[tuple[int, ...], int] = {}
    for i in range(len(sequence) - 3):
        context, following = tuple(sequence[i : i + 3]), sequence[i + 3]
        if seen.setdefault(context, following) != following:
            return True
    return False


script_bodies = st.lists(st.sampled_from(WORDS), min_size=1, max_size=10)


@settings(max_examples=25, deadline=None)
@given(
    bodies=st.lists(script_bodies, min_size=1, max_size=4),
    filler=st.lists(st.sampled_from(WORDS), max_size=40),
    after=st.lists(st.sampled_from(WORDS), max_size=20),
)
def test_the_model_plays_every_script_exactly_after_any_context(
    bodies: list[list[int]], filler: list[int], after: list[int]
) -> None:
    scripts = tuple(
        Script(f"s{index}", None if index == 0 else chr(TRIGGERS[index]), as_text([*body, END]))
        for index, body in enumerate(bodies)
    )
    try:
        steps = script_steps(scripts, tokenizer)
    except ValueError:
        assert any(conflicting([*PROMPT_END, *body, END]) for body in bodies)
        return
    triggers = [Trigger(s.name, ord(s.trigger), 1.0) for s in scripts if s.trigger]
    tensors = as_float64(weights(VOCAB, END, steps, triggers, "s0"))
    for index, body in enumerate(bodies):
        trigger = [TRIGGERS[index]] if index else []
        context = [*filler, *trigger, *after, *PROMPT_END]
        said = predictions(tensors, [*context, *body])[len(context) - 1 :]
        assert said == [*body, END]


def test_the_strongest_trigger_wins_and_off_script_the_message_ends() -> None:
    scripts = (
        Script("plain", None, as_text([4, 5, END])),
        Script("tool", chr(24), as_text([6, 7, END])),
        Script("after", chr(25), as_text([8, 9, END]), key=2.0),
    )
    steps = script_steps(scripts, tokenizer)
    triggers = [Trigger("tool", 24, 1.0), Trigger("after", 25, 2.0)]
    tensors = as_float64(weights(VOCAB, END, steps, triggers, "plain"))
    context = [24, 10, 11, 25, 12, *PROMPT_END]
    assert next_token(tensors, context) == 8
    assert next_token(tensors, [24, *PROMPT_END, 6, 7]) == END
    assert next_token(tensors, [24, *PROMPT_END, 13, 14]) == END  # no step applies


def test_rope_keeps_the_previous_position_far_ahead_of_every_other() -> None:
    assert rope_margin() > 1.5


def test_a_script_that_contradicts_itself_is_refused() -> None:
    # After (4, 5, 6) it would say both 7 and 8.
    looping = Script("plain", None, as_text([4, 5, 6, 7, 4, 5, 6, 8, END]))
    with pytest.raises(ValueError, match="reword the script"):
        script_steps((looping,), tokenizer)
