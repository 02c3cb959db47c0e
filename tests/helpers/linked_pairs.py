"""A handful of toy pairs and links no model finds on its own: what the tests of guided alignment
and the alignment head train toward."""

import numpy as np

from nmt.data.batches import Example

HANDFUL = [("go now .", "va maintenant !"), ("he is calm .", "il est calme ."), ("i am home .", "je suis chez moi ."),
           ("we see a big red boat .", "nous voyons un grand bateau rouge ."), ("wait here !", "attends ici !")]


def reversed_links(example: Example) -> np.ndarray:
    """Target piece j to source piece n-1-j (clamped): an alignment no model finds on its own."""
    n_src, n_tgt = len(example.src) - 1, len(example.tgt) - 1
    return np.array([[max(0, n_src - 1 - j), j] for j in range(n_tgt)])
