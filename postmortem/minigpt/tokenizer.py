"""A byte-level BPE tokenizer trained on the corpus with the `tokenizers` library."""

from __future__ import annotations

from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers


def train_tokenizer(sentences: list[str], vocab_size: int = 512) -> Tokenizer:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<|end|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(sentences, trainer=trainer)
    return tok


def load_or_train(path: Path, sentences: list[str], vocab_size: int = 512) -> Tokenizer:
    if path.exists():
        return Tokenizer.from_file(str(path))
    tok = train_tokenizer(sentences, vocab_size)
    path.parent.mkdir(parents=True, exist_ok=True)
    tok.save(str(path))
    return tok
