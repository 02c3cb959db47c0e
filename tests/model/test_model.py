import pytest
import torch

from nmt import hardware
from nmt.data.vocab import SPECIALS, Vocab
from nmt.inference.decoding.search import Sources, Specials
from helpers.searches import greedy
from nmt.model import build_model
from conftest import seed_model

VOCAB = Vocab(list(SPECIALS) + [f"w{i}" for i in range(20)])
TARGET_IDS = Specials(VOCAB.bos_id, VOCAB.eos_id)


# The seed design, and every model option on at once (tying needs embed_size == hidden_size).
VARIANTS = {"seed": {},
            "options": dict(embed_size=16, bidirectional=True, bridge=True, input_feeding=True, tie_embeddings=True),
            "parallel": dict(embed_size=16, bidirectional=True, tie_embeddings=True, decoder="parallel"),
            "parallel-3-layers": dict(embed_size=16, num_layers=3, bidirectional=True, tie_embeddings=True,
                                      decoder="parallel")}
variants = pytest.mark.parametrize("options", VARIANTS.values(), ids=VARIANTS.keys())


def _model(attention="additive", **options):
    torch.manual_seed(0)
    sizes = dict(embed_size=12, hidden_size=16, num_layers=2) | options
    return build_model(seed_model(attention=attention, **sizes), VOCAB, VOCAB).eval()


@variants
def test_padding_does_not_change_a_sentence(options):
    """Packing and masking make a sentence's logits independent of how much the batch pads it
    (for a bidirectional encoder too, whose backward direction starts at the last real token)."""
    for attention in ("additive", "dot"):
        model = _model(attention, **options)
        src = torch.tensor([[5, 6, 7, 2]])
        padded = torch.tensor([[5, 6, 7, 2, 0, 0, 0], [8, 9, 10, 11, 12, 13, 2]])
        tgt_in = torch.tensor([[1, 9, 10]])
        alone = model(src, torch.tensor([4]), tgt_in)
        in_batch = model(padded, torch.tensor([4, 7]), tgt_in.repeat(2, 1))[:1]
        assert torch.allclose(alone, in_batch, atol=1e-5)


def test_attention_ignores_padding_and_sums_to_one():
    model = _model()
    src = torch.tensor([[5, 6, 2, 0, 0], [5, 6, 7, 8, 2]])
    src_lens = torch.tensor([3, 5])
    _, _, weights = model.decoder.teacher_forced(model.decoder.embed(torch.tensor([[1, 5], [1, 6]])),
                                                 model.encode(src, src_lens))
    assert torch.allclose(weights.sum(-1), torch.ones(2, 2), atol=1e-6)
    assert (weights[0, :, 3:] == 0).all()


@variants
def test_teacher_forced_logits_equal_step_by_step_decoding(options):
    model = _model(**options)
    src, src_lens = torch.tensor([[5, 6, 7, 2], [8, 2, 0, 0]]), torch.tensor([4, 2])
    tgt_in = torch.tensor([[1, 9, 10, 11], [1, 12, 13, 14]])
    full = model(src, src_lens, tgt_in)
    state = model.encode(src, src_lens)
    for t in range(tgt_in.shape[1]):
        logits, state, _ = model.decoder.decode_step(tgt_in[:, t], state)
        assert torch.allclose(logits, full[:, t], atol=1e-5)


@variants
def test_greedy_matches_argmax_decoding_and_respects_caps(options):
    model = _model(**options)
    src, src_lens = torch.tensor([[5, 6, 7, 2], [8, 2, 0, 0]]), torch.tensor([4, 2])
    outputs = [h.tokens for h in greedy(model, Sources(src, src_lens, torch.tensor([6, 3])), TARGET_IDS)]
    assert len(outputs[0]) <= 6 and len(outputs[1]) <= 3
    for row in range(2):  # each row decoded alone, one argmax at a time, gives the same tokens
        state = model.encode(src[row: row + 1, : src_lens[row]], src_lens[row: row + 1])
        prev, expected = torch.tensor([VOCAB.bos_id]), []
        for _ in range(len(outputs[row])):
            logits, state, _ = model.decoder.decode_step(prev, state)
            prev = logits.argmax(-1)
            expected.append(prev.item())
        assert outputs[row] == expected


