from nmt.model.seq2seq import Seq2Seq, build_model

__all__ = ["Seq2Seq", "build_model"]
