"""Translations a person can check: each token's and word's log-probability, the model's score of
a given translation (forced decoding), and hard word alignments from the attention."""

import math

import pytest
import yaml
from conftest import TINY, toy_lines, write_corpus_zip
from typer.testing import CliRunner

from nmt.cli import app
from nmt.inference.text.words import WORD_START, pharaoh, text_words, word_groups, words_of

SENTENCES = ["I see a cat.", "She likes green tea today.", "We have the small bird again."]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = tmp_path_factory.mktemp("checkable")
    corpus = write_corpus_zip(root / "toy.zip", toy_lines())
    config = root / "c.yaml"
    data = {**TINY["data"], "tokenizer": "subword", "vocab_size": 320, "max_len": 24}
    config.write_text(yaml.safe_dump({**TINY, "data": data, "train": {**TINY["train"], "epochs": 8}}))
    result = CliRunner().invoke(app, ["train", str(config), "--data", str(corpus), "--out", str(root / "run"),
                                      "--quiet"])
    assert result.exit_code == 0, result.output
    return root / "run"


@pytest.fixture(scope="module")
def model(run):
    import nmt

    return nmt.load(run)


def test_pieces_group_into_the_words_of_the_text():
    pieces = ["▁J", "'", "ai", "▁", "⦅N1⦆", "▁chat", "s", "▁!", "<eos>"]
    assert word_groups(pieces, subword=True) == [[0, 1, 2], [4], [5, 6], [7]]
    assert [w for w, _ in words_of(["▁Ça", "▁coûte", "▁", "30 000", "▁yens"])] == ["Ça", "coûte", "30", "000", "yens"]
    assert word_groups(["je", "vois", ",", "<eos>"], subword=False) == [[0], [1], [2]]
    # a word model's words are its text's: capitalized, punctuation attached
    assert text_words("Je vois un chat.", ["je", "vois", "un", "chat", "."]) == [
        ("Je", [0]), ("vois", [1]), ("un", [2]), ("chat.", [3, 4])]
    assert pharaoh([(0, 0), (2, 1)]) == "0-0 2-1"


@pytest.mark.parametrize("beam", [1, 3])
def test_each_token_and_word_has_its_log_probability(model, beam):
    for t in model.translations(SENTENCES, beam=beam):
        assert len(t.token_scores) == len(t.tokens) + 1  # <eos> last
        assert all(s <= 0 for s in t.token_scores)
        assert sum(t.token_scores) == pytest.approx(t.score * (len(t.tokens) + 1), abs=1e-3)  # length_penalty 1
        assert t.mean_score == pytest.approx(sum(t.token_scores) / len(t.token_scores))
        assert t.words == t.text.split()
        groups = word_groups(t.tokens, subword=True)
        assert t.word_scores == [min(t.token_scores[i] for i in g) for g in groups]
        # a word starts at a "▁", on its first piece or alone before it
        assert all(t.tokens[g[0]].startswith(WORD_START) or t.tokens[g[0] - 1] == WORD_START for g in groups)


def test_scoring_a_translation_gives_the_searchs_own_scores(model):
    best = model.translations(SENTENCES, beam=3)
    given = model.score(SENTENCES, [t.text for t in best])
    same = [(b, g) for b, g in zip(best, given) if b.tokens == g.tokens]  # re-segmented alike
    assert len(same) >= 2
    for b, g in same:
        assert g.token_scores == pytest.approx(b.token_scores, abs=1e-4)
        assert g.score == pytest.approx(b.score, abs=1e-4) and g.text == b.text


def test_a_scrambled_translation_scores_lower(model):
    right, scrambled = model.score(["I see a cat."] * 2, [model.translate("I see a cat."), "Chat un vois je."])
    assert right.score > scrambled.score and right.mean_score > scrambled.mean_score
    assert model.score([""], ["Je."])[0].token_scores == []  # an empty source has no translation to score


