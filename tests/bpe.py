"""A small Qwen-style byte-level BPE tokenizer.json for tests of paper-scale configs (HF tokenizers offline)."""
from shared.data.tokenizers import HFTokenizer


def byte_level_bpe(texts, vocab_size: int, path: str) -> HFTokenizer:
    """A Qwen-style tokenizer.json (byte-level BPE, <|endoftext|> as its only special token) trained on texts."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(texts, trainer)
    tok.save(path)
    return HFTokenizer(path)
