"""Ensembles (`-c A+B`): models that share a tokenizer and vocabularies decode as one, combining
their distributions at every step, wherever a model decodes; checkpoint averaging (`nmt average`)."""

import weakref

import pytest
import torch
from conftest import protected_corpus, train_protected_model, train_toy_model
from typer.testing import CliRunner

import nmt
from nmt.cli import app
from nmt.inference.ensemble import Ensemble
from nmt.inference.translator import Translator
from nmt.model import checkpoint_average
from nmt.model.checkpoint import read_checkpoint

SENTENCES = ["I see a cat.", "She has the house today.", "We like green tea again.", "I have 42 cats.", ""]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Two tiny data.protect models of one prepared corpus, of other seeds and sizes: members need
    only share the tokenizer and vocabularies."""
    root = tmp_path_factory.mktemp("ensemble")
    corpus = protected_corpus(root)
    return [train_protected_model(root, 6, 3, corpus=corpus, name="a"),
            train_protected_model(root, 6, 4, {"hidden_size": 32}, corpus, "b")]


def hyps(translator, beam: int, **kw):
    return [[(h.text, h.score) for h in hs] for hs in translator.nbest(SENTENCES, n=2, beam=beam, **kw)]


def assert_same(a, b):
    assert [[t for t, _ in hs] for hs in a] == [[t for t, _ in hs] for hs in b]
    assert [s for hs in a for _, s in hs] == pytest.approx([s for hs in b for _, s in hs], abs=1e-4)


def test_an_ensemble_of_one_model_is_that_model(runs):
    single = nmt.load(runs[0])
    alone = Translator(Ensemble([single.model]), single.src_vocab, single.tgt_vocab, single.cfg, single.device,
                       single.tokenizer)
    for beam in (1, 3):
        assert hyps(alone, beam) == hyps(single, beam)


def test_an_ensemble_of_two_copies_is_that_model(runs):
    single, twice = nmt.load(runs[0]), nmt.load(f"{runs[0]}+{runs[0]}")
    for beam in (1, 3):
        assert_same(hyps(twice, beam), hyps(single, beam))
        assert_same(hyps(twice, beam, prefix="Je"), hyps(single, beam, prefix="Je"))
    assert twice.translate("I have 73154 cats.") == single.translate("I have 73154 cats.")


def test_two_models_score_the_weighted_mean_of_their_log_probabilities(runs):
    """Forced scores of given outputs: each token's ensemble log-probability is the weighted mean of
    the members' log-probabilities."""
    a, b = nmt.load(runs[0]), nmt.load(runs[1])
    both = nmt.load(f"{runs[0]}:2+{runs[1]}:1")
    outputs = a.translate(SENTENCES[:4])
    sa, sb, sab = (t.score(SENTENCES[:4], outputs) for t in (a, b, both))
    for x, y, z in zip(sa, sb, sab):
        la, lb = torch.tensor(x.token_scores), torch.tensor(y.token_scores)
        expected = (2 * la + lb) / 3
        assert z.token_scores == pytest.approx(expected.tolist(), abs=1e-4)


def test_the_attention_of_an_ensemble_is_its_members_mean(runs):
    a, b, both = nmt.load(runs[0]), nmt.load(runs[1]), nmt.load(f"{runs[0]}+{runs[1]}")
    output = both.translations(["I see a cat."])[0].tokens
    mean = (a.attention("I see a cat.", output).weights + b.attention("I see a cat.", output).weights) / 2
    assert torch.allclose(both.attention("I see a cat.", output).weights, mean, atol=1e-5)


@pytest.fixture(scope="module")
def exported(runs):
    """The two runs, each with its ONNX export."""
    pytest.importorskip("onnxruntime")
    from nmt.inference.onnx_export import export_run

    for run in runs:
        export_run(run)
    return runs


def test_ensembles_decode_alike_with_both_engines_and_onnx_never_ranks_the_whole_vocabulary(exported):
    """A member gives its whole distribution at each step: the ONNX graph reads every token by
    name (ranking all of them in the graph decoded an ensemble's beam 5 at a fifth of the speed)."""
    spec = f"{exported[0]}+{exported[1]}"
    torch_engine, onnx_engine = nmt.load(spec), nmt.load(spec, engine="onnx-fp32")
    ranks = []  # each decoder call's k
    for member in onnx_engine.model.models:
        member.session = _recording_k(member.session, ranks)
    for beam in (1, 3):
        assert_same(hyps(onnx_engine, beam), hyps(torch_engine, beam))
        assert_same(hyps(onnx_engine, beam, prefix="Je"), hyps(torch_engine, beam, prefix="Je"))
    assert ranks and max(ranks) == 1


