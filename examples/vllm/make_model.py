"""A tiny Llama made here, for vLLM's speculative decoding on a CPU: no model hub needed.

A byte-level BPE tokenizer (2,048 tokens) is trained with ``tokenizers`` on local text (source
files of Python's own standard library, which repeat many spans), then a Llama (hidden 64,
2 layers, 4 heads of 32, intermediate 128: about 380k parameters) is trained on the same text
for ``--steps`` seeded steps on one core. Random weights accept no n-gram draft at all; a few
minutes of training are enough for greedy continuations that repeat what the context holds,
which is what n-gram drafting proposes. vLLM's CPU attention takes head sizes 32, 64, 80, ...
only, hence 4 heads of 32 over a hidden size of 64.

Saved with ``save_pretrained`` (safetensors, config.json, tokenizer files) under
``$XDG_CACHE_HOME/fold-acceptance/vllm-models/<seed>-<hash of this script>/`` and reused when
there: a changed script or seed makes a new model. Runs in vLLM's venv (torch, transformers,
tokenizers: ``install.py``).

    python make_model.py [--seed 1] [--steps 1200]    # prints {"model": DIR, ...}
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import sysconfig
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from install import locked

VOCAB = 2048
HIDDEN, LAYERS, HEADS, HEAD_DIM, FFN = 64, 2, 4, 32, 128
CONTEXT = 512
SEQ, BATCH = 64, 32
# Fixed files of the standard library: the same text on every machine with this Python.
CORPUS = (
    "argparse.py",
    "configparser.py",
    "dataclasses.py",
    "functools.py",
    "inspect.py",
    "logging/__init__.py",
    "pathlib.py",
    "subprocess.py",
    "textwrap.py",
    "typing.py",
)
END = "<|endoftext|>"


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "fold-acceptance" / "vllm-models"


def script_hash() -> str:
    return hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:12]


def corpus() -> list[str]:
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    return [(stdlib / name).read_text(encoding="utf-8") for name in CORPUS]


def train_tokenizer(texts: list[str]):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    # GPT-2's byte-level pre-tokenizer (its split regex): llama.cpp's "gpt2" pre-tokenizer
    # splits alike, so a GGUF copy of the model tokenizes prompts the same way.
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB,
        special_tokens=[END],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(texts, trainer=trainer)
    return tokenizer


def train_model(ids: list[int], seed: int, steps: int, log):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=HIDDEN,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        num_key_value_heads=HEADS,
        head_dim=HEAD_DIM,
        intermediate_size=FFN,
        max_position_embeddings=CONTEXT,
        rms_norm_eps=1e-5,
        rope_theta=10000.0,
        tie_word_embeddings=False,
        bos_token_id=0,
        eos_token_id=0,
        torch_dtype="float32",
    )
    model = LlamaForCausalLM(config)
    data = torch.tensor(ids, dtype=torch.long)
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.0)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: min(1.0, (step + 1) / 100) * max(0.1, 1 - step / steps)
    )
    model.train()
    for step in range(steps):
        starts = torch.randint(0, len(data) - SEQ - 1, (BATCH,), generator=generator)
        batch = torch.stack([data[s : s + SEQ] for s in starts.tolist()])
        loss = model(input_ids=batch, labels=batch).loss
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        if step % 100 == 0 or step == steps - 1:
            log.write(f"step {step} loss {loss.item():.3f}\n")
            log.flush()
    model.eval()
    return model


def ensure_model(seed: int = 1, steps: int = 1200) -> Path:
    """The model's directory, trained when it is not in the cache."""
    import torch

    root = cache_root()
    directory = root / f"{seed}-{steps}-{script_hash()}"
    with locked(root):
        if (directory / "config.json").exists():
            return directory
        torch.set_num_threads(1)
        partial = directory.with_name(directory.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        texts = corpus()
        tokenizer = train_tokenizer(texts)
        end = tokenizer.token_to_id(END)
        ids: list[int] = []
        for text in texts:
            ids += [*tokenizer.encode(text).ids, end]
        with open(partial / "train.log", "w") as log:
            log.write(f"{len(ids)} training tokens\n")
            model = train_model(ids, seed, steps, log)
        from transformers import PreTrainedTokenizerFast

        fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, eos_token=END, bos_token=END)
        fast.save_pretrained(partial)
        model.generation_config.do_sample = False
        model.save_pretrained(partial, safe_serialization=True)
        partial.rename(directory)
    return directory


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--steps", type=int, default=1200, help="training steps of 32 x 64 tokens")
    args = parser.parse_args(argv)
    started = time.monotonic()
    directory = ensure_model(args.seed, args.steps)
    elapsed = round(time.monotonic() - started, 1)
    print(json.dumps({"model": str(directory), "seconds": elapsed}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
