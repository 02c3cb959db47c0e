"""Seed 001's attention walkthrough, recomputed with the seeds' scoring rules (attention_rules.py beside it).

    python scripts/tools/attention_walkthrough.py                 # prints every step
    python scripts/tools/attention_walkthrough.py --out runs/walkthrough   # and draws the heatmaps

Decoder hidden state [5, 1, 20]; four encoder hidden states ("annotations"); dot scores,
softmax, the weighted annotations and their sum, the context vector. Then the other scoring
rules of seeds 002 and 004 on the same vectors, with fixed example weights.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from scripts.tools import attention_rules as rules  # noqa: E402

DEC_HIDDEN_STATE = torch.tensor([5.0, 1, 20])
ANNOTATIONS = torch.tensor([[3.0, 12, 45], [59, 2, 5], [1, 43, 5], [4, 3, 45.3]])  # rows: encoder steps


def _heatmap(plt, matrix: torch.Tensor, path: Path, cmap: str, title: str, xlabels=None) -> None:
    """One seed-style heatmap: a column per encoder step (or a single column), values annotated."""
    rows, cols = matrix.shape
    fig, ax = plt.subplots(figsize=(1.2 + 1.1 * cols, 0.9 + 0.8 * rows))
    ax.imshow(matrix.numpy(), cmap=cmap, aspect="auto")
    top = float(matrix.abs().max())
    for i in range(rows):
        for j in range(cols):
            value = float(matrix[i, j])
            text = "0" if value == 0 else f"{value:.3g}" if abs(value) >= 1e-3 else f"{value:.1e}"
            ax.text(j, i, text, ha="center", va="center", fontsize=9,
                    color="white" if abs(value) > 0.55 * top else "black")  # readable on dark cells
    ax.set_xticks(range(cols), labels=xlabels or [""] * cols)
    ax.set_yticks(range(rows), labels=[f"dim {i}" for i in range(rows)])
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="folder for the heatmaps (needs matplotlib)")
    args = parser.parse_args()
    torch.set_printoptions(precision=8, sci_mode=False)

    print("decoder hidden state:", DEC_HIDDEN_STATE.tolist())
    print("a single annotation:", ANNOTATIONS[0].tolist(), "-> dot score",
          rules.dot(DEC_HIDDEN_STATE, ANNOTATIONS[:1]).item())
    scores = rules.dot(DEC_HIDDEN_STATE, ANNOTATIONS)
    print("dot scores of all four annotations:", scores.tolist())
    weights, context = rules.attend(scores, ANNOTATIONS)
    print("softmax weights:", [f"{w:.8f}" for w in weights.tolist()])
    applied = weights.unsqueeze(-1) * ANNOTATIONS
    print("annotations x weights (a column per annotation):")
    print(applied.T)
    print("context vector (the sum of those columns):", [round(x, 7) for x in context.tolist()])

    print("\nthe same query and keys under the other scoring rules (weights fixed by seed 0):")
    torch.manual_seed(0)
    W = torch.randn(3, 3) * 0.1
    W_q, W_k, v = torch.randn(4, 3) * 0.1, torch.randn(4, 3) * 0.1, torch.randn(4)
    by_rule = {
        "dot": rules.dot(DEC_HIDDEN_STATE, ANNOTATIONS),
        "scaled_dot": rules.scaled_dot(DEC_HIDDEN_STATE, ANNOTATIONS),
        "general (q^T W k)": rules.general(DEC_HIDDEN_STATE, ANNOTATIONS, W),
        "additive (v^T tanh(W_q q + W_k k))": rules.additive(DEC_HIDDEN_STATE, ANNOTATIONS, W_q, W_k, v),
        "concat (v^T tanh(W [q; k]))": rules.concat(DEC_HIDDEN_STATE, ANNOTATIONS, torch.cat((W_q, W_k), 1), v),
    }
    for name, rule_scores in by_rule.items():
        rule_weights, _ = rules.attend(rule_scores, ANNOTATIONS)
        print(f"  {name:36s} scores {[round(s, 3) for s in rule_scores.tolist()]} "
              f"weights {[round(w, 3) for w in rule_weights.tolist()]}")

    if args.out:
        from nmt.evaluation.visualize import _pyplot

        plt = _pyplot()
        args.out.mkdir(parents=True, exist_ok=True)
        steps = [f"step {i}" for i in range(len(ANNOTATIONS))]
        pictures = [
            (DEC_HIDDEN_STATE[:, None], "decoder_hidden_state.png", "Purples", "decoder hidden state", None),
            (ANNOTATIONS[:1].T, "annotation.png", "Oranges", "a single annotation", None),
            (ANNOTATIONS.T, "annotations.png", "Oranges", "annotations (a column per step)", steps),
            (applied.T, "applied_attention.png", "Oranges", "annotations x softmax weights", steps),
            (context[:, None], "context_vector.png", "Blues", "context vector", None),
        ]
        for matrix, name, cmap, title, labels in pictures:
            _heatmap(plt, matrix, args.out / name, cmap, title, labels)
        print(f"\nheatmaps written to {args.out}/: " + ", ".join(p[1] for p in pictures))


if __name__ == "__main__":
    main()
