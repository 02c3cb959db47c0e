"""Data: finding and reading corpora, preparing them once on disk and reading them back,
tokenizers and vocabularies, protected numbers, copy augmentation, and the batches training draws."""
