"""Tiny llama-architecture GGUF models for running llama.cpp's speculative decoding on a CPU.

Seeded random weights: what they generate is noise, but llama.cpp loads, tokenizes, drafts and
verifies with them exactly as with a real model, in well under a second per 128 tokens. Writes:

- ``target.gguf``: the target;
- ``draft.gguf``: the target's weights plus seeded noise (``--noise``), so the draft agrees with
  the target on some tokens and not others (intermediate acceptance);
- ``unrelated.gguf``: other weights over the same vocabulary (acceptance near 0%).

The vocabulary is SentencePiece-style (``tokenizer.ggml.model = llama``): ``<unk>``, ``<s>``,
``</s>``, the 256 byte tokens and about 740 pieces. The output rows of the control and byte tokens
are zero, so sampling never picks them and every run generates its full length (no EOS).

    python examples/llamacpp/make_models.py --out-dir /tmp/models [--seed 1] [--noise 0.05]

Needs ``gguf`` and ``numpy`` (the ``engine`` extra).
"""

from __future__ import annotations

import argparse
import string
import sys
from pathlib import Path

import numpy as np

try:
    import gguf
except ImportError:  # pragma: no cover - a message instead of a traceback
    sys.exit("make_models: needs the gguf package: pip install -e '.[engine]'")

VOCAB_SIZE = 1000
HIDDEN = 64
LAYERS = 2
HEADS = 4
FFN = 128
CONTEXT = 1024
UNKNOWN, BOS, EOS = 0, 1, 2
SPACE = "\u2581"  # SentencePiece's word-start marker


def vocabulary(rng: np.random.Generator) -> tuple[list[str], list[float], list[int]]:
    """Tokens, scores and types: control tokens, byte fallback, then pieces."""
    tokens = ["<unk>", "<s>", "</s>"]
    types = [gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL]
    tokens += [f"<0x{byte:02X}>" for byte in range(256)]
    types += [gguf.TokenType.BYTE] * 256
    pieces: list[str] = [SPACE]
    pieces += list(string.ascii_lowercase + string.ascii_uppercase + string.digits + ".,!?'-")
    pieces += [SPACE + letter for letter in string.ascii_lowercase + string.ascii_uppercase]
    seen = set(pieces)
    letters = np.array(list(string.ascii_lowercase))
    while len(pieces) < VOCAB_SIZE - len(tokens):
        length = int(rng.integers(2, 6))
        piece = "".join(rng.choice(letters, size=length))
        if rng.random() < 0.6:
            piece = SPACE + piece
        if piece not in seen:
            seen.add(piece)
            pieces.append(piece)
    tokens += pieces
    types += [gguf.TokenType.NORMAL] * len(pieces)
    # Longer pieces score higher, so the tokenizer prefers them, as in a trained vocabulary.
    scores = [0.0] * (3 + 256)
    scores += [-100.0 + len(piece) * 10.0 - i * 1e-3 for i, piece in enumerate(pieces)]
    return tokens, scores, [int(kind) for kind in types]


def weights(rng: np.random.Generator, special: int) -> dict[str, np.ndarray]:
    """The tensors of a llama model, in numpy's (rows, columns) order."""

    def matrix(rows: int, columns: int, scale: float) -> np.ndarray:
        return (rng.standard_normal((rows, columns)) * scale).astype(np.float32)

    head_dim = HIDDEN // HEADS
    tensors = {
        "token_embd.weight": matrix(VOCAB_SIZE, HIDDEN, 1.0),
        "output_norm.weight": np.ones(HIDDEN, dtype=np.float32),
        "output.weight": matrix(VOCAB_SIZE, HIDDEN, 1.0),
    }
    tensors["output.weight"][:special] = 0.0  # never sampled: control and byte tokens
    for layer in range(LAYERS):
        prefix = f"blk.{layer}."
        tensors[prefix + "attn_norm.weight"] = np.ones(HIDDEN, dtype=np.float32)
        tensors[prefix + "ffn_norm.weight"] = np.ones(HIDDEN, dtype=np.float32)
        for name in ("attn_q", "attn_k", "attn_v", "attn_output"):
            tensors[prefix + name + ".weight"] = matrix(HEADS * head_dim, HIDDEN, HIDDEN**-0.5)
        tensors[prefix + "ffn_gate.weight"] = matrix(FFN, HIDDEN, HIDDEN**-0.5)
        tensors[prefix + "ffn_up.weight"] = matrix(FFN, HIDDEN, HIDDEN**-0.5)
        tensors[prefix + "ffn_down.weight"] = matrix(HIDDEN, FFN, FFN**-0.5)
    return tensors


def write(path: Path, name: str, vocab: tuple, tensors: dict[str, np.ndarray]) -> None:
    tokens, scores, types = vocab
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name(name)
    writer.add_context_length(CONTEXT)
    writer.add_embedding_length(HIDDEN)
    writer.add_block_count(LAYERS)
    writer.add_feed_forward_length(FFN)
    writer.add_head_count(HEADS)
    writer.add_head_count_kv(HEADS)
    writer.add_rope_dimension_count(HIDDEN // HEADS)
    writer.add_rope_freq_base(10000.0)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores(scores)
    writer.add_token_types(types)
    writer.add_unk_token_id(UNKNOWN)
    writer.add_bos_token_id(BOS)
    writer.add_eos_token_id(EOS)
    writer.add_add_bos_token(True)
    writer.add_add_eos_token(False)
    for tensor_name, data in tensors.items():
        writer.add_tensor(tensor_name, data)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def make_models(out_dir: Path, seed: int = 1, noise: float = 0.05) -> dict[str, Path]:
    """Writes the three models into ``out_dir`` and returns their paths by role."""
    out_dir.mkdir(parents=True, exist_ok=True)
    vocab = vocabulary(np.random.default_rng(seed))
    special = 3 + 256
    target = weights(np.random.default_rng(seed + 1), special)
    noise_rng = np.random.default_rng(seed + 2)
    draft = {}
    for name, data in target.items():
        jitter = noise_rng.standard_normal(data.shape).astype(np.float32) * noise * data.std()
        draft[name] = data if name.endswith("norm.weight") else data + jitter
    draft["output.weight"][:special] = 0.0
    unrelated = weights(np.random.default_rng(seed + 3), special)
    paths = {}
    for role, tensors in (("target", target), ("draft", draft), ("unrelated", unrelated)):
        paths[role] = out_dir / f"{role}.gguf"
        write(paths[role], f"tiny-{role}", vocab, tensors)
    return paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out-dir", type=Path, required=True)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--noise", type=float, default=0.05, help="draft noise, relative to each tensor's spread"
    )
    args = parser.parse_args(argv)
    for role, path in make_models(args.out_dir, args.seed, args.noise).items():
        print(f"{role}: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
