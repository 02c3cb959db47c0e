"""Any parallel corpus, either direction: a manythings-style zip of another language pair, a
tab-separated file, two line-aligned files; French to English from the real corpus; and every
kind of bad corpus as one line."""

import itertools
import subprocess
import sys
import zipfile

import pytest
import yaml
from conftest import REPO, TINY, toy_lines, seed_data
from typer.testing import CliRunner

from nmt.cli import app
from nmt.data.corpus import load_splits
from nmt.data.tokenizer import SubwordTokenizer, source_text, word_text
from nmt.errors import DataError
from nmt.evaluation.metrics import score

runner = CliRunner()

# A made-up German-like language, word for word from English: enough to learn in a few seconds.
VERBS = {"see": "sehe siehst sieht sehen sehen", "have": "habe hast hat haben haben",
         "want": "will willst will wollen wollen", "like": "mag magst mag mögen mögen"}
SUBJECTS = {"I": "Ich", "You": "Du", "He": "Er", "We": "Wir", "They": "Sie"}
OBJECTS = {"a dog": "einen Hund", "the house": "das Haus", "the car": "das Auto", "a big boat": "ein großes Boot",
           "green tea": "grünen Tee", "the small bird": "den kleinen Vogel", "red apples": "rote Äpfel"}
ENDINGS = {".": ".", "!": "!", " today.": " heute.", " again!": " wieder!"}


def german_pairs() -> list[tuple[str, str]]:
    pairs = []
    for (person, (en_s, de_s)), (en_v, forms), (en_o, de_o), (en_e, de_e) in itertools.product(
            enumerate(SUBJECTS.items()), VERBS.items(), OBJECTS.items(), ENDINGS.items()):
        en_verb = en_v + "s" if en_s == "He" else en_v
        pairs.append((f"{en_s} {en_verb} {en_o}{en_e}", f"{de_s} {forms.split()[person]} {de_o}{de_e}"))
    return pairs


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


def one_line_error(result) -> str:
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, result.output
    return errors[0]


@pytest.fixture(scope="module")
def german(tmp_path_factory):
    """The German-like corpus as manythings packages it (deu-eng.zip: deu.txt with an attribution
    column, and _about.txt), and the same pairs as two line-aligned files."""
    root = tmp_path_factory.mktemp("german")
    pairs = german_pairs()
    with zipfile.ZipFile(root / "deu-eng.zip", "w") as z:
        z.writestr("_about.txt", "a made-up corpus\n")
        z.writestr("deu.txt", "".join(f"{en}\t{de}\tCC-BY 2.0 (France) Attribution: test #{i}\n"
                                      for i, (en, de) in enumerate(pairs)))
    (root / "corpus.en").write_text("".join(en + "\n" for en, _ in pairs), encoding="utf-8")
    (root / "corpus.de").write_text("".join(de + "\n" for _, de in pairs), encoding="utf-8")
    config = root / "de.yaml"
    # (a quarter of its pairs differ from another only in punctuation, which data.drop_duplicates would drop: the
    # outputs the test reads are learned from them)
    config.write_text(yaml.safe_dump({**TINY, "data": {**TINY["data"], "src_lang": "en", "tgt_lang": "de",
                                                       "drop_duplicates": False},
                                      "train": {**TINY["train"], "epochs": 6}}), encoding="utf-8")
    return root


def test_the_zip_and_the_two_files_give_the_same_split(german):
    cfg = seed_data(src_lang="en", tgt_lang="de")
    from_zip, from_files = load_splits(german / "deu-eng.zip", cfg=cfg), load_splits(german / "corpus", cfg=cfg)
    for name in ("train", "valid", "test"):
        assert getattr(from_zip, name) == getattr(from_files, name), name
    assert from_zip.skipped == 0 and len(from_zip.train) + len(from_zip.valid) + len(from_zip.test) == 560
    reverse = load_splits(german / "corpus", cfg=seed_data(src_lang="en", tgt_lang="de", reverse=True))
    where: dict[str, set] = {}  # grouped by the source, now the German side
    for name in ("train", "valid", "test"):
        for pair in getattr(reverse, name):
            assert pair.src_text in dict((de, en) for en, de in german_pairs())
            where.setdefault(pair.src_text, set()).add(name)
    assert all(len(names) == 1 for names in where.values())


@pytest.mark.parametrize("form", ["deu-eng.zip", "corpus"])
def test_another_language_pair_trains_translates_and_evaluates(german, tmp_path, form):
    run = tmp_path / "run"
    result = invoke("train", german / "de.yaml", "--data", german / form, "--out", run, "--quiet")
    assert result.exit_code == 0, result.output
    assert "(en -> de)" in (run / "train.log").read_text()
    out = invoke("translate", "-c", run, "We see the car today.", "He likes a dog!")
    assert out.exit_code == 0, out.output
    # A word model writes lowercased words: German punctuation (no space before !), a capital first letter.
    assert out.stdout.splitlines() == ["Wir sehen das auto heute.", "Er mag einen hund!"]
    ev = invoke("eval", "--bleu", "-c", run)  # its own corpus, as the checkpoint records it: no --data again
    assert ev.exit_code == 0, ev.output
    lines = ev.stdout.splitlines()
    assert f"test split of {(german / form).resolve()}" in lines[0], lines[0]
    assert "(word tokenizer, en -> de)" in lines[0] and "tok:13a" in next(x for x in lines if x.startswith("beam 5: BLEU"))
    legacy = next(x for x in lines if x.startswith("beam 5, lowercased and tokenized (legacy): BLEU"))
    assert float(legacy.split()[7]) > 50  # lowercased, as the word model writes


