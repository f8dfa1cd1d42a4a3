"""Data: tokenizers (TOKENIZERS registry), text sources (DATASETS registry) and the packed grain pipeline.

Importing this package registers the built-in names: tokenizers byte / sentencepiece / hf and
sources stdlib / text / jsonl.
"""
from shared.data.sources import (  # noqa: F401
    DataError, hash_fraction, jsonl_source, read_stdlib, read_text_file, resolve_files, split_names,
    stdlib_files, stdlib_source, text_source,
)
from shared.data.tokenizers import (  # noqa: F401
    ByteTokenizer, HFTokenizer, SentencePieceTokenizer, Tokenizer, build_tokenizer, train_sentencepiece,
)
from shared.data.pipeline import (  # noqa: F401
    BATCH_KEYS, PackedBatchIterator, TokenizedCorpus, load_texts, make_eval_batches, make_train_iterator,
    packed_rows, tokenized_shard,
)
