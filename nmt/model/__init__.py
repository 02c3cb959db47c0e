"""Model: the attention encoder-decoder of seed 002 (encoder, attention, decoder), its loss,
checkpoints (and their average) and run directories."""

from nmt.model.seq2seq import Seq2Seq, build_model

__all__ = ["Seq2Seq", "build_model"]
