"""What training adds for text as people write it: data.insert_placeholders (a placeholder anywhere
in a pair, where its aligner links: a span kept as it is moves anywhere)."""

import random

import numpy as np

from nmt.data.batches import Example
from nmt.data.protected_numbers import PLACEHOLDERS
from nmt.data.vocab import SPECIALS, Vocab
from nmt.training.run_data import PlaceholderInserter


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