@variants
def test_fast_loss_equals_plain_step_by_step_loss(options):
    """The training path (masked projection over non-pad positions, one output GEMM) gives the
    loss a plain loop of decode_step calls with full logits and ignore_index gives."""
    import torch.nn.functional as F

    from nmt.data.batches import Batch
    from nmt.model.loss import batch_loss

    model = _model(**options)
    src, src_lens = torch.tensor([[5, 6, 7, 2], [8, 2, 0, 0], [9, 10, 2, 0]]), torch.tensor([4, 2, 3])
    tgt_in = torch.tensor([[1, 9, 10, 11], [1, 12, 0, 0], [1, 13, 14, 0]])
    tgt_out = torch.tensor([[9, 10, 11, 2], [12, 2, 0, 0], [13, 14, 2, 0]])
    batch = Batch(src, src_lens, tgt_in, tgt_out, num_tokens=int((tgt_out != 0).sum()))
    fast = batch_loss(model, batch, VOCAB.pad_id)
    state, plain = model.encode(src, src_lens), torch.tensor(0.0)
    for t in range(tgt_in.shape[1]):
        logits, state, _ = model.decoder.decode_step(tgt_in[:, t], state)
        plain = plain + F.cross_entropy(logits, tgt_out[:, t], ignore_index=VOCAB.pad_id, reduction="sum")
    assert torch.allclose(fast, plain, rtol=1e-5)
    support = hardware.bf16_support(torch.device("cpu"))
    if not support.native:
        pytest.skip(f"the bf16 half of this test needs native bf16: {support.reason}")
    bf16 = batch_loss(model, batch, VOCAB.pad_id, precision="bf16")
    assert torch.allclose(bf16, plain, rtol=2e-2)  # bf16 autocast: same loss up to bf16 rounding


def test_auto_precision_follows_the_hardware():
    from nmt.model.loss import autocast
    cpu = torch.device("cpu")
    expected = "bf16" if hardware.fast_bf16(cpu) else "fp32"
    assert hardware.resolve_precision("auto", cpu) == expected
    with autocast(cpu, expected):
        assert torch.is_autocast_enabled("cpu") == (expected == "bf16")
    with pytest.raises(ValueError, match="decided"):
        autocast(cpu, "auto")  # decided once, at the run's start, not at every batch
    with autocast(cpu, "fp32"):
        assert not torch.is_autocast_enabled("cpu")


def test_tied_embeddings_share_one_matrix():
    plain, tied = _model(embed_size=16), _model(embed_size=16, tie_embeddings=True)
    assert tied.decoder.out.weight is tied.decoder.embedding.weight
    count = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    assert count(plain) - count(tied) == len(VOCAB) * 16


def test_projection_row_padding_keeps_the_logits():
    """The output projection pads its rows to a multiple of 64 (bounded oneDNN shapes): the
    logits of the real rows are those of the unpadded product."""
    model = _model()
    for rows in (1, 63, 64, 65, 130):
        hidden = torch.randn(rows, 16)
        assert torch.allclose(model.decoder.project(hidden), model.decoder.out(hidden), atol=1e-6)


@variants
def test_lstm_cells_path_equals_the_nn_lstm_path(options):
    """The decoder's CUDA path (one fused LSTM cell per layer and step) computes what nn.LSTM does,
    forward and backward; checked here on the CPU by forcing each path."""
    model = _model(**options).train()  # dropout 0: both paths draw nothing
    src, src_lens = torch.tensor([[5, 6, 7, 2], [8, 2, 0, 0]]), torch.tensor([4, 2])
    tgt_in = torch.tensor([[1, 9, 10, 11], [1, 12, 0, 0]])
    results = []
    for use_cells in (False, True):
        model.zero_grad()
        model.decoder.use_cells = use_cells
        logits = model(src, src_lens, tgt_in)
        logits.logsumexp(-1).sum().backward()
        results.append((logits.detach(), [p.grad.clone() for p in model.parameters()]))
    model.decoder.use_cells = None
    (plain, plain_grads), (cells, cell_grads) = results
    assert torch.allclose(plain, cells, atol=1e-5)
    for a, b in zip(plain_grads, cell_grads):
        assert torch.allclose(a, b, atol=1e-5)