def test_french_to_english_from_the_same_file(toy_zip, tmp_path):
    config = tmp_path / "reverse.yaml"
    config.write_text(yaml.safe_dump({**TINY, "data": {**TINY["data"], "reverse": True},
                                      "train": {**TINY["train"], "epochs": 6}}), encoding="utf-8")
    splits = load_splits(toy_zip, cfg=seed_data(reverse=True))
    assert all(p.src_text in {line.split("\t")[1] for line in toy_lines()} for p in splits.train)
    run = tmp_path / "run"
    result = invoke("train", config, "--data", toy_zip, "--out", run, "--quiet")
    assert result.exit_code == 0, result.output
    assert "(fr -> en)" in (run / "train.log").read_text()
    out = invoke("translate", "-c", run, "Je vois un chat.", "Nous adore thé vert !")
    assert out.stdout.splitlines() == ["I see a cat.", "We like green tea."]  # English: no space before .


def test_bad_corpora_are_one_line(tmp_path):
    several = tmp_path / "several.zip"
    with zipfile.ZipFile(several, "w") as z:
        z.writestr("a/deu.txt", "Hi.\tHallo.\n")
        z.writestr("a/ita.txt", "Hi.\tCiao.\n")
    no_tabs = tmp_path / "no-tabs.txt"
    no_tabs.write_text("Hi. Hallo.\nBye. Tschüss.\n", encoding="utf-8")
    empty = tmp_path / "empty.txt"
    empty.write_text("", encoding="utf-8")
    (tmp_path / "uneven.en").write_text("Hi.\nBye.\nGo.\n", encoding="utf-8")
    (tmp_path / "uneven.de").write_text("Hallo.\nTschüss.\n", encoding="utf-8")
    (tmp_path / "latin.en").write_text("Hi.\nCoffee.\n", encoding="utf-8")
    (tmp_path / "latin.de").write_bytes("Hallo.\nKaffee schmeckt süß.\n".encode("latin-1"))
    config = tmp_path / "de.yaml"
    config.write_text(yaml.safe_dump({**TINY, "data": {**TINY["data"], "src_lang": "en", "tgt_lang": "de"}}),
                      encoding="utf-8")
    expected = {several: "several text files (a/deu.txt, a/ita.txt)", no_tabs: "line 1 has no tab",
                empty: "it is empty", tmp_path / "uneven": "uneven.en has 3 lines but",
                tmp_path / "latin": "latin.de: line 2 is not valid UTF-8",
                tmp_path / "missing": "corpus not found"}
    for number, (corpus, fragment) in enumerate(expected.items()):
        run = tmp_path / f"run{number}"
        error = one_line_error(invoke("train", config, "--data", corpus, "--out", run, "--quiet"))
        assert fragment in error, error
        assert not (run / "best.pt").exists()


def test_text_rules_follow_the_language():
    assert source_text("Go !", "en") == "Go!" and source_text("Va !", "fr") == "Va !"
    assert source_text("Non , merci .", "fr") == "Non, merci."
    assert word_text(["wir", "sehen", "es", "!"], "de") == "Wir sehen es!"
    pairs = german_pairs()
    cfg = seed_data(tokenizer="subword", vocab_size=300, subword_type="bpe", tgt_lang="de")
    subword = SubwordTokenizer.train([en for en, _ in pairs], [de for _, de in pairs], cfg)
    assert subword.target_text(subword.target_tokens(["Er mag rote Äpfel!"])[0]) == "Er mag rote Äpfel!"
    assert word_text(["on", "y", "va", "!"], "fr") == "On y va !"
    assert "tok:zh" in score(["我很好。"], [["我很好。"]], target_lang="zh").signature
    assert "tok:13a" in score(["Wir sehen es!"], [["Wir sehen es!"]], target_lang="de").signature
    with pytest.raises(DataError, match="no usable"):
        load_splits(REPO / "pyproject.toml")  # not a corpus at all


def test_real_corpus_french_to_english(real_corpus, tmp_path):
    """configs/tiny.yaml (the corpus's first 5,000 lines) the other way round, through the real entry point."""
    train = subprocess.run([sys.executable, "-m", "nmt", "train", REPO / "configs/tiny.yaml", "--data", real_corpus,
                            "--out", "run", "--quiet", "--set", "data.reverse=true", "--set", "train.epochs=2"],
                           cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert train.returncode == 0, train.stderr
    log = (tmp_path / "run/train.log").read_text()
    assert "(fr -> en)" in log and "vocab (word)" in log
    out = subprocess.run([sys.executable, "-m", "nmt", "translate", "-c", "run", "Va !"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    english = out.stdout.strip()
    assert english and english[0].isupper() and " !" not in english and " ." not in english, english
