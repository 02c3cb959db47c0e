"""Greedy and beam search as the road decodes a batch (`nmt.inference.text.road.decoded`: the policy
and hooks its rules ask for), for the tests that decode ids they build themselves."""

from nmt.inference.text.road import decoded


def greedy(model, sources, specials):
    """The one hypothesis of each source that greedy search keeps."""
    return [hyps[0] for hyps in decoded(model, sources, specials, 1)]


def beam_search(model, sources, specials, beam_size, length_penalty=1.0, nbest=1):
    return decoded(model, sources, specials, beam_size, nbest, length_penalty=length_penalty)