def test_alignments_cover_every_source_word_once_or_every_output_word_once(model):
    from nmt.inference.translator import alignments

    best = model.translations(SENTENCES)
    for text, t, pairs in zip(SENTENCES, best, alignments(model, SENTENCES, best)):  # what --align prints
        attention = model.attention(text, t.tokens)
        assert [s for s, _ in pairs] == list(range(len(pairs))) and len(pairs) >= len(text.split())  # each once
        assert all(0 <= o < len(t.words) for _, o in pairs)
        assert pairs == attention.alignment(t)  # batched = one at a time
    for text, t, pairs in zip(SENTENCES, best, alignments(model, SENTENCES, best, each_output_word=True)):
        assert [o for _, o in pairs] == list(range(len(t.words)))
        assert all(0 <= s < len(text.split()) for s, _ in pairs)
        assert pairs == model.attention(text, t.tokens).alignment(t, each_output_word=True)


def test_translate_prints_scores_and_alignments(run):
    result = CliRunner().invoke(app, ["translate", *SENTENCES, "-c", str(run), "--scores", "--align"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert len(lines) == len(SENTENCES)
    for line in lines:
        text, mean, words, alignment = line.split("\t")
        assert float(mean) <= 0 and len(words.split()) == len(text.split())
        links = [tuple(int(i) for i in link.split("-")) for link in alignment.split()]
        assert [s for s, _ in links] == list(range(len(links))) and all(0 <= o < len(text.split()) for _, o in links)
        assert all(math.isfinite(float(s)) for s in words.split())


def test_score_reads_files_or_tab_separated_stdin(run, tmp_path):
    src, hyp = tmp_path / "src.txt", tmp_path / "hyp.txt"
    src.write_text("I see a cat.\nWe like red apples.\n")
    hyp.write_text("Je vois un chat.\nNous aimons pommes rouges.\n")
    runner = CliRunner()
    files = runner.invoke(app, ["score", "--src", str(src), "--hyp", str(hyp), "-c", str(run)])
    piped = runner.invoke(app, ["score", "-c", str(run)],
                          input="I see a cat.\tJe vois un chat.\nWe like red apples.\tNous aimons pommes rouges.\n")
    assert files.exit_code == 0 and piped.exit_code == 0, files.output + piped.output
    assert files.stdout == piped.stdout and len(files.stdout.splitlines()) == 2
    score, mean, words = files.stdout.splitlines()[0].split("\t")
    assert float(score) < 0 and len(words.split()) == 4
    hyp.write_text("Je vois un chat.\n")
    short = runner.invoke(app, ["score", "--src", str(src), "--hyp", str(hyp), "-c", str(run)])
    assert short.exit_code == 1 and "--src has 2 lines and --hyp 1" in short.output
    no_tab = runner.invoke(app, ["score", "-c", str(run)], input="I see a cat.\n")
    assert no_tab.exit_code == 1 and "stdin line 1: expected 'source<TAB>translation'" in no_tab.output


@pytest.mark.parametrize("beam", [1, 3])
def test_a_prefix_starts_every_output_and_the_search_completes_it(model, beam):
    prefix = "Nous aimons"  # not what the model writes for "I see a cat."
    for text, t in zip(SENTENCES, model.translations(SENTENCES, beam=beam, prefix=prefix)):
        assert t.text.startswith(prefix) and len(t.text) > len(prefix), t.text  # may go on with its last word
        forced = model.tokenizer.target_tokens([prefix])[0]
        assert t.tokens[: len(forced)] == forced
        rescored = model.score(text, t.text)[0]  # forced prefix tokens are scored as the model scores them
        if rescored.tokens == t.tokens:
            assert rescored.token_scores == pytest.approx(t.token_scores, abs=1e-4)
    per_sentence = model.translations(SENTENCES[:2], beam=beam, prefix=["Je", "Elle"])
    assert [t.text.split()[0] for t in per_sentence] == ["Je", "Elle"]
    for hyps in model.nbest(SENTENCES[:1], n=3, prefix=prefix):
        assert len(hyps) == 3 and all(h.text.startswith(prefix) for h in hyps)


def test_prefixes_must_be_one_or_one_per_sentence(model):
    from nmt.errors import NmtError

    with pytest.raises(NmtError, match="2 prefixes for 3 sentences"):
        model.translations(SENTENCES, prefix=["Je", "Tu"])


def test_translate_completes_a_prefix(run):
    result = CliRunner().invoke(app, ["translate", "I see a cat.", "-c", str(run), "--prefix", "Je vois"])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("Je vois") and len(result.stdout.strip()) > len("Je vois")
