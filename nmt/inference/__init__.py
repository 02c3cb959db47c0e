"""Inference: search (greedy, beam, forced decoding), the translator every caller goes through,
words and alignments, and the ONNX export and engine."""