def test_an_onnx_ensemble_decodes_several_batches_at_once_as_one_at_a_time(exported):
    """Batches of two: every member's one-thread sessions inside the workers, the translations
    those of the torch engine decoding one batch after another."""
    spec = f"{exported[0]}+{exported[1]}"
    threads = torch.get_num_threads()
    torch.set_num_threads(2)  # two workers (the fixture's training left torch on one thread)
    try:
        torch_engine, onnx_engine = nmt.load(spec, batch_size=2), nmt.load(spec, batch_size=2, engine="onnx-fp32")
    finally:
        torch.set_num_threads(threads)
    members = onnx_engine.model.models
    assert all(member.workers is not member.shared for member in members)
    in_workers = []
    for member in members:
        member.session = _recording_worker(member, in_workers)
    for beam in (1, 3):
        assert_same(hyps(onnx_engine, beam), hyps(torch_engine, beam))
    assert in_workers and all(in_workers)


def _recording_worker(member, in_workers: list[bool]):
    session = member.session

    def recorded(part: str):
        in_workers.append(getattr(member.local, "sessions", None) is member.workers)
        return session(part)

    return recorded


def _recording_k(session, ranks: list[int]):
    class Recorded:
        def __init__(self, part: str):
            self.inner, self.part = session(part), part

        def run(self, outputs, feeds):
            if self.part == "decoder":
                ranks.append(int(feeds["k"]))
            return self.inner.run(outputs, feeds)

    return Recorded


def test_every_command_takes_an_ensemble(runs, tmp_path):
    spec = f"{runs[0]}+{runs[1]}"
    translated = CliRunner().invoke(app, ["translate", "-c", spec, "--scores", "I have 42 cats."])
    assert translated.exit_code == 0 and "42" in translated.stdout, translated.output
    src, hyp = tmp_path / "s.txt", tmp_path / "h.txt"
    src.write_text("I see a cat.\n"), hyp.write_text("Je vois un chat.\n")
    scored = CliRunner().invoke(app, ["score", "-c", spec, "--src", str(src), "--hyp", str(hyp)])
    assert scored.exit_code == 0 and len(scored.stdout.split("\t")) == 3, scored.output
    corpus = str(runs[0].parent / "toy-numbers.zip")
    evaluated = CliRunner().invoke(app, ["eval", "--bleu", "-c", spec, "-c", str(runs[0]), "--split", "valid",
                                         "--data", corpus])
    assert evaluated.exit_code == 0, evaluated.output
    name = f"{runs[0]}/best.pt+{runs[1]}/best.pt"  # each member as the checkpoint it resolved to
    assert f"ensemble of 2 (mean log-probabilities) {name}" in evaluated.stdout
    assert "paired bootstrap resampling against " + name in evaluated.stdout


def test_the_server_serves_an_ensemble(runs):
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from nmt.model.checkpoint import load_models
    from nmt.serving.server import ServeSettings, create_app, server_info

    spec = f"{runs[0]}+{runs[1]}"
    loaded = load_models(spec)
    app_ = create_app(Translator.from_loaded(loaded, torch.device("cpu")), ServeSettings(),
                      server_info(loaded, "cpu"))
    with TestClient(app_) as client:
        assert client.get("/health").json()["ensemble"] == [str(runs[0] / "best.pt"), str(runs[1] / "best.pt")]
        answer = client.post("/translate", json={"text": "I have 42 cats.", "scores": True}).json()
        assert answer["translations"][0]["tgt"] == nmt.load(spec).translate("I have 42 cats.")


@pytest.mark.parametrize("spec, message", [
    ("{a}+{missing}", "checkpoint not found"),
    ("{a}:2+{b}", "give every member of the ensemble a weight, or none"),
    ("{a}:0+{b}:1", "the weight must be a positive number"),
    ("{a}:x+{b}:1", "the weight after ':' must be a positive number"),
    ("{a}+{other}", "cannot decode as one ensemble: their tokenizer differs (subword vs word)"),
])
def test_a_bad_ensemble_is_one_line(runs, other_vocabulary_run, tmp_path, spec, message):
    spec = spec.format(a=runs[0], b=runs[1], missing=tmp_path / "nowhere", other=other_vocabulary_run)
    for command in (["translate", "-c", spec, "Go."], ["eval", "--bleu", "-c", spec]):
        result = CliRunner().invoke(app, command)
        assert result.exit_code == 1 and message in result.output, result.output
        assert result.output.count("\n") == 1 and result.output.startswith("error: ")


