"""An epoch's order a window at a time: every trainable row once, shuffled over the whole corpus,
the same on every count, slice, resume and rank, whatever the window."""

import numpy as np
import pytest

from nmt.data import epoch_order
from nmt.data.epoch_order import EpochBatches, Lengths, Permutation, bucket_batches, stable_order


@pytest.mark.parametrize("n", [1, 2, 3, 17, 1000, 4097, 300_001])
def test_the_permutation_is_a_bijection_of_range_n(n):
    out = Permutation(n, np.random.default_rng(n))(np.arange(n))
    assert np.array_equal(np.sort(out), np.arange(n))


def test_the_permutation_depends_on_the_key_and_shuffles():
    a, b = (Permutation(10_000, np.random.default_rng(seed))(np.arange(10_000)) for seed in (1, 2))
    assert not np.array_equal(a, b)
    # A shuffle, not a stride: the first thousand positions land all over the range, in no order.
    first = a[:1000]
    assert np.histogram(first, bins=10, range=(0, 10_000))[0].min() > 60
    assert abs(np.corrcoef(np.arange(1000), first)[0, 1]) < 0.1


@pytest.mark.parametrize("high", [3, 1 << 17, 1 << 40])  # 16-bit keys, keys just past them, wide ones
def test_the_stable_order_is_numpys_whether_or_not_the_keys_fit_16_bits(high):
    keys = np.random.default_rng(high).integers(0, high, 5000)
    assert np.array_equal(stable_order(keys), np.argsort(keys, kind="stable"))


@pytest.fixture
def small_windows(monkeypatch):
    monkeypatch.setattr(epoch_order, "WINDOW", 64)


def _lens(n, seed=0):
    rng = np.random.default_rng(seed)
    src, tgt = rng.integers(2, 20, n).astype(np.uint8), rng.integers(2, 20, n).astype(np.uint8)
    too_long = rng.random(n) < 0.1  # marked 0, as TrainingSet marks pairs over data.max_len
    src[too_long], tgt[too_long] = 0, 0
    return src, tgt


@pytest.mark.parametrize("batch_size, batch_tokens", [(8, 0), (1, 60)])
def test_every_fitting_row_once_globally_shuffled_and_counted_without_making_the_list(small_windows, batch_size,
                                                                                     batch_tokens):
    src, tgt = _lens(1000)
    epoch = EpochBatches(Lengths(src, tgt), batch_size, np.random.default_rng(3), batch_tokens)
    batches = list(epoch)
    rows = np.concatenate(batches)
    assert sorted(rows.tolist()) == np.flatnonzero(src).tolist()  # each trainable row once, no long one
    assert len(epoch) == len(batches) == len(EpochBatches(Lengths(src, tgt), batch_size, np.random.default_rng(3),
                                                          batch_tokens))
    first_window = np.concatenate(epoch.window(0))
    assert len(set((first_window // 100).tolist())) >= 8  # a window draws from (nearly) every tenth of the corpus
    if batch_tokens:
        assert all(len(b) * tgt[b].max() <= batch_tokens or len(b) == 1 for b in batches)
    else:
        assert all(sum(len(b) != batch_size for b in epoch.window(w)) <= 1 for w in range(epoch.windows))
    for start in (0, 5, 17, len(batches) - 1, len(batches)):  # a resumed run continues where it stopped
        assert [b.tolist() for b in epoch.from_batch(start)] == [b.tolist() for b in batches[start:]]
    groups = list(epoch.groups(3, 4))
    assert [len(g) for g in groups[:-1]] == [4] * (len(groups) - 1)
    assert [b.tolist() for g in groups for b in g] == [b.tolist() for b in batches[3:]]
    assert [b.tolist() for b in epoch[:4]] == [b.tolist() for b in batches[:4]]


def test_two_ranks_share_each_global_batch_across_windows(small_windows):
    src, tgt = _lens(500, seed=1)
    single = list(EpochBatches(Lengths(src, tgt), 10, np.random.default_rng(5)))
    ranks = [EpochBatches(Lengths(src, tgt), 5, np.random.default_rng(5), rank=r, size=2) for r in range(2)]
    shards = [list(r) for r in ranks]
    dropped = [b for b in single if len(b) < 2]  # a window's last batch of one row gives a rank nothing
    assert len(shards[0]) == len(shards[1]) == len(ranks[0]) == len(single) - len(dropped)
    kept = [b for b in single if len(b) >= 2]
    for a, b, whole in zip(*shards, kept):
        assert not set(a.tolist()) & set(b.tolist()) and sorted([*a.tolist(), *b.tolist()]) == sorted(whole.tolist())


def test_without_a_random_state_the_order_is_fixed_and_sorted_within_a_window(small_windows):
    src, tgt = _lens(300, seed=2)
    a, b = (list(EpochBatches(Lengths(src, tgt), 16)) for _ in range(2))
    assert [x.tolist() for x in a] == [x.tolist() for x in b]
    first = np.concatenate(EpochBatches(Lengths(src, tgt), 16).window(0))
    assert set(first.tolist()) == set(np.flatnonzero(src[:64]).tolist())
    keys = list(zip(src[first].tolist(), tgt[first].tolist()))
    assert keys == sorted(keys) and len(set(keys)) > 10  # by source length, then target length


def test_weighted_rows_are_batched_as_given(small_windows):
    src, tgt = _lens(200, seed=4)
    rows = np.concatenate([np.arange(200), np.arange(50)])  # the first 50 drawn twice, as a corpus mix does
    batches = list(EpochBatches(Lengths(src, tgt), 8, np.random.default_rng(0), rows=rows))
    drawn = np.concatenate(batches).tolist()
    assert sorted(drawn) == sorted(r for r in rows.tolist() if src[r])


def test_the_inverse_finds_each_rows_position():
    permutation = Permutation(5000, np.random.default_rng(7))
    rows = permutation(np.arange(5000))
    assert np.array_equal(permutation.inverse(rows), np.arange(5000))


def test_windows_shuffle_globally_then_sort_each_window(monkeypatch):
    monkeypatch.setattr(epoch_order, "WINDOW", 100)
    rng = np.random.default_rng(0)
    src_lens, tgt_lens = rng.integers(1, 20, 1000), rng.integers(1, 20, 1000)
    batches = bucket_batches(src_lens, tgt_lens, 10, np.random.default_rng(3))
    assert sorted(i for b in batches for i in b.tolist()) == list(range(1000))
    # Each window of 100 is cut into 10 batches of examples sorted by length.
    for batch in batches:
        keys = list(zip(src_lens[batch], tgt_lens[batch]))
        assert keys == sorted(keys) and len(batch) == 10
    # The permutation is global: each window's 100 examples come from (nearly) every tenth of the corpus,
    # where a window-local shuffle would keep each to one tenth.
    for w in range(10):
        rows = np.concatenate(batches[10 * w: 10 * (w + 1)])
        assert len(set((rows // 100).tolist())) >= 8, sorted(set((rows // 100).tolist()))
