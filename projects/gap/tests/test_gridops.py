"""GridOps (projects/gap/gridops.py): moves, rendering, token rows, splits; hand-computed where possible."""
import os

import numpy as np
import pytest

from projects.gap import gridops as G
from projects.gap import layout as L
from shared.data.mnist import DEFAULT_PATH, resolve

BASE = np.arange(9).reshape(3, 3)


@pytest.fixture(scope="module")
def pools():
    return G.synthetic_pools(0, n_per_digit=10)


@pytest.mark.parametrize("move, expected", [
    ("ROT", [[6, 3, 0], [7, 4, 1], [8, 5, 2]]),
    ("ROTL", [[2, 5, 8], [1, 4, 7], [0, 3, 6]]),
    ("FLIPH", [[2, 1, 0], [5, 4, 3], [8, 7, 6]]),
    ("FLIPV", [[6, 7, 8], [3, 4, 5], [0, 1, 2]]),
    ("TR", [[0, 3, 6], [1, 4, 7], [2, 5, 8]]),
    ("SWAPR 0 2", [[6, 7, 8], [3, 4, 5], [0, 1, 2]]),
    ("SWAPC 1 2", [[0, 2, 1], [3, 5, 4], [6, 8, 7]]),
    ("SHIFTR 1", [[0, 1, 2], [5, 3, 4], [6, 7, 8]]),
])
def test_each_move_by_hand(move, expected):
    assert G.apply_move(BASE, move).tolist() == expected
    assert G.apply_move(BASE, G.parse_move(move)).tolist() == expected


def test_move_compositions():
    assert G.apply_moves(BASE, [("ROT",), ("ROTL",)]).tolist() == BASE.tolist()
    assert G.apply_moves(BASE, ["FLIPH", "FLIPH"]).tolist() == BASE.tolist()
    assert G.apply_moves(BASE, ["ROT"] * 4).tolist() == BASE.tolist()
    assert G.apply_moves(BASE, ["SHIFTR 0"] * 3).tolist() == BASE.tolist()
    assert G.apply_moves(BASE, ["ROT", "ROT"]).tolist() == BASE[::-1, ::-1].tolist()
    assert G.apply_moves(BASE, []).tolist() == BASE.tolist()
    assert G.move_words(("ROT",)) == ["ROT", "_", "_"] and G.move_words("SHIFTR 2") == ["SHIFTR", "2", "_"]
    for bad in ("SPIN", "SWAPR 0", "SHIFTR 3"):
        with pytest.raises(ValueError):
            G.parse_move(bad)


def test_render_places_cells_and_aux_is_moved_same_glyphs(pools):
    glyphs = np.stack([np.full((28, 28), 10 * i + 5, np.uint8) for i in range(9)]).reshape(3, 3, 28, 28)
    img = G.render(glyphs)
    assert img.shape == (84, 84, 1) and img.dtype == np.float32 and 0 <= img.min() and img.max() <= 1
    for r in range(3):
        for c in range(3):
            np.testing.assert_allclose(img[28 * r:28 * r + 28, 28 * c:28 * c + 28, 0], (30 * r + 10 * c + 5) / 255)
    ex = G.make_examples(pools, "train", 5, seed=1, m_range=(3, 3))[0]
    moved = G.apply_moves(ex.glyph_images, ex.moves)
    np.testing.assert_array_equal(ex.aux_image(), G.render(moved))
    np.testing.assert_array_equal(ex.image(), G.render(pools["train"].images[ex.glyphs]))
    # glyphs stay upright: each aux cell is one of the original glyphs unchanged, at its moved place
    perm = G.apply_moves(BASE, ex.moves)
    for r in range(3):
        for c in range(3):
            src = divmod(int(perm[r, c]), 3)
            np.testing.assert_array_equal(ex.aux_image()[28 * r:28 * r + 28, 28 * c:28 * c + 28],
                                          ex.image()[28 * src[0]:28 * src[0] + 28, 28 * src[1]:28 * src[1] + 28])


def test_answers_by_hand():
    digits = np.array([[3, 1, 4], [1, 5, 9], [2, 6, 5]])
    moves = (("SWAPR", 0, 1),)
    moved = G.apply_moves(digits, moves)
    mk = lambda kind, args: G.Example("train", 0, digits, np.zeros((3, 3), int), np.zeros((3, 3, 28, 28), np.uint8),
                                      moves, kind, args, moved)
    assert mk("cell", (0, 2)).answer == "9"
    assert mk("rowsum", (0,)).answer == "1 5" and mk("rowsum", (2,)).answer == "1 3"
    assert mk("read", ()).answer == "1 5 9 | 3 1 4 | 2 6 5" == mk("cell", (0, 0)).parser
    ex = mk("cell", (1, 0))
    row = G.encode(ex, "direct")
    assert row["tokens"][L.QUESTION_POS:L.PROMPT_LEN].tolist() == G.ids("cell 1 0 ?")
    assert row["tokens"][13:19].tolist() == G.ids("SWAPR 0 1 NOP _ _")
    assert row["tokens"][L.PROMPT_LEN:L.PROMPT_LEN + 2].tolist() == G.ids("3 <eos>")


