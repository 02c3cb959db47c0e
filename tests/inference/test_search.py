import pytest
import torch

from nmt.data.vocab import SPECIALS, Vocab
from nmt.inference.decoding.search import Sources, Specials
from helpers.searches import beam_search, greedy
from nmt.model import build_model
from conftest import seed_model

VOCAB = Vocab(list(SPECIALS) + [f"w{i}" for i in range(12)])
TARGET_IDS = Specials(VOCAB.bos_id, VOCAB.eos_id)
BOS, EOS = VOCAB.bos_id, VOCAB.eos_id


def _model(seed, **options):
    torch.manual_seed(seed)
    return build_model(seed_model(embed_size=8, hidden_size=16, num_layers=2, **options), VOCAB, VOCAB).eval()


def _inputs(seed, batch=6):
    g = torch.Generator().manual_seed(seed)
    lens = torch.randint(2, 7, (batch,), generator=g)
    src = torch.zeros(batch, int(lens.max()), dtype=torch.long)
    for i, n in enumerate(lens.tolist()):
        src[i, : n - 1] = torch.randint(4, len(VOCAB), (n - 1,), generator=g)
        src[i, n - 1] = EOS
    return src, lens, torch.randint(3, 9, (batch,), generator=g)


def _log_prob(model, src, src_len, tokens):
    """The model's own score of `tokens` + <eos>, by teacher forcing."""
    return sum(_token_log_probs(model, src, src_len, tokens))


def _token_log_probs(model, src, src_len, tokens):
    state = model.encode(src[None, :src_len], torch.tensor([src_len]))
    out, prev = [], BOS
    for token in tokens + [EOS]:
        logits, state, _ = model.decoder.decode_step(torch.tensor([prev]), state)
        out.append(logits.log_softmax(-1)[0, token].item())
        prev = token
    return out


@pytest.mark.parametrize("seed", range(4))
def test_greedy_gives_each_tokens_log_probability(seed):
    model = _model(seed)
    src, lens, caps = _inputs(seed)
    for i, hyp in enumerate(greedy(model, Sources(src, lens, caps), TARGET_IDS)):
        # at its cap a hypothesis may only end: its <eos> is scored as the model scores it there too
        assert hyp.token_scores == pytest.approx(_token_log_probs(model, src[i], int(lens[i]), hyp.tokens), abs=1e-4)
        assert hyp.score == pytest.approx(sum(hyp.token_scores)) and len(hyp.tokens) <= caps[i]


@pytest.mark.parametrize("seed", range(4))
def test_beam_one_is_greedy(seed):
    model = _model(seed)
    src, lens, caps = _inputs(seed)
    greedy_out = greedy(model, Sources(src, lens, caps), TARGET_IDS)
    beam_out = beam_search(model, Sources(src, lens, caps), TARGET_IDS, beam_size=1)
    assert [h[0] for h in beam_out] == greedy_out


def test_scores_are_the_models_log_probs_and_grow_with_the_beam():
    # Ranked by length-normalised score, as users get them (raw scores would favour the empty output).
    improved = 0
    for seed in range(8):
        model = _model(seed)
        src, lens, caps = _inputs(seed)
        best = {}
        for k in (1, 2, 5, 10):
            hyps = beam_search(model, Sources(src, lens, caps), TARGET_IDS, beam_size=k, length_penalty=1.0)
            for i, h in enumerate(hyps):
                assert len(h[0].tokens) <= caps[i]
                assert h[0].score == pytest.approx(_log_prob(model, src[i], int(lens[i]), h[0].tokens), abs=1e-4)
                # each token's own log-probability, <eos> last
                assert h[0].token_scores == pytest.approx(_token_log_probs(model, src[i], int(lens[i]), h[0].tokens),
                                                          abs=1e-4)
            best[k] = [h[0].normalized for h in hyps]
        for small, large in ((1, 2), (2, 5), (5, 10)):
            assert all(b >= a - 1e-5 for a, b in zip(best[small], best[large])), (seed, small, large)
        improved += sum(b > a + 1e-3 for a, b in zip(best[1], best[10]))
    assert improved >= 5  # the cases do exercise the beam: it beats greedy on several of them


