"""Build the tiny random-weight Llama model and its tokenizer used by the live-engine tests.

Run in ``.venv-engine``: ``python tests/engine/make_model.py DIR``. Everything is made here
(no hub: ``HF_HUB_OFFLINE=1``); a fixed seed gives the same weights every time. ``DIR/READY``
is written last, so a half-built folder is rebuilt.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

VOCAB = 512  # ids 0..3 are special: <pad>, <s>, </s>, <unk>
#: bumped when the model changes, so cached copies are rebuilt
VERSION = 2


def build_tokenizer(directory: Path) -> None:
    """A word-level tokenizer over ``w4 .. w511`` (plus the four specials), saved to
    ``directory``."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    specials = ["<pad>", "<s>", "</s>", "<unk>"]
    vocab = {token: i for i, token in enumerate(specials)}
    vocab.update({f"w{i}": i for i in range(len(specials), VOCAB)})
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, bos_token="<s>",
                                        eos_token="</s>", unk_token="<unk>", pad_token="<pad>")
    tokenizer.save_pretrained(directory)


def build_model(directory: Path) -> None:
    """A 2-layer Llama with random weights (seed 0), float32, saved as safetensors."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=VOCAB, hidden_size=128, intermediate_size=256,
                         num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
                         max_position_embeddings=1024, bos_token_id=1, eos_token_id=2,
                         pad_token_id=0, tie_word_embeddings=False, torch_dtype="float32")
    model = LlamaForCausalLM(config)
    with torch.no_grad():  # larger logits: a peaked, input-dependent next-token distribution
        model.lm_head.weight.mul_(20.0)
    model.save_pretrained(directory, safe_serialization=True)


def main(argv: list[str]) -> int:
    """Build the model into ``argv[0]`` unless it is there already; print its path."""
    directory = Path(argv[0])
    ready = directory / "READY"
    if ready.exists() and json.loads(ready.read_text()).get("version") == VERSION:
        print(directory)
        return 0
    directory.mkdir(parents=True, exist_ok=True)
    build_tokenizer(directory)
    build_model(directory)
    ready.write_text(json.dumps({"version": VERSION, "vocab": VOCAB}))
    print(directory)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
