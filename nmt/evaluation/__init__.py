"""Evaluation: BLEU and chrF with every reference, validation, test sets, the report `nmt eval`
prints, and pictures of the attention and of training curves."""
