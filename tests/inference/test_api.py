"""The Python API: `nmt.load(RUN)` translates exactly as `nmt translate` does, one sentence or a
list, greedy or beam, with n-best lists, scores and the attention of a sentence."""

import ast
import subprocess
import sys

import pytest
import torch
from conftest import REPO, train_toy_model
from typer.testing import CliRunner

import nmt
from nmt.cli import app

SENTENCES = ["I see a cat.", "She has the house today.", "", "Zebras juggle quietly.", "We like green tea again."]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return train_toy_model(tmp_path_factory.mktemp("api"), epochs=4)["run"]


def cli_translate(*args) -> list[str]:
    result = CliRunner().invoke(app, ["translate", *map(str, args)])
    assert result.exit_code == 0, result.output
    return result.stdout.split("\n")[:-1]


def test_load_and_translate_print_what_the_cli_prints(run, tmp_path):
    model = nmt.load(run)
    lines = tmp_path / "in.txt"
    lines.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    assert model.translate(SENTENCES) == cli_translate("-c", run, "--input", lines)  # empty in, empty out
    assert model.translate(SENTENCES[0]) == cli_translate("-c", run, SENTENCES[0])[0]  # str in, str out
    assert model.translate(SENTENCES[:2], beam=5) == cli_translate("-c", run, "--beam", "5", *SENTENCES[:2])
    assert model.translate(SENTENCES[:2], tokenized=True) == cli_translate("-c", run, "--tokenized", *SENTENCES[:2])
    assert model.translate("") == "" and model.translate([]) == []


def test_python_one_liner_from_the_issue(run):
    """python -c "import nmt; print(nmt.load('RUN').translate(['Go.', 'I am cold.']))" prints what
    nmt translate -c RUN "Go." "I am cold." prints."""
    code = f"import nmt; print(nmt.load({str(run)!r}).translate(['Go.', 'I am cold.']))"
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert ast.literal_eval(proc.stdout.strip()) == cli_translate("-c", run, "Go.", "I am cold.")


def test_nbest_scores_attention_device_and_batch_size(run, tmp_path, monkeypatch):
    model = nmt.load(run, device="cpu", batch_size=2)
    assert model.cfg.batch_size == 2 and model.device == torch.device("cpu")
    assert model.translate(SENTENCES) == nmt.load(run).translate(SENTENCES)  # batching does not change results
    lists = model.nbest(SENTENCES, n=3, beam=4)
    assert [len(x) for x in lists] == [3, 3, 0, 3, 3]  # [] for the empty sentence
    for translations in lists:
        scores = [t.score for t in translations]
        assert scores == sorted(scores, reverse=True)
        assert len({t.text for t in translations}) == len(translations)
    assert [x[0].text if x else "" for x in lists] == model.translate(SENTENCES, beam=4)
    nbest_lines = cli_translate("-c", run, "--beam", "4", "--nbest", "3", SENTENCES[0])
    assert nbest_lines == [f"0\t{t.score:.4f}\t{t.text}" for t in lists[0]]
    best = model.nbest(SENTENCES[0])[0][0]  # the run's search (beam 5)
    assert best.text == model.translate(SENTENCES[0]) and best.score < 0
    greedy = model.nbest(SENTENCES[0], beam=1)[0][0]  # greedy results carry their score too
    assert greedy.text == model.translate(SENTENCES[0], beam=1) and greedy.score < 0
    attention = model.attention(SENTENCES[0])
    assert attention.src_tokens[-1] == attention.tgt_tokens[-1] == "<eos>"
    assert attention.weights.shape == (len(attention.tgt_tokens), len(attention.src_tokens))
    assert torch.allclose(attention.weights.sum(-1), torch.ones(len(attention.tgt_tokens)), atol=1e-5)
    forced = model.attention(SENTENCES[0], lists[0][1].tokens)  # behind a given output: the second best
    assert forced.tgt_tokens == lists[0][1].tokens + ["<eos>"]
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "only").symlink_to(run, target_is_directory=True)
    assert nmt.load().translate(SENTENCES[0]) == model.translate(SENTENCES[0])  # the newest run by default


def test_an_output_cut_at_its_length_cap_is_said_naming_the_line(run, caplog):
    """A translation that reaches its length cap is cut there: a warning names its line in the
    whole input (as `nmt translate` prints it) and the Translation carries it."""
    import dataclasses

    from nmt.inference.translator import Options

    model = nmt.load(run, device="cpu")
    model.cfg = dataclasses.replace(model.cfg, max_output_ratio=0.01, max_output_extra=2)
    with caplog.at_level("WARNING"):
        chunks = list(model.stream(["I see a cat.", "You want the small bird today."],
                                   Options(first_line=7)))
    (_, results), = chunks
    assert all(len(hyps[0].tokens) == 2 and "length cap of 2 tokens" in hyps[0].warnings[0] for hyps in results)
    assert "line 7: the translation reached its length cap" in caplog.text and "line 8: " in caplog.text
