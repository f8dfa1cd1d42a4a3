"""shared/data: tokenizers, sources, packing, resumable iteration, sharding, errors."""
import gzip
import json
import os

import numpy as np
import pytest

from shared.config.base import base_config
from shared.data import (
    ByteTokenizer, DataError, Tokenizer, TokenizedCorpus, build_tokenizer, load_texts, make_eval_batches,
    make_train_iterator, packed_rows, read_stdlib, split_names, stdlib_files, tokenized_shard,
)
from shared.data.sources import _relative
from shared.registry import DATASETS, TOKENIZERS

TINYSHAKESPEARE = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data", "tinyshakespeare",
                               "input.txt")


class IntTokenizer(Tokenizer):
    """Test tokenizer: a document is space-separated integers. With globally unique integers every
    (input, target) pair of the corpus is unique, so packing can be checked exactly."""

    def __init__(self):
        self.vocab_size, self.pad_id, self.bos_id, self.eos_id = 100_000, 0, 1, 2

    def encode(self, text):
        return [int(x) for x in text.split()]

    def decode(self, ids):
        return " ".join(str(i) for i in ids)


def write_jsonl(path, texts, field="text", compress=False):
    lines = "".join(json.dumps({field: t, "id": i}) + "\n" for i, t in enumerate(texts))
    if compress:
        with gzip.open(path, "wt", encoding="utf-8") as f:
            f.write(lines)
    else:
        with open(path, "w", encoding="utf-8") as f:
            f.write(lines)
    return str(path)


def int_docs(lengths, base=1000):
    """Documents of unique integers: doc d is `base*(d+1) ... base*(d+1) + n - 1`."""
    return [" ".join(str(base * (d + 1) + j) for j in range(n)) for d, n in enumerate(lengths)]


def jsonl_config(path, seq_len, val_fraction=0.0, **data):
    c = base_config()
    c.data.source, c.data.path, c.data.seq_len, c.data.val_fraction = "jsonl", str(path), seq_len, val_fraction
    for k, v in data.items():
        c.data[k] = v
    return c


def corpus_pairs(docs, tok):
    """All (input, target) pairs of the documents, as the pipeline defines them."""
    pairs = []
    for d in docs:
        t = [tok.bos_id] + tok.encode(d) + [tok.eos_id]
        pairs += list(zip(t[:-1], t[1:]))
    return pairs


def row_pairs(rows):
    """(input, target) pairs of every non-padding position of a list of rows / a stacked batch."""
    pairs = []
    for r in rows:
        keep = r["segment_ids"] > 0
        pairs += list(zip(r["inputs"][keep].tolist(), r["targets"][keep].tolist()))
    return pairs


def check_row_invariants(row, seq_len, pad_id):
    inputs, targets, seg, pos, mask = (row[k] for k in ("inputs", "targets", "segment_ids", "positions",
                                                        "loss_mask"))
    assert inputs.shape == targets.shape == seg.shape == pos.shape == mask.shape == (seq_len,)
    assert inputs.dtype == targets.dtype == seg.dtype == pos.dtype == np.int32 and mask.dtype == np.float32
    pad = seg == 0
    np.testing.assert_array_equal(mask, (~pad).astype(np.float32))
    assert np.all(inputs[pad] == pad_id) and np.all(targets[pad] == pad_id) and np.all(pos[pad] == 0)
    n = int((~pad).sum())
    assert np.all(~pad[:n]) and np.all(pad[n:]), "padding only at the row end"
    # segments numbered 1, 2, ... in order, each a contiguous run
    starts = np.flatnonzero(np.diff(np.concatenate([[0], seg[:n]])) != 0)
    np.testing.assert_array_equal(seg[starts], np.arange(1, len(starts) + 1))
    for i in range(n):
        if i in starts:
            assert pos[i] == 0, f"position must reset at segment start {i}"
        else:
            assert pos[i] == pos[i - 1] + 1
            assert targets[i - 1] == inputs[i], "targets[i] == inputs[i+1] inside a segment"


# --------------------------------------------------------------------------------------------------------
# tokenizers


