"""The tiny Llama of ``make_model.py`` as a GGUF file, so llama.cpp runs the very same weights.

Written with the ``gguf`` package (the project's ``engine`` extra), as
``examples/llamacpp/make_models.py`` writes its models: the safetensors file is read by hand
(an 8-byte little-endian header length, a JSON header, then the raw tensors), float32 kept
as it is. Two things differ between the formats and are converted here:

- rotary embedding: Hugging Face's Llama rotates the two halves of each head (``rotate_half``)
  where llama.cpp's rotates adjacent pairs, so the rows of each head of ``q_proj`` and
  ``k_proj`` are interleaved (row ``2i`` = row ``i``, row ``2i + 1`` = row ``d/2 + i``);
- the tokenizer: the byte-level BPE's vocabulary and merges go in as a ``gpt2`` model with
  the ``gpt-2`` pre-tokenizer (the split regex the tokenizer was trained with), no BOS added.

The head size (32) is not hidden / heads (16), so the key and value lengths are written.

    python examples/vllm/to_gguf.py MODEL_DIR OUT.gguf
"""

from __future__ import annotations

import argparse
import json
import struct
import sys
from pathlib import Path

import numpy as np

try:
    import gguf
except ImportError:  # pragma: no cover - a message instead of a traceback
    sys.exit("to_gguf: needs the gguf package: pip install -e '.[engine]'")

NAMES = {
    "model.embed_tokens.weight": "token_embd.weight",
    "model.norm.weight": "output_norm.weight",
    "lm_head.weight": "output.weight",
}
LAYER_NAMES = {
    "input_layernorm.weight": "attn_norm.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.o_proj.weight": "attn_output.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
}


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    data = path.read_bytes()
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + length])
    body = memoryview(data)[8 + length :]
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        if entry["dtype"] != "F32":
            sys.exit(f"to_gguf: {path}: {name} is {entry['dtype']}, only F32 is written")
        begin, end = entry["data_offsets"]
        tensors[name] = np.frombuffer(body[begin:end], dtype="<f4").reshape(entry["shape"])
    return tensors


def interleave_heads(weight: np.ndarray, heads: int) -> np.ndarray:
    """Rows of each head from (first half, second half) to adjacent pairs."""
    rows, columns = weight.shape
    half = rows // heads // 2
    return weight.reshape(heads, 2, half, columns).swapaxes(1, 2).reshape(rows, columns)


def gguf_tensors(tensors: dict[str, np.ndarray], config: dict) -> dict[str, np.ndarray]:
    out = {}
    for name, data in tensors.items():
        if name in NAMES:
            out[NAMES[name]] = data
            continue
        prefix, _, rest = name.partition(".layers.")
        layer, _, inner = rest.partition(".")
        if prefix != "model" or inner not in LAYER_NAMES:
            sys.exit(f"to_gguf: unexpected tensor {name}")
        if inner.startswith("self_attn.q_proj"):
            data = interleave_heads(data, config["num_attention_heads"])
        elif inner.startswith("self_attn.k_proj"):
            data = interleave_heads(data, config["num_key_value_heads"])
        out[f"blk.{layer}.{LAYER_NAMES[inner]}"] = data
    return out


def vocabulary(tokenizer: dict) -> tuple[list[str], list[int], list[str]]:
    vocab = tokenizer["model"]["vocab"]
    tokens = [""] * len(vocab)
    for token, index in vocab.items():
        tokens[index] = token
    special = {entry["id"] for entry in tokenizer.get("added_tokens", []) if entry["special"]}
    types = [
        int(gguf.TokenType.CONTROL if i in special else gguf.TokenType.NORMAL)
        for i in range(len(tokens))
    ]
    merges = [m if isinstance(m, str) else " ".join(m) for m in tokenizer["model"]["merges"]]
    return tokens, types, merges


def rope_theta(config: dict) -> float:
    """Transformers 5 writes it under ``rope_parameters``, earlier releases at the top level."""
    theta = (config.get("rope_parameters") or {}).get("rope_theta", config.get("rope_theta"))
    if theta is None:
        sys.exit("to_gguf: config.json has no rope_theta")
    return float(theta)


def convert(model_dir: Path, out: Path) -> Path:
    config = json.loads((model_dir / "config.json").read_text())
    tokenizer = json.loads((model_dir / "tokenizer.json").read_text())
    tensors = gguf_tensors(read_safetensors(model_dir / "model.safetensors"), config)
    tokens, types, merges = vocabulary(tokenizer)
    head_dim = config["head_dim"]
    partial = out.with_name(out.name + ".partial")
    writer = gguf.GGUFWriter(str(partial), "llama")
    writer.add_name(model_dir.name)
    writer.add_context_length(config["max_position_embeddings"])
    writer.add_embedding_length(config["hidden_size"])
    writer.add_block_count(config["num_hidden_layers"])
    writer.add_feed_forward_length(config["intermediate_size"])
    writer.add_head_count(config["num_attention_heads"])
    writer.add_head_count_kv(config["num_key_value_heads"])
    writer.add_key_length(head_dim)
    writer.add_value_length(head_dim)
    writer.add_rope_dimension_count(head_dim)
    writer.add_rope_freq_base(rope_theta(config))
    writer.add_layer_norm_rms_eps(config["rms_norm_eps"])
    writer.add_vocab_size(config["vocab_size"])
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("gpt-2")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(merges)
    writer.add_bos_token_id(config["bos_token_id"])
    writer.add_eos_token_id(config["eos_token_id"])
    writer.add_add_bos_token(False)
    writer.add_add_eos_token(False)
    for name, data in tensors.items():
        writer.add_tensor(name, np.ascontiguousarray(data))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    partial.rename(out)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model_dir", type=Path)
    parser.add_argument("out", type=Path)
    args = parser.parse_args(argv)
    print(convert(args.model_dir, args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
