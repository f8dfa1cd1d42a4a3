"""Data: tokenizers (TOKENIZERS registry), text sources and example sets (DATASETS registry), record files and
the packed grain pipeline.

Importing this package registers the built-in names: tokenizers byte / sentencepiece / hf, sources stdlib /
text / jsonl and the example sets rl/arithmetic, rl/countdown, rl/sorting, rl/gsm8k, rl/math, rl/svamp,
rl/asdiv, rl/mawps, rl/reasoning_gym, rl/tinygsm_sym (shared/data/tasks/).

  sources.py     text sources (DATASETS stdlib / text / jsonl), DataError, hash_fraction
  records.py     read_records / field: .jsonl and .json record files with errors naming file and line
  examples.py    example sets: register_task, load_task, checker, short_name, TASK_CHECKERS
  tasks/         the built-in example sets (procedural, public, tinygsm_sym)
  tokenizers.py  Tokenizer and its implementations, build_tokenizer
  pipeline.py    tokenized corpora and packed batches for pre-training
  mnist.py       the MNIST 5k csv reader (read_mnist, resolve) and procedural digit glyphs (draw_glyph) for CI
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
from shared.data.records import field, read_records  # noqa: F401
from shared.data.examples import TASK_CHECKERS, checker, load_task, register_task, short_name  # noqa: F401
from shared.data import tasks  # noqa: F401  registers the example sets (DATASETS "rl/*")