def test_lstm_cells_path_applies_inter_layer_dropout_only_in_training():
    from nmt.model.decoder import lstm_cells_step

    rnn = torch.nn.LSTM(6, 8, num_layers=2, batch_first=True, dropout=0.5)
    x, state = torch.randn(4, 6), (torch.randn(2, 4, 8), torch.randn(2, 4, 8))
    rnn.eval()
    expected, (h, c) = rnn(x.unsqueeze(1), state)
    out, (h_cells, c_cells) = lstm_cells_step(rnn, x, state)
    assert torch.allclose(out, expected.squeeze(1), atol=1e-6) and torch.allclose(c_cells, c, atol=1e-6)
    rnn.train()  # the top layer's input is dropped out: its output changes, the first layer's does not
    out, (h_train, _) = lstm_cells_step(rnn, x, state)
    assert torch.allclose(h_train[0], h[0], atol=1e-6) and not torch.allclose(out, expected.squeeze(1))


def test_small_inference_steps_take_the_cells_path_on_cpu(monkeypatch):
    """Few rows and no gradient (serving one sentence, say): fused cells, measured faster there;
    training steps and large decoding batches keep nn.LSTM."""
    import nmt.model.decoder as decoder

    calls = []
    original = decoder.lstm_cells_step
    monkeypatch.setattr(decoder, "lstm_cells_step", lambda *args: calls.append(1) or original(*args))
    model = _model().eval()
    src, src_lens = torch.tensor([[5, 6, 7, 2], [8, 2, 0, 0]]), torch.tensor([4, 2])
    greedy(model, Sources(src, src_lens, torch.tensor([3, 3])), TARGET_IDS)
    assert calls
    calls.clear()
    model(src, src_lens, torch.tensor([[1, 9, 10], [1, 12, 0]])).sum().backward()
    rows = decoder.CPU_CELLS_MAX_ROWS + 1
    with torch.inference_mode():
        greedy(model, Sources(src[:1], src_lens[:1], torch.full((1,), 3)).repeated(rows), TARGET_IDS)
    assert not calls


@pytest.mark.parametrize("options", [{}, dict(embed_size=16, bidirectional=True, input_feeding=True, tie_embeddings=True),
                                     dict(num_layers=1, input_feeding=True), dict(num_layers=3, attention="dot"),
                                     dict(num_layers=3, attention="dot", input_feeding=True)],
                         ids=["seed", "options", "one-layer", "three-layers-dot", "three-layers-dot-feeding"])
def test_unrolled_training_loop_gives_the_step_loops_loss_and_gradients(options):
    """Teacher forcing on the CPU takes nmt/model/unrolled.py; pinned to the per-step loop
    (nn.LSTM, or fused cells), the same batch gives the same loss and gradients."""
    from nmt.data.batches import Batch
    from nmt.model.loss import batch_loss

    src, src_lens = torch.tensor([[5, 6, 7, 2], [8, 2, 0, 0], [9, 10, 2, 0]]), torch.tensor([4, 2, 3])
    tgt_in = torch.tensor([[1, 9, 10, 11], [1, 12, 0, 0], [1, 13, 14, 0]])
    tgt_out = torch.tensor([[9, 10, 11, 2], [12, 2, 0, 0], [13, 14, 2, 0]])
    batch = Batch(src, src_lens, tgt_in, tgt_out, num_tokens=int((tgt_out != 0).sum()))
    results = {}
    for path in (None, False, True):  # unrolled, nn.LSTM steps, fused-cell steps
        model = _model(**options).train()
        model.decoder.use_cells = path
        assert model.decoder.unrolled_on(torch.zeros(1)) == (path is None)
        loss = batch_loss(model, batch, VOCAB.pad_id)
        loss.backward()
        results[path] = loss, {name: p.grad for name, p in model.named_parameters()}
    for path in (False, True):
        assert torch.allclose(results[None][0], results[path][0], rtol=1e-5)
        for name, grad in results[None][1].items():
            assert torch.allclose(grad, results[path][1][name], atol=1e-5), name


@pytest.mark.parametrize("options", [dict(decoder="parallel", dropout=0.3),
                                     dict(decoder="parallel", num_layers=3, dropout=0.3, embed_dropout=0.2,
                                          output_dropout=0.3),
                                     dict(decoder="parallel", num_layers=1)],
                         ids=["parallel", "parallel-dropouts", "parallel-one-layer"])
