"""Sampling (`nmt translate --sample`, `translate(..., sample=Sampling(...))`): draws from the model's
distribution, cut by top-k and top-p and shaped by the temperature, reproducibly from a seed,
under the same number rules and prefixes as search."""

import pytest
import torch
from conftest import train_toy_model
from helpers.number_models import (
    BOS,
    DIGIT_IDS,
    EOS,
    TARGET_IDS,
    WORDS,
    biased_model,
    placeholders_written,
    rules_of,
    sources,
    strict,
)
from typer.testing import CliRunner

import nmt
from nmt.cli import app
from nmt.errors import NmtError
from nmt.inference.decoding.sampling import Sampling, draw_one, samples, truncated
from nmt.inference.decoding.search import Sources
from nmt.inference.text.steering import steering_for
from helpers.searches import greedy


def draw(model, rows, sampling, spans=None, prefixes=None, cap=8):
    """Each row's one sample: its tokens and their scores."""
    src, lens = sources(rows)
    rules = rules_of(spans, prefixes) if spans is not None else None
    batch = Sources(src, lens, torch.full((rows,), cap), rules)
    drawn = [hyps[0] for hyps in samples(model, batch, TARGET_IDS, 1, sampling, steer=steering_for(rules))]
    return [h.tokens for h in drawn], [h.token_scores for h in drawn]


def test_top_k_one_is_greedy_search():
    model = biased_model()
    src, lens = sources(6)
    for spans in (None, strict([0, 1, 2, 0, 3, 1])):
        batch = Sources(src, lens, torch.full((6,), 8), rules_of(spans) if spans else None)
        expected = greedy(model, batch, TARGET_IDS)
        outputs, scores = draw(model, 6, Sampling(top_k=1, seed=5), spans)
        assert outputs == [h.tokens for h in expected]
        assert scores == [pytest.approx(h.token_scores) for h in expected]


def test_a_seed_draws_the_same_samples_again_and_another_seed_others():
    model = biased_model()
    first, again, other = (draw(model, 16, Sampling(seed=seed))[0] for seed in (1, 1, 2))
    assert first == again and first != other


def test_with_no_cut_the_draws_follow_the_models_distribution():
    # no cut draws from the vocabulary in its own order (no sort): the first tokens of 4,000 rows of
    # one source must still come as often as the model's first step says (<eos> ~0.2, digits ~0.05)
    model = biased_model(eos=3.0, digits=1.5)
    src, lens = sources(1)
    first_step = model.candidates(torch.tensor([BOS]), model.encode(src, lens), None, None, EOS)[0].exp()[0]
    rows = 4000
    (drawn,) = samples(model, Sources(src, lens, torch.ones(1, dtype=torch.long)), TARGET_IDS, rows, Sampling(seed=7))
    counts = torch.bincount(torch.tensor([h.tokens[0] if h.tokens else EOS for h in drawn]), minlength=len(first_step))
    assert (counts / rows).tolist() == pytest.approx(first_step.tolist(), abs=0.02)


def test_a_draw_never_takes_a_token_of_probability_zero():
    probs = torch.tensor([[0.5, 0.0, 0.5, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0, 1.0], [0.0, 1.0, 0.0, 0.0, 0.0]])
    generator = torch.Generator().manual_seed(0)
    drawn = torch.cat([draw_one(probs, generator) for _ in range(2000)], 1)
    assert set(drawn[0].tolist()) == {0, 2} and set(drawn[1].tolist()) == {4} and set(drawn[2].tolist()) == {1}
    assert (drawn[0] == 0).float().mean().item() == pytest.approx(0.5, abs=0.04)


def test_top_p_keeps_the_smallest_set_of_tokens_reaching_p():
    log_probs = torch.tensor([[0.5, 0.3, 0.15, 0.05]]).log()
    assert truncated(log_probs.clone(), Sampling(top_p=0.8))[0].tolist() == pytest.approx([0.625, 0.375, 0, 0])
    assert truncated(log_probs.clone(), Sampling(top_p=0.81))[0].tolist() == pytest.approx(
        [0.5 / 0.95, 0.3 / 0.95, 0.15 / 0.95, 0])
    assert truncated(log_probs.clone(), Sampling(top_p=0.5))[0].tolist() == pytest.approx([1, 0, 0, 0])
    assert truncated(log_probs.clone(), Sampling(top_k=2))[0].tolist() == pytest.approx([0.625, 0.375, 0, 0])


