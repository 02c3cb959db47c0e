import random

import numpy as np
import torch

from nmt.data.batches import Example, collate, encode_pairs, iterate_batches, lengths
from nmt.data.corpus import Pair
from nmt.data.epoch_order import bucket_batches, token_batches
from nmt.data.vocab import Vocab


def _examples(n=200, seed=0):
    rng = random.Random(seed)
    pairs = [Pair([f"e{rng.randrange(30)}" for _ in range(rng.randint(1, 12))],
                  [f"f{rng.randrange(30)}" for _ in range(rng.randint(1, 12))]) for _ in range(n)]
    src_vocab = Vocab.build((p.src for p in pairs), 1)
    tgt_vocab = Vocab.build((p.tgt for p in pairs), 1)
    return pairs, src_vocab, tgt_vocab


def test_collate_shifts_target_and_pads():
    pairs, sv, tv = _examples()
    examples = encode_pairs(pairs[:3], sv, tv)
    batch = collate(examples, tv.pad_id, tv.bos_id)
    for row, ex in enumerate(examples):
        n = len(ex.tgt)
        assert batch.tgt_in[row, 0] == tv.bos_id
        assert batch.tgt_in[row, 1:n].tolist() == ex.tgt[:-1]  # input is the output shifted right
        assert batch.tgt_out[row, :n].tolist() == ex.tgt and ex.tgt[-1] == tv.eos_id
        assert (batch.tgt_out[row, n:] == tv.pad_id).all() and (batch.tgt_in[row, n:] == tv.pad_id).all()
        assert batch.src[row, : batch.src_lens[row]].tolist() == ex.src and ex.src[-1] == sv.eos_id
        assert (batch.src[row, batch.src_lens[row]:] == sv.pad_id).all()
    assert batch.num_tokens == sum(len(ex.tgt) for ex in examples)


def test_max_len_drops_long_pairs():
    pairs, sv, tv = _examples()
    kept = encode_pairs(pairs, sv, tv, max_len=6)
    expected = sum(len(p.src) + 1 <= 6 and len(p.tgt) + 1 <= 6 for p in pairs)
    assert len(kept) == expected and all(len(e.src) <= 6 and len(e.tgt) <= 6 for e in kept)


def test_bucketing_covers_every_example_once_and_cuts_padding():
    pairs, sv, tv = _examples(n=1000)
    examples = encode_pairs(pairs, sv, tv)
    batches = bucket_batches(*lengths(examples), 32, np.random.default_rng(1))
    flat = sorted(i for b in batches for i in b)
    assert flat == list(range(len(examples)))

    def padding(index_batches):
        total = 0
        for b in index_batches:
            lens = [len(examples[i].src) for i in b]
            total += max(lens) * len(lens) - sum(lens)
        return total

    shuffled = list(range(len(examples)))
    random.Random(1).shuffle(shuffled)
    random_batches = [shuffled[i: i + 32] for i in range(0, len(shuffled), 32)]
    assert padding(batches) < 0.2 * padding(random_batches)


def test_epochs_are_reproducible_and_differ():
    pairs, sv, tv = _examples()
    examples = encode_pairs(pairs, sv, tv)
    lens = lengths(examples)

    def draw(rng):
        return [b.tolist() for b in bucket_batches(*lens, 16, rng)]

    assert draw(np.random.default_rng(5)) == draw(np.random.default_rng(5))
    rng = np.random.default_rng(5)
    assert draw(rng) != draw(rng)
    assert draw(None) == draw(None)
    batches = list(iterate_batches(examples, 16, tv.pad_id, tv.bos_id))
    assert sum(b.src.shape[0] for b in batches) == len(examples)
    assert all(isinstance(b.src, torch.Tensor) and b.src.dtype == torch.long for b in batches)


def _examples_of_lengths(lengths):
    return [Example(src=[5] * s + [2], tgt=[6] * t + [2]) for s, t in lengths]


def test_token_batches_stay_within_the_budget_and_cover_every_example_once():
    rng = random.Random(0)
    examples = _examples_of_lengths([(rng.randint(1, 15), rng.randint(1, 15)) for _ in range(500)])
    lens = lengths(examples)
    batches = bucket_batches(*lens, batch_size=1, rng=np.random.default_rng(1), batch_tokens=120)
    assert sorted(i for b in batches for i in b) == list(range(500))
    for batch in batches:
        padded = len(batch) * max(len(examples[i].tgt) for i in batch)
        assert padded <= 120 or len(batch) == 1
    # The count depends on the lengths only, so the schedule can know the epoch's length.
    counts = {len(bucket_batches(*lens, 1, np.random.default_rng(seed), batch_tokens=120)) for seed in range(5)}
    assert counts == {len(bucket_batches(*lens, 1, None, batch_tokens=120))}


def test_a_sentence_longer_than_the_token_budget_gets_a_batch_of_its_own():
    examples = _examples_of_lengths([(3, 3), (3, 30), (3, 3)])
    batches = bucket_batches(*lengths(examples), batch_size=1, rng=None, batch_tokens=10)
    assert sorted(sorted(b.tolist()) for b in batches) == [[0, 2], [1]]


def _greedy_reference(order, tgt_lens, budget):
    """The token batches as cut example by example: what `token_batches` must equal."""
    batches, current, longest = [], [], 0
    for i in order:
        if current and (len(current) + 1) * max(longest, tgt_lens[i]) > budget:
            batches.append(current)
            current, longest = [], 0
        current.append(i)
        longest = max(longest, tgt_lens[i])
    return batches + ([current] if current else [])


def test_token_batches_cut_runs_as_the_example_by_example_greedy_does():
    rng = np.random.default_rng(0)
    for budget in (1, 7, 40, 120, 1000):
        src_lens, tgt_lens = rng.integers(1, 30, 3000), rng.integers(1, 30, 3000)
        order = np.lexsort((tgt_lens, src_lens))  # as a sorted window: runs of equal lengths
        got = [b.tolist() for b in token_batches(order, tgt_lens[order], budget)]
        assert got == _greedy_reference(order.tolist(), tgt_lens.tolist(), budget)


def test_collate_finds_the_target_positions_on_the_host():
    examples = _examples_of_lengths([(2, 1), (2, 3)])
    batch = collate(examples, pad_id=0, bos_id=1)
    assert batch.positions.tolist() == [0, 1, 4, 5, 6, 7]  # row 0: 2 of 4 slots, row 1: all 4
    assert torch.equal(batch.tgt_out.flatten()[batch.positions], batch.tgt_out[batch.tgt_out != 0])
    assert batch.to(torch.device("cpu")).src_lens.device.type == "cpu"
