"""nmt: an LSTM encoder–decoder with attention, small enough to read in an afternoon.

    import nmt
    model = nmt.load("runs/my-run")                 # a run directory or a checkpoint file
    model.translate("Go.")                          # 'Va !'
    model.translate(["Go.", "I am cold."], beam=5)  # ['Va !', "J'ai froid."]

`nmt.inference.translator.Translator` documents the rest: n-best lists with scores, attention, streams.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

    from nmt.inference.translator import Translator

__version__ = "0.1.0"


def load(checkpoint: str | None = None, device: str | torch.device = "auto",
         batch_size: int | None = None, engine: str = "torch", strict_numbers: bool | None = None) -> Translator:
    """A trained model ready to translate, from a checkpoint file or a run directory (its best.pt;
    by default the newest run under runs/), on `device` ('auto', 'cpu' or 'cuda'), decoding
    `batch_size` sentences at a time (default: the checkpoint's decode.batch_size), with `engine`:
    'torch', or ONNX Runtime on the CPU from the export `nmt export` made: 'onnx' (int8) or
    'onnx-fp32'. A model trained with data.protect writes every number of the source exactly once
    and no digit of its own; `strict_numbers=False` turns that off (for comparison)."""
    from nmt.inference.translator import Translator  # torch loads on first use, not on `import nmt`

    return Translator.load(checkpoint, device, batch_size, engine, strict_numbers)
