"""A tiny deterministic "script player" model for a real llama.cpp server, for the tests.

`vocab` fetches a Qwen-family tokenizer (cached), `model` writes a one-layer GGUF whose
hand-set weights replay fixed scripts (`scripts`), `serve` runs it in llama.cpp's own server
(the `xllamacpp` wheel). Used only by the tests and `parley bench`; the server never imports
it.
"""
