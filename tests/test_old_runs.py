"""Runs and exports made by an older nmt (tests/fixtures/run_before_packages, made at the last
flat layout) still load and translate exactly as they did."""

import json
import shutil
from pathlib import Path

import pytest

import nmt

FIXTURE = Path(__file__).parent / "fixtures" / "run_before_packages"
EXPECTED = json.loads((FIXTURE / "expected.json").read_text(encoding="utf-8"))


@pytest.fixture
def old_run(tmp_path) -> Path:
    """A writable copy: loading may add caches beside the run, and the fixture stays as committed."""
    return Path(shutil.copytree(FIXTURE, tmp_path / "run"))


def _translations(translator) -> dict:
    sources = EXPECTED["sources"]
    found = {str(beam): translator.translate(sources, beam=beam) for beam in (1, 5)}
    found["nbest"] = [[h.text, h.score] for h in translator.nbest(sources[1], beam=5, n=3)[0]]
    return found


def _assert_same(found: dict, expected: dict) -> None:
    assert found["1"] == expected["1"] and found["5"] == expected["5"]
    assert [text for text, _ in found["nbest"]] == [text for text, _ in expected["nbest"]]
    assert [score for _, score in found["nbest"]] == pytest.approx([s for _, s in expected["nbest"]], abs=2e-3)


def test_an_old_run_translates_as_it_did(old_run):
    _assert_same(_translations(nmt.load(old_run)), EXPECTED["translations"]["torch"])


def test_an_old_onnx_export_translates_as_it_did(old_run):
    pytest.importorskip("onnxruntime")
    _assert_same(_translations(nmt.load(old_run, engine="onnx-fp32")), EXPECTED["translations"]["onnx-fp32"])


def test_an_old_int8_export_decodes_as_a_new_export_of_the_same_checkpoint(old_run, tmp_path):
    """int8 kernels differ between CPUs (VNNI or not), so the old int8 graphs are held against a
    fresh export made here rather than against another machine's outputs."""
    pytest.importorskip("onnxruntime")
    fresh = Path(shutil.copytree(old_run, tmp_path / "fresh"))
    shutil.rmtree(fresh / "onnx")
    from nmt.inference.onnx_export import export_run

    export_run(fresh)
    assert _translations(nmt.load(old_run, engine="onnx")) == _translations(nmt.load(fresh, engine="onnx"))


def _saved_with(run: Path, data_keys: dict | None = None, **model_keys) -> Path:
    """The run's best.pt as nmt saved it while its config held keys since removed: the RNMT+ ones
    (model.residual, layer_norm, attention_heads: 2026-11-24 to 26), training with terms
    (data.terms, data.term_form: to f71f73a), the keys no config used (data.joint_vocab,
    model.share_embeddings, model.attention_query: to e99e089)."""
    import torch

    state = torch.load(run / "best.pt", weights_only=True)
    state["config"]["model"].update(decoder="stepwise", embed_dropout=0.0, **model_keys)
    state["config"]["data"].update(data_keys or {})
    torch.save(state, run / "best.pt")
    return run


def test_a_run_saved_with_the_removed_keys_at_their_defaults_translates_as_it_did(old_run):
    # (data.insert_placeholders shaped training alone: any value it held loads)
    run = _saved_with(old_run, {"terms": 0.0, "term_form": "append", "insert_placeholders": 0.1, "joint_vocab": False},
                      residual=False, layer_norm=False, attention_heads=1, share_embeddings=False,
                      attention_query="previous")
    _assert_same(_translations(nmt.load(run)), EXPECTED["translations"]["torch"])


def test_a_run_trained_with_terms_is_one_clear_error_naming_the_last_nmt_that_trained_it(old_run):
    from nmt.errors import NmtError

    run = _saved_with(old_run, {"terms": 0.3, "term_form": "append"})
    with pytest.raises(NmtError, match="data.terms was removed .* needs the nmt docs/results.md names"):
        nmt.load(run)


def test_a_run_that_used_a_removed_key_is_one_clear_error(old_run):
    from nmt.errors import NmtError

    run = _saved_with(old_run, residual=True, layer_norm=False, attention_heads=1)
    with pytest.raises(NmtError, match="model.residual was removed .* needs the nmt docs/results.md names"):
        nmt.load(run)
