"""Model: the attention encoder-decoder of seed 002 (encoder, attention, decoder),
its loss, the moving average of its weights, checkpoints and run directories, and the seeds'
scoring rules on plain tensors."""

from nmt.model.seq2seq import Seq2Seq, build_model

__all__ = ["Seq2Seq", "build_model"]
