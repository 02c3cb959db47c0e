"""What training adds for text as people write it: data.concatenate (pairs joined two by two,
Kondo et al. 2021: the model writes past data.max_len) and data.insert_placeholders (a placeholder
anywhere in a pair, where its aligner links: a kept span moves anywhere)."""

import random

import numpy as np

from nmt.data.batches import Example
from nmt.data.protected_numbers import PLACEHOLDERS
from nmt.data.vocab import SPECIALS, Vocab
from nmt.training.run_data import PlaceholderInserter, concatenated


def test_neighbours_are_joined_with_one_eos_and_their_links_moved():
    eos = 2
    first = Example([10, 11, eos], [20, eos], np.array([[0, 0], [1, 0]]))
    second = Example([12, eos], [21, 22, eos], np.array([[0, 1]]))
    third = Example([13, eos], [23, eos], np.array([[0, 0]]))
    joined = concatenated([first, second, third], frozenset())
    assert [(ex.src, ex.tgt) for ex in joined] == [([10, 11, 12, eos], [20, 21, 22, eos]), ([13, eos], [23, eos])]
    assert joined[0].links.tolist() == [[0, 0], [1, 0], [2, 2]]  # the second pair's link moved past the first's


def test_a_pair_with_a_placeholder_stays_alone():
    eos, placeholder = 2, 4
    numbered = Example([placeholder, eos], [placeholder, eos])
    plain = [Example([10, eos], [20, eos]), Example([11, eos], [21, eos])]
    joined = concatenated([plain[0], numbered, plain[1]], frozenset({placeholder}))
    assert [ex.src for ex in joined] == [[placeholder, eos], [10, 11, eos]]


def test_a_run_trains_with_concatenated_batches(tiny_config, toy_zip, tmp_path):
    from typer.testing import CliRunner

    from nmt.cli import app

    result = CliRunner().invoke(app, ["train", str(tiny_config), "--data", str(toy_zip), "--out", str(tmp_path / "r"),
                                      "--set", "data.concatenate=1.0", "--set", "train.epochs=1", "--quiet"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "r" / "best.pt").is_file()


def test_a_placeholder_goes_in_between_words_and_where_the_links_say_in_the_target():
    src_vocab = Vocab(list(SPECIALS) + list(PLACEHOLDERS) + ["▁I", "▁am", "▁cold", "."])
    tgt_vocab = Vocab(list(SPECIALS) + list(PLACEHOLDERS) + ["▁J", "'", "ai", "▁froid", "."])
    s, t = src_vocab.stoi, tgt_vocab.stoi
    eos = src_vocab.eos_id
    ex = Example([s["▁I"], s["▁am"], s["▁cold"], s["."], eos], [t["▁J"], t["'"], t["ai"], t["▁froid"], t["."], eos],
                 np.array([[0, 0], [1, 2], [2, 3], [3, 4], [4, 5]]))
    inserter = PlaceholderInserter(src_vocab, tgt_vocab)
    seen = set()
    for seed in range(30):
        out = inserter.inserted(ex, random.Random(seed))
        src = [src_vocab.itos[i] for i in out.src]
        tgt = [tgt_vocab.itos[i] for i in out.tgt]
        assert src.count("⦅N1⦆") == 1 and tgt.count("⦅N1⦆") == 1
        assert [p for p in src if p != "⦅N1⦆"] == [src_vocab.itos[i] for i in ex.src]
        pair = (src.index("⦅N1⦆"), tgt.index("⦅N1⦆"))
        assert [pair[0], pair[1]] in out.links.tolist()
        seen.add(pair)
        moved = [(a + (a >= pair[0]), b + (b >= pair[1])) for a, b in ex.links.tolist()]
        assert sorted(map(tuple, out.links.tolist())) == sorted(moved + [pair])
    # after "I" (linked to J): after the word J'ai; after "am" (linked to ai): the same; at the end: before "."
    assert seen == {(1, 3), (2, 3), (3, 4)}