@pytest.mark.parametrize("options", [{}, dict(bidirectional=True, bridge=True, input_feeding=True)],
                         ids=["seed", "options"])
def test_batched_beam_equals_one_sentence_at_a_time(options):
    """Beam search reorders and prunes rows of the decoder state (input feeding's too)."""
    model = _model(7, **options)
    src, lens, caps = _inputs(7)
    batched = beam_search(model, Sources(src, lens, caps), TARGET_IDS, beam_size=4, nbest=3)
    for i in range(len(lens)):
        alone = beam_search(model, Sources(src[i: i + 1, : lens[i]], lens[i: i + 1], caps[i: i + 1]), TARGET_IDS,
                            beam_size=4, nbest=3)[0]
        assert [h.tokens for h in alone] == [h.tokens for h in batched[i]]
        assert [h.score for h in alone] == pytest.approx([h.score for h in batched[i]], abs=1e-5)


def test_nbest_is_sorted_and_distinct():
    model = _model(3)
    src, lens, caps = _inputs(3)
    for hyps in beam_search(model, Sources(src, lens, caps), TARGET_IDS, beam_size=5, nbest=5):
        assert 1 <= len(hyps) <= 5
        normalized = [h.normalized for h in hyps]
        assert normalized == sorted(normalized, reverse=True)
        assert len({tuple(h.tokens) for h in hyps}) == len(hyps)
        for h in hyps:
            assert h.normalized == pytest.approx(h.score / (len(h.tokens) + 1))


@pytest.mark.parametrize("seed", range(5))
def test_each_beams_2k_best_hold_the_sentences_2k_best(seed):
    """Beam search reads only each beam's 2k best tokens (what `Seq2Seq.candidates` returns): the
    same continuations, scores and order as from every (beam, token) pair."""
    from nmt.inference.decoding.policies import Beam

    g = torch.Generator().manual_seed(seed)
    n, k, vocab = 3, 4, 50
    scores = torch.randn(n, k, generator=g)
    scores[1, 3] = float("-inf")  # a dead beam
    log_probs = torch.randn(n * k, vocab, generator=g).log_softmax(-1)

    def proposed(top, ids):
        return [[(s, beam, int(ids[i * k + beam, column])) for s, beam, column in found]
                for i, found in enumerate(Beam(k).propose(scores, top))]

    assert proposed(*log_probs.topk(2 * k)) == proposed(log_probs, torch.arange(vocab).expand(n * k, -1))


def test_the_constrained_beam_is_the_policy_that_gives_each_bank_a_place():
    """Dynamic beam allocation lives in its policy: ConstrainedBeam takes a sentence's places bank by
    bank (the most term pieces written first within each round), Beam keeps them best first; and
    search is given the one it needs by `beam_for`."""
    from nmt.inference.decoding.constraints import NO_RULES
    from nmt.inference.text.terms import TermProgress as Progress
    from nmt.inference.text.terms import TermRules as Rules
    from nmt.inference.decoding.policies import Beam, Live
    from nmt.inference.text.steering import ConstrainedBeam, beam_for

    rules = Rules(terms=((7, 8),))
    beams = [Live([], [], Progress()) for _ in range(3)]
    moves = [(0, 3, -0.1), (1, 4, -0.2), (2, 7, -0.5), (0, 5, -0.6)]  # only token 7 begins the term
    arranged = ConstrainedBeam(3).arrange(moves, beams, rules)
    assert [m[:3] for m in arranged] == [(2, 7, -0.5), (0, 3, -0.1), (1, 4, -0.2), (0, 5, -0.6)]
    assert arranged[0][3] == Progress(begun=frozenset({(0, 1)}))  # each with its progress after the token
    assert [m[:3] for m in Beam(3).arrange(moves, beams, rules)] == moves[:3]
    assert [m[:3] for m in ConstrainedBeam(3).arrange(moves, beams, NO_RULES)] == moves[:3]
    assert type(beam_for(3, [NO_RULES, rules])) is ConstrainedBeam
    assert type(beam_for(3, [NO_RULES])) is Beam and type(beam_for(1, [rules])) is Beam