def test_byte_tokenizer_round_trip_and_ids():
    tok = ByteTokenizer()
    text = "Héllo, wörld 😀\n\tdef f(): pass"
    ids = tok.encode(text)
    assert ids == [b + 3 for b in text.encode("utf-8")]
    assert tok.decode(ids) == text
    assert (tok.vocab_size, tok.pad_id, tok.bos_id, tok.eos_id) == (259, 0, 1, 2)
    assert tok.decode([tok.bos_id] + ids + [tok.eos_id, tok.pad_id, 5000]) == text  # specials/out-of-range dropped
    assert tok.decode([0xFF + 3]) == "\ufffd"  # invalid UTF-8 is replaced, not raised
    assert TOKENIZERS.get("byte") is not None


def test_build_tokenizer_checks_model_vocab():
    c = base_config()
    assert build_tokenizer(c.data, None, 259).vocab_size == 259
    with pytest.raises(DataError, match=r"model\.vocab_size=100"):
        build_tokenizer(c.data, None, 100)


def _sp_training_text():
    if os.path.exists(TINYSHAKESPEARE):
        with open(TINYSHAKESPEARE, encoding="utf-8") as f:
            return f.read()[:200_000]
    rng = np.random.default_rng(0)  # reference folder absent: generated words
    words = ["".join(rng.choice(list("abcdefghij"), size=rng.integers(2, 8))) for _ in range(400)]
    return "\n".join(" ".join(rng.choice(words, size=12)) for _ in range(3000))


def test_sentencepiece_trains_caches_and_reloads(tmp_path):
    c = base_config()
    c.data.tokenizer = "sentencepiece"
    text = _sp_training_text()
    calls = []

    def train_texts():
        calls.append(1)
        return [text]

    tok = build_tokenizer(c.data, str(tmp_path), 800, train_texts)
    assert calls == [1] and os.path.isfile(tmp_path / "tokenizer.model")
    assert (tok.pad_id, tok.bos_id, tok.eos_id) == (0, 1, 2) and 300 < tok.vocab_size <= 800
    sample = "First Citizen:\n  Before we proceed, hear me speak. ünïcødé 😀\t42\n"
    ids = tok.encode(sample)
    assert tok.decode(ids) == sample  # identity normalisation + byte fallback: exact round trip
    seen_text = text[1000:2000]
    assert len(tok.encode(seen_text)) < 0.6 * len(seen_text.encode("utf-8"))  # it learned merges

    def must_not_train():
        raise AssertionError("cached model should be loaded, not retrained")

    again = build_tokenizer(c.data, str(tmp_path), 800, must_not_train)
    assert again.encode(sample) == ids and again.vocab_size == tok.vocab_size
    c.data.tokenizer_path = str(tmp_path / "tokenizer.model")
    by_path = build_tokenizer(c.data, None, 800, None)
    assert by_path.encode(sample) == ids
    with pytest.raises(DataError, match="model.vocab_size"):
        build_tokenizer(c.data, None, 300, None)


