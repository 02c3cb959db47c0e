"""Pictures and tables: attention heatmaps, attention in the terminal, training curves.

matplotlib is an optional extra (pip install "nmt[plot]"); only the functions that draw need it.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from nmt.errors import NmtError

MATPLOTLIB_MISSING = 'plotting needs matplotlib: pip install "nmt[plot]" (or pip install matplotlib)'


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        raise NmtError(MATPLOTLIB_MISSING) from None
    matplotlib.use("Agg")  # files only: no display needed
    import matplotlib.pyplot as plt

    return plt


def attention_table(src_tokens: list[str], out_tokens: list[str], weights: torch.Tensor) -> str:
    """The weights (out_len, src_len) as a text table: one row per output token, one column per source token."""
    width = max(5, *(len(t) for t in src_tokens))
    label = max(len(t) for t in out_tokens)
    lines = [" " * label + "  " + " ".join(t.rjust(width) for t in src_tokens)]
    for token, row in zip(out_tokens, weights.tolist()):
        lines.append(token.rjust(label) + "  " + " ".join(f"{w:.2f}".rjust(width) for w in row))
    return "\n".join(lines)


def plot_attention(src_tokens: list[str], out_tokens: list[str], weights: torch.Tensor, path: Path,
                   title: str | None = None, languages: tuple[str, str] = ("en", "fr")) -> Path:
    """A heatmap of the weights (out_len, src_len): source tokens across, output tokens down;
    values written in the cells when the sentence is short enough to read them."""
    plt = _pyplot()
    rows, cols = weights.shape
    fig, ax = plt.subplots(figsize=(max(4.0, 0.75 * cols + 1.8), max(3.0, 0.5 * rows + 1.5)))
    image = ax.imshow(weights.numpy(), cmap="Purples", vmin=0.0, vmax=1.0, aspect="auto")
    ax.set_xticks(range(cols), labels=src_tokens, rotation=45, ha="right")
    ax.set_yticks(range(rows), labels=out_tokens)
    ax.set_xlabel(f"source ({languages[0]})")
    ax.set_ylabel(f"output ({languages[1]})")
    if rows * cols <= 300:
        for i in range(rows):
            for j in range(cols):
                value = float(weights[i, j])
                ax.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=8,
                        color="white" if value > 0.6 else "black")
    fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    if title:
        ax.set_title(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def plot_curves(run_dir: Path, path: Path | None = None) -> Path:
    """Training and validation loss and validation BLEU from a run's metrics.jsonl, as one PNG."""
    metrics_path = run_dir / "metrics.jsonl"
    if not metrics_path.is_file():
        raise NmtError(f"{run_dir}: no metrics.jsonl; is this a run directory? (nmt train writes one)")
    records = [json.loads(line) for line in metrics_path.read_text(encoding="utf-8").splitlines() if line.strip()]
    if not records:
        raise NmtError(f"{metrics_path} is empty: the run has not validated yet")
    plt = _pyplot()
    steps = [r["step"] for r in records]
    fig, (loss_ax, bleu_ax) = plt.subplots(1, 2, figsize=(10, 3.8))
    if all("train_loss" in r for r in records):
        loss_ax.plot(steps, [r["train_loss"] for r in records], marker="o", label="training loss")
    loss_ax.plot(steps, [r["val_loss"] for r in records], marker="o", label="validation loss")
    loss_ax.set_xlabel("step")
    loss_ax.set_ylabel("cross-entropy per target token")
    loss_ax.legend()
    loss_ax.grid(alpha=0.3)
    bleu_ax.plot(steps, [r["val_bleu"] for r in records], marker="o", color="tab:green", label="BLEU")
    bleu_ax.plot(steps, [r["val_chrf"] for r in records], marker="o", color="tab:olive", label="chrF")
    bleu_ax.set_xlabel("step")
    bleu_ax.set_ylabel("validation score")
    bleu_ax.legend()
    bleu_ax.grid(alpha=0.3)
    fig.suptitle(f"{run_dir.name}: {records[-1]['epoch']} epoch(s), {steps[-1]:,} steps", fontsize=10)
    fig.tight_layout()
    path = path or run_dir / "curves.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
