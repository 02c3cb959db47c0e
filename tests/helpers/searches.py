"""Greedy and beam search as the translator runs them (`nmt.inference.text.steering.searched`: the
policy and hooks a batch's rules ask for), for the tests that decode ids they build themselves."""

from nmt.inference.text.steering import searched


def greedy(model, sources, specials):
    """The one hypothesis of each source that greedy search keeps."""
    return [hyps[0] for hyps in searched(model, sources, specials, 1)]


def beam_search(model, sources, specials, beam_size, length_penalty=1.0, nbest=1):
    return searched(model, sources, specials, beam_size, length_penalty, nbest)