def test_hf_tokenizer_adapter(tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers import models, pre_tokenizers, decoders

    vocab = {"<pad>": 0, "<s>": 1, "</s>": 2, "[UNK]": 3, "hello": 4, "world": 5, "Ġworld": 6}
    hf = tokenizers.Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    hf.decoder = decoders.ByteLevel()
    hf.add_special_tokens(["<pad>", "<s>", "</s>"])
    hf.save(str(tmp_path / "tokenizer.json"))
    c = base_config()
    c.data.tokenizer, c.data.tokenizer_path = "hf", str(tmp_path)  # a folder holding tokenizer.json
    tok = build_tokenizer(c.data, None, 64)
    assert (tok.vocab_size, tok.pad_id, tok.bos_id, tok.eos_id) == (7, 0, 1, 2)
    assert tok.encode("hello world") == [4, 6]
    assert tok.decode([1, 4, 6, 2, 0]) == "hello world"
    c.data.tokenizer_path = str(tmp_path / "missing.json")
    with pytest.raises(DataError, match="data.tokenizer_path"):
        build_tokenizer(c.data, None, 64)


# --------------------------------------------------------------------------------------------------------
# packing


def test_packing_hand_computed_example():
    # Token streams: A = [bos 10 11 eos] (3 pairs), B = [bos 20..25 eos] (7 pairs: pieces of 4 and 3 at
    # seq_len 4), C = [bos 30 31 eos] (3 pairs); in document order (no shuffle).
    # A waits; B1 is full -> row 0. B2 overflows A by 2 -> row 1 = A + B2[:1]. B2[1:] + C overflows by 1
    # -> row 2 = B2[1:] + C[:2]; the stream ends -> row 3 = C[2:] and padding.
    tok = IntTokenizer()
    corpus = TokenizedCorpus(["10 11", "20 21 22 23 24 25", "30 31"], tok)
    rows = list(packed_rows(corpus, 4, tok.pad_id, seed=None, num_epochs=1))
    stack = lambda key: np.stack([r[key] for r in rows])  # noqa: E731
    np.testing.assert_array_equal(stack("inputs"), [[1, 20, 21, 22], [1, 10, 11, 23], [24, 25, 1, 30],
                                                    [31, 0, 0, 0]])
    np.testing.assert_array_equal(stack("targets"), [[20, 21, 22, 23], [10, 11, 2, 24], [25, 2, 30, 31],
                                                     [2, 0, 0, 0]])
    np.testing.assert_array_equal(stack("segment_ids"), [[1, 1, 1, 1], [1, 1, 1, 2], [1, 1, 2, 2],
                                                         [1, 0, 0, 0]])
    np.testing.assert_array_equal(stack("positions"), [[0, 1, 2, 3], [0, 1, 2, 0], [0, 1, 0, 1],
                                                       [0, 0, 0, 0]])
    np.testing.assert_array_equal(stack("loss_mask"), [[1, 1, 1, 1], [1, 1, 1, 1], [1, 1, 1, 1],
                                                       [1, 0, 0, 0]])


def test_packing_invariants_and_every_pair_once():
    tok = IntTokenizer()
    rng = np.random.default_rng(1)
    docs = int_docs(rng.integers(0, 40, size=30).tolist())  # includes empty docs and docs longer than a row
    corpus = TokenizedCorpus(docs, tok)
    seq_len = 8
    rows = list(packed_rows(corpus, seq_len, tok.pad_id, seed=5, num_epochs=1))
    for row in rows:
        check_row_invariants(row, seq_len, tok.pad_id)
    expected = corpus_pairs(docs, tok)
    assert sorted(row_pairs(rows)) == sorted(expected)  # each document token exactly once
    assert sum(int(r["loss_mask"].sum()) for r in rows[:-1]) == seq_len * (len(rows) - 1)  # padding only last
    assert any(int(r["segment_ids"].max()) == 1 and r["loss_mask"].all() for r in rows)  # full piece = row
    shuffled_order = [r["inputs"][0] for r in rows]
    in_order = [r["inputs"][0] for r in packed_rows(corpus, seq_len, tok.pad_id, seed=None, num_epochs=1)]
    assert shuffled_order != in_order


def test_train_iterator_batches_and_epochs(tmp_path):
    tok = IntTokenizer()
    docs = int_docs([3, 17, 5, 30, 1, 9, 12, 2])
    c = jsonl_config(write_jsonl(tmp_path / "d.jsonl", docs), seq_len=8)
    it = make_train_iterator(c, tok, local_batch_size=3)
    total_pairs = len(corpus_pairs(docs, tok))
    batches = [next(it) for _ in range(3 * total_pairs // 24 + 2)]  # > 3 epochs
    for b in batches:
        assert set(b) == {"inputs", "targets", "segment_ids", "positions", "loss_mask"}
        assert b["inputs"].shape == (3, 8)
        assert b["loss_mask"].all(), "training rows carry no padding"
        for i in range(3):
            check_row_invariants({k: v[i] for k, v in b.items()}, 8, tok.pad_id)
    seen = row_pairs([{k: v[i] for k, v in b.items()} for b in batches for i in range(3)])
    first_epoch = seen[:total_pairs - 8]  # before the epoch's pending tail can be cut: no pair twice
    assert len(set(first_epoch)) == len(first_epoch)
    assert set(seen) == set(corpus_pairs(docs, tok))  # after 3 epochs every pair has been seen
    # the next epochs are shuffled differently
    epoch_rows = [tuple(b["inputs"][i]) for b in batches for i in range(3)]
    assert epoch_rows[:4] != epoch_rows[total_pairs // 8:total_pairs // 8 + 4]


def test_resume_reproduces_the_next_batches(tmp_path):
    tok = IntTokenizer()
    docs = int_docs([3, 17, 5, 30, 1, 9, 12, 2, 40, 6])
    c = jsonl_config(write_jsonl(tmp_path / "d.jsonl", docs), seq_len=8)
    saw_pending = False
    for k in (0, 1, 4, 9):  # crosses epoch boundaries (~18 rows per epoch, 2 rows a batch)
        it = make_train_iterator(c, tok, local_batch_size=2)
        for _ in range(k):
            next(it)
        state = json.loads(json.dumps(it.get_state()))  # what a checkpoint stores
        saw_pending |= bool(state["packer"]["pending"])
        expected = [next(it) for _ in range(12)]
        fresh = make_train_iterator(c, IntTokenizer(), local_batch_size=2)  # new tokenizer: no cached corpus
        fresh.set_state(state)
        for want, got in zip(expected, [next(fresh) for _ in range(12)]):
            for key in want:
                np.testing.assert_array_equal(want[key], got[key])
    assert saw_pending, "some saved state should hold a piece waiting for a row"
    other = make_train_iterator(c, tok, local_batch_size=4)
    with pytest.raises(DataError, match="local_batch_size"):
        other.set_state(state)


def test_process_shards_are_disjoint(tmp_path):
    tok = IntTokenizer()
    docs = int_docs([5, 9, 14, 3, 20, 7, 11])
    c = jsonl_config(write_jsonl(tmp_path / "d.jsonl", docs), seq_len=8)
    seen = []
    for p in range(2):
        it = make_train_iterator(c, tok, local_batch_size=2, process_index=p, process_count=2)
        seen.append({x for _ in range(20) for x in next(it)["inputs"].ravel().tolist()} - {tok.bos_id})
        corpus = tokenized_shard(c, tok, "train", p, 2)
        assert corpus.num_docs == len(docs[p::2])
    assert not seen[0] & seen[1]
    doc_tokens = {int(x) for d in docs for x in d.split()}
    assert seen[0] | seen[1] == doc_tokens


def test_eval_batches_are_fixed_count_and_deterministic(tmp_path):
    tok = IntTokenizer()
    val_docs = int_docs([5, 9, 20], base=9000)
    c = jsonl_config(write_jsonl(tmp_path / "train.jsonl", int_docs([4, 4])), seq_len=8,
                     val_path=write_jsonl(tmp_path / "val.jsonl", val_docs))
    batches = make_eval_batches(c, tok, num_batches=4, local_batch_size=2)
    assert len(batches) == 4 and batches[0]["inputs"].shape == (2, 8)
    rows = [{k: v[i] for k, v in b.items()} for b in batches for i in range(2)]
    for r in rows:
        check_row_invariants(r, 8, tok.pad_id)
    assert sorted(row_pairs(rows)) == sorted(corpus_pairs(val_docs, tok))  # 37 pairs: 5 rows, 3 of padding
    assert rows[-1]["loss_mask"].sum() == 0
    again = make_eval_batches(c, tok, num_batches=4, local_batch_size=2)
    for a, b in zip(batches, again):
        np.testing.assert_array_equal(a["inputs"], b["inputs"])
    few = make_eval_batches(c, tok, num_batches=1, local_batch_size=2)  # truncated to what was asked
    np.testing.assert_array_equal(few[0]["targets"], batches[0]["targets"])


# --------------------------------------------------------------------------------------------------------
# sources


def test_jsonl_gz_and_val_split(tmp_path):
    texts = [f"record number {i}" for i in range(200)]
    c = jsonl_config(write_jsonl(tmp_path / "data.jsonl.gz", texts, compress=True), seq_len=8,
                     val_fraction=0.2)
    train, val = load_texts(c)
    assert sorted(train + val) == sorted(texts) and not set(train) & set(val)
    assert 15 <= len(val) <= 70  # ~20% by hash
    assert load_texts(c) == (train, val)
    c.data.max_docs = 10
    train10, val10 = load_texts(c)
    assert len(train10) == 10 and len(val10) == 2 and train10 == train[:10]


def test_text_source_file_folder_and_gz(tmp_path):
    one = tmp_path / "one.txt"
    one.write_text("abcdefghij" * 10)
    c = base_config()
    c.data.source, c.data.path, c.data.val_fraction = "text", str(one), 0.1
    train, val = load_texts(c)
    assert train == ["abcdefghij" * 9] and val == ["abcdefghij"]  # one file: its last 10% validates
    folder = tmp_path / "corpus"
    (folder / "sub").mkdir(parents=True)
    expected = set()
    for i in range(12):
        text = f"document {i}\n" * (i + 1)
        expected.add(text)
        if i % 2:
            with gzip.open(folder / "sub" / f"f{i}.txt.gz", "wt", encoding="utf-8") as f:
                f.write(text)
        else:
            (folder / f"f{i}.txt").write_text(text)
    (folder / "image.bin").write_bytes(b"\x00\x01")  # not a text suffix: ignored in folders
    c.data.path, c.data.val_fraction = str(folder), 0.3
    train, val = load_texts(c)
    assert set(train) | set(val) == expected and not set(train) & set(val) and val
    c.data.path = str(folder / "*.txt")
    train_glob, val_glob = load_texts(c)
    assert len(train_glob) + len(val_glob) == 6


def test_stdlib_split_is_deterministic_and_disjoint():
    files = stdlib_files()
    assert len(files) > 100
    assert not any("site-packages" in f or "__pycache__" in f for f in files)
    assert not any(f"{os.sep}test{os.sep}" in f for f in files)
    root = os.path.commonpath(files)
    names = [_relative(p, root) for p in files]
    train_idx, val_idx = split_names(names, 0.05)
    assert split_names(names, 0.05) == (train_idx, val_idx)
    assert not set(train_idx) & set(val_idx) and len(train_idx) + len(val_idx) == len(files)
    assert 0.01 < len(val_idx) / len(files) < 0.15
    c = base_config()
    c.data.max_docs = 6
    train, val, skipped = read_stdlib(c.data)
    assert len(train) == 6 and len(val) == 1 and not set(train) & set(val)
    assert isinstance(skipped, list)
    assert DATASETS.get("stdlib")(c.data) == (train, val)


# --------------------------------------------------------------------------------------------------------
# errors


def _one_line_error(fn, *needles):
    with pytest.raises(DataError) as info:
        fn()
    message = str(info.value)
    assert "\n" not in message
    for needle in needles:
        assert needle in message, f"{needle!r} not in {message!r}"
    return message


def test_errors_name_key_file_line_and_field(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "fine"}\n{"text": "fine too"}\n{"text": "broken\n')
    _one_line_error(lambda: load_texts(jsonl_config(bad, 8)), "bad.jsonl:3", "invalid JSON")
    missing_field = tmp_path / "nofield.jsonl"
    missing_field.write_text('{"text": "fine"}\n{"body": "no text here"}\n')
    _one_line_error(lambda: load_texts(jsonl_config(missing_field, 8)), "nofield.jsonl:2", "'text'", "body")
    hostile = tmp_path / "hostile.jsonl"   # nested past the recursion limit; an integer past int's digit limit
    hostile.write_text('{"text": "fine"}\n' + "[" * 100_000 + "]" * 100_000 + "\n")
    _one_line_error(lambda: load_texts(jsonl_config(hostile, 8)), "hostile.jsonl:2", "unusable JSON", "RecursionError")
    hostile.write_text('{"text": "fine"}\n{"text": "x", "n": ' + "9" * 5000 + '}\n')
    _one_line_error(lambda: load_texts(jsonl_config(hostile, 8)), "hostile.jsonl:2", "unusable JSON", "ValueError")
    from shared.data.records import read_records
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    _one_line_error(lambda: list(read_records(str(deep))), "deep.json", "unusable JSON")
    not_object = tmp_path / "list.jsonl"
    not_object.write_text('[1, 2]\n')
    _one_line_error(lambda: load_texts(jsonl_config(not_object, 8)), "list.jsonl:1", "JSON object")
    missing = tmp_path / "nowhere"
    _one_line_error(lambda: load_texts(jsonl_config(missing, 8)), "data.path", str(missing))
    ignored = base_config()       # a path the stdlib source would not read is an error, not silently ignored
    ignored.data.path = str(tmp_path / "mytext.jsonl")
    _one_line_error(lambda: load_texts(ignored), "data.path=", "data.source='stdlib'", "data.source=text")
    c = base_config()
    c.data.source, c.data.path = "text", str(tmp_path / "blob.txt")
    (tmp_path / "blob.txt").write_bytes(b"abc\x00\xff\xfe")
    _one_line_error(lambda: load_texts(c), "blob.txt", "binary")
    (tmp_path / "latin1.txt").write_bytes("caf\xe9".encode("latin-1"))
    c.data.path = str(tmp_path / "latin1.txt")
    _one_line_error(lambda: load_texts(c), "latin1.txt", "UTF-8")
    c.data.path, c.data.val_path = str(tmp_path / "latin1.txt"), str(tmp_path / "none*.txt")
    _one_line_error(lambda: load_texts(c), "data.val_path")