@pytest.mark.parametrize("variant", G.VARIANTS)
def test_token_rows(pools, variant):
    k = 9
    examples = G.make_examples(pools, "test", 12, seed=2, kinds=("cell", "rowsum"))
    batch = G.make_batch(examples, variant, k)
    n_b = len(examples)
    assert batch["tokens"].shape == (n_b, L.SEQ_LEN) and batch["tokens"].dtype == np.int32
    assert batch["image"].shape == batch["aux_image"].shape == (n_b, 84, 84, 1)
    assert batch["kind"].tolist() == [G.KIND_CODE[e.kind] for e in examples]
    assert batch["m"].tolist() == [e.m for e in examples]
    for i, ex in enumerate(examples):
        tok, tgt, mask = batch["tokens"][i], batch["targets"][i], batch["loss_mask"][i]
        assert tok[0] == L.BOS and tok[1] == L.ID["<img>"] and tok[11] == L.ID["</img>"]
        assert [t for t in range(L.SEQ_LEN) if tok[t] == L.IMGSLOT] == list(L.IMAGE_POS)
        assert tok[12] == L.ID["moves:"] and tok[31] == L.ID[";"] and tok[32] == L.ID["ask:"]
        assert tok[L.PROMPT_LEN - 1] == L.ID["?"]
        np.testing.assert_array_equal(tgt[:-1], tok[1:])
        assert tgt[-1] == L.PAD
        lat = [t for t in range(L.SEQ_LEN) if tok[t] == L.LATSLOT]
        assert lat == (list(L.latent_pos(k)) if "latent" in variant else [])
        assert bool(batch["has_latent"][i]) == ("latent" in variant)
        n = int((tok != L.PAD).sum())
        assert tok[n - 1] == L.EOS and (tok[n:] == L.PAD).all()
        expected = [(L.PROMPT_LEN - 1 <= t < n - 1) and tgt[t] != L.LATSLOT for t in range(L.SEQ_LEN)]
        assert mask.tolist() == [float(x) for x in expected]
        assert mask[L.PROMPT_LEN - 1] == 1 and mask[:L.PROMPT_LEN - 1].sum() == 0
        if "latent" in variant:
            assert mask[L.latent_pos(k)[0] - 1] == 0 and mask[L.latent_pos(k)[-1]] == 1   # slot targets / </latent>
        pos = batch["answer_pos"][i][:batch["answer_len"][i]]
        assert G.decode_answer(tgt[pos]) == ex.answer
        assert (mask[pos] == 1).all()
        assert G.decode_answer(tok[L.PROMPT_LEN:]) == ex.answer          # the whole generated response
        if variant in ("text", "latent_parser"):
            words = [L.WORDS[t] for t in tok[:n]]
            a = words.index("<parser>")
            assert " ".join(words[a + 1:words.index("</parser>")]) == ex.parser


def test_read_rows_and_overflow(pools):
    ex = G.make_examples(pools, "train", 1, seed=0, kinds=("read",))[0]
    for variant in ("direct", "text", "latent"):
        row = G.encode(ex, variant)
        assert G.answer_from_row(row) == ex.answer and len(ex.answer.split()) == 11
    with pytest.raises(ValueError, match="73 tokens"):                 # 37 + 1 + 9 + 1 + 13 + 11 + 1
        G.encode(ex, "latent_parser")
    with pytest.raises(ValueError, match="variant"):
        G.encode(ex, "pictures")


def test_splits_determinism_and_pools(pools):
    assert len(set(pools["train"].rows.tolist()) & set(pools["test"].rows.tolist())) == 0
    assert np.bincount(pools["train"].labels).tolist() == [8] * 10
    assert np.bincount(pools["test"].labels).tolist() == [2] * 10
    a = G.make_examples(pools, "train", 20, seed=3)
    b = G.make_examples(pools, "train", 5, seed=3, start=15)
    for x, y in zip(a[15:], b):
        assert x.moves == y.moves and x.kind == y.kind and x.args == y.args
        np.testing.assert_array_equal(x.glyph_images, y.glyph_images)
    c = G.make_examples(pools, "train", 20, seed=4)
    assert any(x.moves != y.moves or (x.digits != y.digits).any() for x, y in zip(a, c))
    for split, (lo, hi), pool in (("train", (0, 4), "train"), ("test", (0, 4), "test"), ("ood", (5, 6), "test")):
        exs = G.make_examples(pools, split, 60, seed=0)
        assert {e.m for e in exs} == set(range(lo, hi + 1))
        for e in exs:
            np.testing.assert_array_equal(pools[pool].labels[e.glyphs], e.digits)
            np.testing.assert_array_equal(pools[pool].images[e.glyphs], e.glyph_images)
            assert (G.apply_moves(e.digits, e.moves) == e.moved).all()
    t = G.make_examples(pools, "test", 3, seed=0)
    o = G.make_examples(pools, "ood", 3, seed=0)
    assert any(x.moves != y.moves for x, y in zip(t, o))                   # the split enters the seed


def test_synthetic_pools_deterministic():
    a, b = G.synthetic_pools(5, 4), G.synthetic_pools(5, 4)
    np.testing.assert_array_equal(a["train"].images, b["train"].images)
    assert not np.array_equal(a["train"].images, G.synthetic_pools(6, 4)["train"].images)


@pytest.mark.skipif(not os.path.exists(resolve(DEFAULT_PATH)), reason="no ../shared MNIST 5k file")
def test_real_pools():
    p = G.load_pools()
    assert np.bincount(p["train"].labels, minlength=10).tolist() == [400] * 10
    assert np.bincount(p["test"].labels, minlength=10).tolist() == [100] * 10
    assert len(set(p["train"].rows.tolist()) & set(p["test"].rows.tolist())) == 0
    for d in range(10):                     # row order: the first 400 of each digit train
        assert p["train"].rows[p["train"].labels == d].max() < p["test"].rows[p["test"].labels == d].min()
    ex = G.make_examples(p, "ood", 2, seed=0)
    assert all(e.m in (5, 6) for e in ex)