def test_parallel_decoder_trains_in_one_call_a_layer_as_it_decodes_step_by_step(options):
    """The parallel arrangement's teacher forcing (each LSTM layer called once over the target,
    attention for every position in one call) gives the log-probabilities of decoding one
    position at a time, with padding, through either LSTM path; and in training the gradient
    reaches every weight."""
    model = _model(**options)
    src, src_lens = torch.tensor([[5, 6, 7, 2], [8, 2, 0, 0], [9, 10, 2, 0]]), torch.tensor([4, 2, 3])
    tgt_in = torch.tensor([[1, 9, 10, 11, 12], [1, 12, 0, 0, 0], [1, 13, 14, 0, 0]])
    calls = []
    for rnn in model.decoder.lstms:
        rnn.register_forward_hook(lambda module, args, out: calls.append(args[0].shape[1]))
    full = model(src, src_lens, tgt_in).log_softmax(-1)
    assert calls == [tgt_in.shape[1]] * len(model.decoder.lstms)  # one call a layer, every position at once
    for use_cells in (None, True, False):
        model.decoder.use_cells = use_cells
        state = model.encode(src, src_lens)
        with torch.no_grad():
            for t in range(tgt_in.shape[1]):
                logits, state, _ = model.decoder.decode_step(tgt_in[:, t], state)
                real = tgt_in[:, t] != VOCAB.pad_id
                assert torch.allclose(logits.log_softmax(-1)[real], full[:, t][real], atol=1e-5)
    model.decoder.use_cells = None
    model.train()
    model(src, src_lens, tgt_in).logsumexp(-1).sum().backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in model.decoder.parameters())


def _decoder_dropout_varies(model) -> bool:
    """Whether two training-mode runs differ with the encoder held still: only the decoder's own
    dropout can then make them differ."""
    src, src_lens, tgt_in = torch.tensor([[5, 6, 7, 2]]), torch.tensor([4]), torch.tensor([[1, 9, 10, 11]])
    model.train()
    model.encoder.eval()
    return not torch.equal(model(src, src_lens, tgt_in), model(src, src_lens, tgt_in))


def test_the_parallel_decoders_dropout_is_between_layers_and_only_in_training():
    model = _model(decoder="parallel", dropout=0.5)
    src, src_lens, tgt_in = torch.tensor([[5, 6, 7, 2]]), torch.tensor([4]), torch.tensor([[1, 9, 10, 11]])
    assert torch.equal(model(src, src_lens, tgt_in), model(src, src_lens, tgt_in))
    assert _decoder_dropout_varies(model)
    assert not _decoder_dropout_varies(_model(decoder="parallel", dropout=0.5, num_layers=1))  # nothing between layers


@pytest.mark.parametrize("decoder", ["stepwise", "parallel"])
def test_output_dropout_drops_what_the_projection_reads_in_training_only(decoder):
    options = dict(decoder=decoder, num_layers=1) | ({"input_feeding": True} if decoder == "stepwise" else {})
    assert not _decoder_dropout_varies(_model(**options))
    model = _model(**options, output_dropout=0.5)
    assert _decoder_dropout_varies(model)
    model.eval()
    src, src_lens, tgt_in = torch.tensor([[5, 6, 7, 2]]), torch.tensor([4]), torch.tensor([[1, 9, 10, 11]])
    assert torch.equal(model(src, src_lens, tgt_in), _model(**options)(src, src_lens, tgt_in))  # the same weights


@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_summed_cross_entropy_is_torchs_in_value_and_gradient(smoothing):
    import torch.nn.functional as F

    from nmt.model.loss import SummedCrossEntropy

    torch.manual_seed(0)
    logits, targets = torch.randn(37, 50, requires_grad=True), torch.randint(0, 50, (37,))
    expected = F.cross_entropy(logits, targets, reduction="sum", label_smoothing=smoothing)
    expected_grad, = torch.autograd.grad(expected * 0.3, logits)
    loss = SummedCrossEntropy.apply(logits, targets, smoothing)
    grad, = torch.autograd.grad(loss * 0.3, logits)
    assert torch.allclose(loss, expected, rtol=1e-6) and torch.allclose(grad, expected_grad, atol=1e-7)