@pytest.fixture(scope="module")
def other_vocabulary_run(tmp_path_factory):
    """A word-level toy model: other vocabularies than the subword runs'."""
    return train_toy_model(tmp_path_factory.mktemp("other"), epochs=1)["run"]


def test_the_average_of_copies_is_the_checkpoint(runs, tmp_path):
    best = runs[0] / "best.pt"
    out = tmp_path / "avg.pt"
    checkpoint_average.average_checkpoints([best, best, best], out)
    original, averaged = read_checkpoint(best), read_checkpoint(out)
    for name, tensor in original["model"].items():
        assert torch.allclose(averaged["model"][name], tensor, atol=1e-6), name
    assert [r["checkpoint"] for r in averaged["averaged"]] == [str(best)] * 3


def test_the_average_of_two_differs_from_both_and_loads_everywhere(runs, tmp_path):
    result = CliRunner().invoke(app, ["average", str(runs[0]), "--last", "2"])
    assert result.exit_code == 0, result.output
    out = runs[0] / "averaged.pt"
    kept = sorted(runs[0].glob("ckpt-*.pt"))[-2:]
    averaged = read_checkpoint(out)
    assert [r["checkpoint"] for r in averaged["averaged"]] == [str(p) for p in kept]
    for path in kept:
        weights = read_checkpoint(path)["model"]
        assert any(not torch.equal(weights[n], averaged["model"][n]) for n in weights)
    model = nmt.load(str(out))
    assert model.translate("I have 42 cats.") and nmt.load(f"{out}+{runs[0]}").translate("I see a cat.")
    evaluated = CliRunner().invoke(app, ["eval", "--bleu", "-c", str(out), "--split", "valid", "--data",
                                         str(runs[0].parent / "toy-numbers.zip")])
    assert evaluated.exit_code == 0, evaluated.output
    elsewhere = tmp_path / "elsewhere" / "avg.pt"  # outside the run: it takes the tokenizer along
    assert CliRunner().invoke(app, ["average", str(kept[0]), str(kept[1]), "--out", str(elsewhere)]).exit_code == 0
    assert nmt.load(str(elsewhere)).translate("I have 42 cats.") == model.translate("I have 42 cats.")


def test_averaging_streams(runs, tmp_path, monkeypatch):
    """Never more than two checkpoints' weights alive: the running sum and the one being read."""
    alive = []
    read = checkpoint_average.read_checkpoint

    def tracked(path, mmap=False):
        state = read(path, mmap=mmap)
        tensor = next(iter(state["model"].values()))
        alive.append(weakref.ref(tensor))
        assert sum(ref() is not None for ref in alive) <= 2
        return state

    monkeypatch.setattr(checkpoint_average, "read_checkpoint", tracked)
    checkpoint_average.average_checkpoints(sorted(runs[0].glob("ckpt-*.pt")) * 2, tmp_path / "avg.pt")
    assert len(alive) >= 6


@pytest.mark.parametrize("args, message", [
    (["{missing}", "--last", "2"], "run directory not found"),
    (["{a}", "--last", "99"], "--last 99: "),
    (["{a}/best.pt", "{other}/best.pt"], "cannot average"),
    (["{a}", "--last", "2", "--out", "{a}/best.pt"], "would overwrite a checkpoint of the run"),
])
def test_bad_averaging_is_one_line_and_writes_nothing(runs, other_vocabulary_run, tmp_path, args, message):
    before = {p: p.stat().st_mtime for p in runs[0].iterdir()}
    args = [a.format(a=runs[0], other=other_vocabulary_run, missing=tmp_path / "nowhere") for a in args]
    result = CliRunner().invoke(app, ["average", *args])
    assert result.exit_code == 1 and message in result.output, result.output
    assert result.output.count("\n") == 1 and result.output.startswith("error: ")
    assert {p: p.stat().st_mtime for p in runs[0].iterdir()} == before
