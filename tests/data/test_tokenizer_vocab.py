from pathlib import Path

from nmt.data.tokenizer import TOKENIZER
from nmt.data.vocab import SPECIALS, Vocab


def test_preprocess_follows_d2l():
    assert TOKENIZER.preprocess("Go.") == "go ."
    assert TOKENIZER.preprocess("Hi!\u202fOK?") == "hi ! ok ?"
    assert TOKENIZER.preprocess("Non,\xa0merci.") == "non , merci ."
    assert TOKENIZER.preprocess("Wait !") == "wait !"  # a space already precedes: none added
    assert TOKENIZER.preprocess("Wait...") == "wait . . ."
    assert TOKENIZER.preprocess("I'm OK.") == "i'm ok ."
    assert TOKENIZER.preprocess(".Go") == ".go"  # d2l adds no space at position 0


def test_tokenize_splits_on_whitespace():
    assert TOKENIZER.tokenize("  He's  calm.\t") == ["he's", "calm", "."]
    assert TOKENIZER.detokenize(["va", "!"]) == "va !"


def test_vocab_order_specials_and_min_freq():
    vocab = Vocab.build([["b", "a", "c"], ["a", "b"], ["a", "d"]], min_freq=2)
    assert vocab.itos == list(SPECIALS) + ["a", "b"]  # a (3) before b (2); c, d below min_freq
    assert (vocab.pad_id, vocab.bos_id, vocab.eos_id, vocab.unk_id) == (0, 1, 2, 3)
    ties = Vocab.build([["z", "y", "x"]], min_freq=1)
    assert ties.itos[4:] == ["x", "y", "z"]  # equal counts: ordered by token


def test_vocab_encode_decode_and_save(tmp_path: Path):
    vocab = Vocab.build([["a", "b", "a"]], min_freq=1)
    assert vocab.encode(["a", "zzz"]) == [4, vocab.unk_id]
    assert vocab.decode([vocab.bos_id, 4, 5, vocab.eos_id, 4]) == ["a", "b"]
    vocab.save(tmp_path / "v.txt")
    assert Vocab.load(tmp_path / "v.txt") == vocab