def test_temperature_sharpens_below_one_and_flattens_above():
    p = torch.tensor([[0.5, 0.3, 0.15, 0.05]])
    for temperature, expected in ((0.5, p ** 2), (2.0, p ** 0.5), (1.0, p)):
        assert truncated(p.log(), Sampling(temperature=temperature))[0].tolist() == pytest.approx(
            (expected / expected.sum())[0].tolist())
    counts = torch.zeros(4)
    generator = torch.Generator().manual_seed(0)
    for _ in range(4000):  # and the draws follow the distribution
        counts[draw_one(truncated(p.log(), Sampling()), generator)] += 1
    assert (counts / 4000).tolist() == pytest.approx(p[0].tolist(), abs=0.03)


def test_samples_follow_the_number_rules_and_prefixes():
    model = biased_model(digits=30.0, eos=20.0)
    counts = [0, 2, 3, 1]
    prefix = [[VOCAB_ONE, WORDS[0]], [], [WORDS[1]], []]
    for seed in range(5):
        outputs, _ = draw(model, 4, Sampling(seed=seed), strict(counts), prefix)
        for output, count, forced in zip(outputs, counts, prefix):
            assert output[:len(forced)] == forced
            assert not DIGIT_IDS & set(output[len(forced):]) and placeholders_written(output) == list(range(count))


VOCAB_ONE = sorted(DIGIT_IDS)[1]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return train_toy_model(tmp_path_factory.mktemp("sampling"), epochs=3)["run"]


def test_sampling_from_python_and_the_command_line(run):
    model = nmt.load(run)
    texts = ["I see a cat.", "We like green tea again."]
    drawn = model.nbest(texts, n=3, sample=Sampling(top_k=5, seed=3))
    assert [len(hyps) for hyps in drawn] == [3, 3]
    assert all(hyps[0].score >= hyps[-1].score for hyps in drawn)
    assert model.translate(texts, sample=Sampling(top_k=5, seed=3)) == model.translate(
        texts, sample=Sampling(top_k=5, seed=3))
    result = CliRunner().invoke(app, ["translate", "-c", str(run), "--sample", "--top-k", "5", "--seed", "3",
                                      "--nbest", "3", *texts])
    assert result.exit_code == 0 and len(result.stdout.splitlines()) == 6, result.output


def test_sampling_decodes_alike_with_both_engines(run):
    pytest.importorskip("onnxruntime")
    from nmt.inference.onnx_export import export_run

    export_run(run)
    texts = ["I see a cat.", "She has the house today.", "We like green tea again."] * 3
    for sampling in (Sampling(top_k=4, seed=1), Sampling(top_p=0.9, temperature=0.7, seed=2), Sampling(seed=3)):
        assert nmt.load(run, engine="onnx-fp32").translate(texts, sample=sampling) == nmt.load(run).translate(
            texts, sample=sampling)


@pytest.mark.parametrize("args, message", [
    (["--top-k", "5"], "--top-k shapes sampling: add --sample"),
    (["--seed", "2"], "--seed shapes sampling: add --sample"),
    (["--sample", "--beam", "3"], "leave out --beam"),
    (["--sample", "--top-p", "0"], "--top-p must be in (0, 1]"),
    (["--sample", "--temperature", "0"], "--temperature must be positive"),
])
def test_bad_sampling_options_are_one_line(run, args, message):
    result = CliRunner().invoke(app, ["translate", "-c", str(run), *args, "Go."])
    assert result.exit_code == 1 and message in result.output and result.output.count("\n") == 1, result.output


def test_sampling_options_are_checked_in_python_too():
    with pytest.raises(NmtError, match="--top-k"):
        Sampling(top_k=-1)
