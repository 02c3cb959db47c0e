import builtins
import json

import pytest
import torch

from nmt.errors import NmtError
from nmt.evaluation.visualize import attention_table, plot_attention, plot_curves

PNG = b"\x89PNG\r\n\x1a\n"


def test_attention_table_layout():
    table = attention_table(["i", "won", "!", "<eos>"], ["j'ai", "gagné", "!", "<eos>"],
                            torch.tensor([[0.9, 0.1, 0, 0], [0.05, 0.9, 0.05, 0], [0, 0, 1.0, 0], [0, 0, 0.2, 0.8]]))
    lines = table.splitlines()
    assert len(lines) == 5
    assert lines[0].split() == ["i", "won", "!", "<eos>"]
    assert lines[2].split() == ["gagné", "0.05", "0.90", "0.05", "0.00"]


def test_heatmap_and_curves_are_pngs(tmp_path):
    pytest.importorskip("matplotlib")
    path = plot_attention(["go", ".", "<eos>"], ["va", "!", "<eos>"], torch.eye(3), tmp_path / "a.png", "Go .")
    assert path.read_bytes()[:8] == PNG
    run = tmp_path / "run"
    run.mkdir()
    records = [{"step": s, "epoch": e, "train_loss": 5 - s / 100, "val_loss": 4 - s / 100, "val_bleu": s / 10,
                "val_chrf": s / 5} for s, e in ((100, 1), (200, 2))]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    assert plot_curves(run).read_bytes()[:8] == PNG


def test_missing_matplotlib_is_one_clear_error(tmp_path, monkeypatch):
    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name.startswith("matplotlib"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    with pytest.raises(NmtError, match=r'pip install "nmt\[plot\]"'):
        plot_attention(["a"], ["b"], torch.ones(1, 1), tmp_path / "x.png")


def test_curves_need_a_run(tmp_path):
    with pytest.raises(NmtError, match="no metrics.jsonl"):
        plot_curves(tmp_path)
