"""Scoring on any test set (`nmt eval --test`, `--src/--ref`, `--testset`), dev and test sets of
one's own in training (data.valid, data.test), and paired bootstrap between checkpoints."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml
from conftest import TINY, toy_lines, train_toy_model, write_corpus_zip, seed_data
from typer.testing import CliRunner

from nmt.cli import app
from nmt.data.corpus import split_pair
from nmt.data.prepare import ensure_prepared
from nmt.data.prepared_corpus import PreparedCorpus
from nmt.evaluation.metrics import group_references
from nmt.model.checkpoint import load_model


def _eval(*args: str) -> list[str]:
    result = CliRunner().invoke(app, ["eval", "--bleu", *args])
    assert result.exit_code == 0, result.output
    return result.output.splitlines()


def _scores(lines: list[str]) -> list[str]:
    """The lines that must agree between two ways of giving one test set: the loss, BLEU and chrF."""
    return [line for line in lines if line.startswith(("loss", "beam", "greedy"))]


def _hyp_file(lines: list[str]) -> Path:
    return Path(lines[-1].rsplit("hypotheses written to ", 1)[1])


def _fails(*args: str) -> str:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 1, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    assert "Traceback" not in result.output
    return lines[0]


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> dict:
    return train_toy_model(tmp_path_factory.mktemp("testsets"), epochs=3)


@pytest.fixture
def split_files(trained, tmp_path) -> dict:
    """The run's test split written as files: one TSV of pairs, and a source file with as many
    reference streams as the most-translated source has (empty where a source has fewer)."""
    loaded = load_model(trained["run"])
    data = loaded.cfg.data
    pairs = PreparedCorpus(ensure_prepared(trained["corpus"], data), data).pairs("test")
    refs = group_references(pairs)
    width = max(len(r) for r in refs.references)
    assert width >= 2  # the toy corpus gives some sources two translations
    (tmp_path / "pairs.tsv").write_text("".join(f"{p.raw[0]}\t{p.raw[1]}\n" for p in pairs), encoding="utf-8")
    (tmp_path / "test.en").write_text("".join(s + "\n" for s in refs.sources), encoding="utf-8")
    streams = []
    for k in range(width):
        streams.append(tmp_path / f"test.fr{k}")
        streams[-1].write_text("".join((r[k] if k < len(r) else "") + "\n" for r in refs.references),
                               encoding="utf-8")
    return {"tsv": tmp_path / "pairs.tsv", "src": tmp_path / "test.en", "refs": streams}


def test_the_test_split_through_files_scores_exactly_as_the_split(trained, split_files):
    run, corpus = str(trained["run"]), str(trained["corpus"])
    split = _eval("-c", run, "--data", corpus)
    tsv = _eval("-c", run, "--test", str(split_files["tsv"]))
    streams = _eval("-c", run, "--src", str(split_files["src"]),
                    *[arg for ref in split_files["refs"] for arg in ("--ref", str(ref))])
    assert _scores(split) and _scores(split) == _scores(tsv) == _scores(streams)
    texts = [_hyp_file(lines).read_text(encoding="utf-8") for lines in (split, tsv, streams)]
    assert texts[0] == texts[1] == texts[2]
    # Three evaluations, three files: none overwrote another's hypotheses; nor does the split of
    # another corpus, which the result line names.
    other = Path("other.zip")
    other.write_bytes(trained["corpus"].read_bytes())
    foreign = _eval("-c", run, "--data", str(other), "--beam", "1")
    assert any("test split of other.zip" in line for line in foreign)
    assert len({_hyp_file(lines) for lines in (split, tsv, streams, foreign)}) == 4


def test_the_sacrebleu_command_agrees_with_the_hypotheses_nmt_wrote(trained, split_files, tmp_path):
    ref = tmp_path / "one.fr"  # one stream without empty lines: the sacrebleu command's own layout
    ref.write_text(split_files["refs"][0].read_text(encoding="utf-8"), encoding="utf-8")
    lines = _eval("-c", str(trained["run"]), "--src", str(split_files["src"]), "--ref", str(ref),
                  "--out", str(tmp_path / "hyps.txt"))
    ours = next(line for line in lines if line.startswith("beam 5:"))
    theirs = subprocess.run([sys.executable, "-m", "sacrebleu", str(ref), "-i", str(tmp_path / "hyps.txt"),
                             "-m", "bleu", "-w", "2"], capture_output=True, text=True, check=True)
    report = json.loads(theirs.stdout)
    assert ours.startswith(f"beam 5: BLEU {report['score']:.2f} |")
    assert f"| {report['signature']} |" in ours


def test_a_test_set_is_scored_whole_whatever_data_max_len_says(trained, tmp_path):
    long = "I see a cat and a dog and the house and the car today again and again."  # 18 > max_len 10
    test = tmp_path / "long.tsv"
    test.write_text(f"{long}\tje vois un chat.\nI see a cat.\tje vois un chat.\n", encoding="utf-8")
    lines = _eval("-c", str(trained["run"]), "--test", str(test), "--beam", "1")
    assert "long.tsv: 2 sources, 2 pairs" in lines[0]
    assert len(_hyp_file(lines).read_text(encoding="utf-8").splitlines()) == 2


def test_sacrebleu_registry_test_set_read_from_its_download_folder(trained, tmp_path):
    """Files placed where sacreBLEU keeps wmt14's en-fr: nothing is downloaded, sacreBLEU reads them."""
    folder = tmp_path / "sacrebleu" / "wmt14"
    folder.mkdir(parents=True)
    pairs = [line.split("\t") for line in toy_lines()[:40]]
    fields = {"src": [p[0] for p in pairs], "ref": [p[1] for p in pairs], "docid": ["d"] * 40,
              "genre": ["news"] * 40, "origlang": ["en"] * 40}
    for field, lines in fields.items():
        (folder / f"wmt14.en-fr.{field}").write_text("\n".join(lines) + "\n", encoding="utf-8")
    env = {**os.environ, "SACREBLEU": str(tmp_path / "sacrebleu")}
    proc = subprocess.run([sys.executable, "-m", "nmt", "eval", "--bleu", "-c", str(trained["run"]), "--testset",
                           "wmt14", "--beam", "1"], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "sacreBLEU test set wmt14 (en-fr): 40 sources, 40 pairs" in proc.stdout
    assert (trained["run"] / "hyps.sacrebleu-wmt14.en-fr.greedy.txt").is_file()


def test_sacrebleu_registry_without_the_internet_is_one_error_line(trained, tmp_path, monkeypatch):
    from sacrebleu.dataset import DATASETS

    def offline(*args, **kwargs):
        raise urllib.error.URLError("Name or service not known")

    dataset = DATASETS["wmt14"]
    monkeypatch.setattr(dataset, "_outdir", str(tmp_path / "wmt14"))
    monkeypatch.setattr(dataset, "_rawdir", str(tmp_path / "wmt14" / "raw"))
    monkeypatch.setattr(urllib.request, "urlopen", offline)
    line = _fails("eval", "--bleu", "-c", str(trained["run"]), "--testset", "wmt14", "--langpair", "en-fr")
    assert "could not get sacreBLEU's test set wmt14 (en-fr)" in line and "internet" in line
    assert "no language pair 'xx-yy'" in _fails("eval", "--bleu", "-c", str(trained["run"]), "--testset", "wmt14",
                                                "--langpair", "xx-yy")


def test_bad_test_files_are_one_error_line_each(trained, split_files, tmp_path):
    run, src = str(trained["run"]), str(split_files["src"])
    short = tmp_path / "short.fr"
    short.write_text("un\ndeux\n", encoding="utf-8")
    assert f"{src} has 5 lines but {short} has 2" in _fails("eval", "--bleu", "-c", run, "--src", src,
                                                            "--ref", str(short))
    empty = tmp_path / "empty.en"
    empty.write_text("", encoding="utf-8")
    assert "is empty" in _fails("eval", "--bleu", "-c", run, "--src", str(empty), "--ref", str(short))
    assert "cannot read missing.en" in _fails("eval", "--bleu", "-c", run, "--src", "missing.en", "--ref", str(short))
    assert "test set not found: missing.tsv" in _fails("eval", "--bleu", "-c", run, "--test", "missing.tsv")
    no_ref = tmp_path / "gap.fr"
    no_ref.write_text("un\n\ntrois\nquatre\ncinq\n", encoding="utf-8")
    assert "line 2 of" in _fails("eval", "--bleu", "-c", run, "--src", src, "--ref", str(no_ref))
    no_tab = tmp_path / "bad.tsv"
    no_tab.write_text("Go.\tVa !\nno tab here\n", encoding="utf-8")
    assert "line 2 holds no pair" in _fails("eval", "--bleu", "-c", run, "--test", str(no_tab))
    assert "give one" in _fails("eval", "--bleu", "-c", run, "--test", str(no_tab), "--src", src)
    assert "--data names the corpus" in _fails("eval", "-c", run, "--test", str(no_tab), "--data", "x.zip")
    assert "--out names one" in _fails("eval", "--bleu", "-c", run, "-c", run, "--src", src, "--ref", src,
                                       "--out", "h.txt")


def test_two_checkpoints_are_compared_by_paired_bootstrap(trained, split_files):
    run = trained["run"]
    same = _eval("-c", str(run), "-c", str(run / "best.pt"), "--test", str(split_files["tsv"]), "--beam", "1")
    compared = next(line for line in same if line.strip().startswith(f"{run / 'best.pt'}:") and "difference" in line)
    assert "BLEU" in compared and "difference +0.00, p = 1 (identical translations)" in compared
    first = sorted(run.glob("ckpt-*.pt"))[0]
    other = _eval("-c", str(run), "-c", str(first), "--test", str(split_files["tsv"]), "--beam", "1")
    line = next(line for line in other if line.strip().startswith(f"{first}:"))
    assert "difference" in line and "p = 0." in line
    assert any("bs:1000|seed:12345" in line for line in other)


def test_the_paired_test_is_repeated_on_the_rare_word_subset(trained, split_files, tmp_path):
    """Two models are compared on the sources holding a word their training never saw too, and
    only on those: the subset the single-model lines score, here three sources made rare."""
    run, lines = trained["run"], split_files["tsv"].read_text(encoding="utf-8").splitlines()
    marked = [line.replace("\t", " zyzzyva\t", 1) if i < 3 else line for i, line in enumerate(lines)]
    (tmp_path / "rare.tsv").write_text("\n".join(marked) + "\n", encoding="utf-8")
    first = sorted(run.glob("ckpt-*.pt"))[0]
    out = _eval("-c", str(run), "-c", str(first), "--test", str(tmp_path / "rare.tsv"), "--beam", "1")
    subset = next(line for line in out if line.startswith("rare-word subset ("))
    sources = int(subset.split("(")[1].split()[0].replace(",", ""))
    assert sources >= 3
    title = out.index(next(line for line in out if line.startswith(f"on the rare-word subset ({sources:,} sources)")))
    assert title > out.index(next(line for line in out if line.startswith("paired bootstrap resampling against")))
    assert out[title + 2].strip().startswith(f"{first}:") and "chrF" in out[title + 2] and "p = " in out[title + 2]


def test_training_validates_on_the_given_dev_set_drops_the_overlap_and_rebuilds_when_it_changes(tmp_path):
    lines = toy_lines()
    write_corpus_zip(tmp_path / "toy.zip", lines)
    dev = tmp_path / "dev.tsv"
    unseen = "We like a zebra.\tnous aimons un zèbre."
    dev.write_text("\n".join(lines[:20] + [unseen]) + "\n", encoding="utf-8")  # 20 training pairs, 1 new
    config = tmp_path / "tiny.yaml"
    config.write_text(yaml.safe_dump({**TINY, "train": {**TINY["train"], "epochs": 1}}), encoding="utf-8")
    result = CliRunner().invoke(app, ["train", str(config), "--data", "toy.zip", "--valid", "dev.tsv",
                                      "--out", "run", "--quiet"])
    assert result.exit_code == 0, result.output
    log = (tmp_path / "run" / "train.log").read_text(encoding="utf-8")
    assert "validating on data.valid dev.tsv: 21 pairs" in log
    overlap = next(line for line in log.splitlines() if "overlap:" in line)
    assert "dropped from training" in overlap
    folder = next(p for p in (tmp_path / "data" / "prepared").iterdir() if p.is_dir())
    manifest = json.loads((folder / "manifest.json").read_text())
    dev_sources = {" ".join(split_pair(*line.split("\t"), seed_data())[1].src) for line in lines[:20]}
    held_in_training = [line for line in lines if (found := split_pair(*line.split("\t"), seed_data()))[0] != "test"
                        and " ".join(found[1].src) in dev_sources]  # the md5 test split is not given: it stays
    assert manifest["counts"]["valid"] == 21 and manifest["counts"]["overlap"] == len(held_in_training) >= 15
    assert manifest["counts"]["train"] + manifest["counts"]["overlap"] + manifest["counts"]["test"] == len(lines)
    record = json.loads((tmp_path / "run" / "metrics.jsonl").read_text().splitlines()[-1])
    assert record["val_loss"] > 0  # validated on the dev set
    dev.write_text("\n".join(lines[:20]) + "\n", encoding="utf-8")  # edited: the prepared folder is stale
    result = CliRunner().invoke(app, ["prepare", str(config), "--data", "toy.zip", "--set", "data.valid=dev.tsv"])
    assert result.exit_code == 0, result.output
    assert json.loads((folder / "manifest.json").read_text())["counts"]["valid"] == 20  # rebuilt from the edit
    assert "data.valid not found: nope.tsv" in _fails("train", str(config), "--data", "toy.zip", "--valid", "nope.tsv")
    assert not (tmp_path / "runs").exists()  # the failed start wrote no run directory
