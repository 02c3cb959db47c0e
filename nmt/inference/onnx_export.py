"""ONNX export: a checkpoint's model as an encoder graph and a one-step decoder graph, in fp32 and
int8, for ONNX Runtime to decode with (`nmt.inference.onnx_engine`).

    nmt export runs/my-run     # -> runs/my-run/onnx/best/{encoder,decoder}{,.int8}.onnx, manifest.json

The graphs are the model's own `encode` and `candidates` (a decoder step as search reads it),
traced by torch's TorchScript exporter (it gave leaner graphs than the dynamo one, whose
unfolded weight initializers the quantizer then skips without a word). Three rewrites follow,
each because ONNX Runtime's dynamic quantizer would otherwise leave work in fp32:
- a `Gemm` (what a 2-D nn.Linear becomes) is split into MatMul + Add: the quantizer only quantizes
  MatMul;
- embedding lookups read int8 tables (the quantizer leaves them fp32: most of the file);
- the attention over the encoder states stays fp32 (see `quantize`).
The fp32 graphs keep tied embeddings as one table (the lookup and a Gemm read it as torch does).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from torch import nn

from nmt.data.manifest import file_sha256
from nmt.errors import NmtError
from nmt.model.checkpoint import load_model
from nmt.model.decoder import DecoderState
from nmt.model.runs import ensemble_members, resolve_checkpoint
from nmt.model.seq2seq import ranked

OPSET = 17
ONNX_INSTALL = 'pip install -e ".[onnx]"'
MANIFEST = "manifest.json"
# What the int8 graphs quantize: the LSTMs and the MatMuls that multiply by a weight matrix.
QUANTIZED_OPS = ("MatMul", "LSTM")


class MissingOnnx(NmtError):
    """The optional onnx/onnxruntime packages are not installed."""


def require_onnx(export: bool = True) -> None:
    """onnxruntime there to decode, and onnx too to export (imported only for that: 0.6 s of a
    decoding command's start)."""
    try:
        if export:
            import onnx  # noqa: F401
        import onnxruntime  # noqa: F401
    except ImportError:
        raise MissingOnnx(f"the ONNX engine needs onnx and onnxruntime: install them with {ONNX_INSTALL}") from None


@dataclass(frozen=True)
class Manifest:
    checkpoint: str  # the file name beside the run's other files, e.g. best.pt
    checkpoint_sha256: str  # of the checkpoint's bytes when exported: a newer checkpoint differs
    input_feeding: bool
    num_layers: int
    hidden_size: int
    vocab_size: int  # target pieces: the most candidates a step can propose
    banned_id: int | None  # the target id the graphs never propose (a subword model's <unk>)
    torch_version: str
    onnxruntime_version: str
    opset: int
    graphs: dict[str, str]  # variant ("fp32", "int8") and part ("encoder", "decoder") -> file name
    sizes: dict[str, int]  # file name -> bytes

    @classmethod
    def read(cls, path: Path) -> Manifest:
        fields = json.loads(path.read_text(encoding="utf-8"))
        fields.pop("copy_attention", None)  # (exports before model.copy_attention was removed: false)
        return cls(**fields)


def export_dir(checkpoint: Path) -> Path:
    """Where the export of a checkpoint lives: runs/x/best.pt -> runs/x/onnx/best/."""
    return checkpoint.parent / "onnx" / checkpoint.stem


def graph_name(variant: str, part: str) -> str:
    return f"{part}.onnx" if variant == "fp32" else f"{part}.{variant}.onnx"


def state_names(decoder: nn.Module) -> list[str]:
    """The decoder state's tensors that the step graph reads and the encoder graph writes, in order."""
    names = ["memory", "prepared_keys", "src_mask", "h", "c"]
    if decoder.input_feeding:
        names.append("feed")
    return names


def flat_state(state: DecoderState, names: list[str]) -> tuple[torch.Tensor, ...]:
    tensors = {"memory": state.memory, "prepared_keys": state.prepared_keys, "src_mask": state.src_mask,
               "h": state.hidden[0], "c": state.hidden[1], "feed": state.feed}
    return tuple(tensors[name] for name in names)


def unflat_state(tensors: dict[str, torch.Tensor]) -> DecoderState:
    return DecoderState(tensors["memory"], tensors["prepared_keys"], tensors["src_mask"],
                        (tensors["h"], tensors["c"]), tensors.get("feed"))


class EncoderGraph(nn.Module):
    """src (batch, src_len), src_lens (batch,) -> the decoder's initial state, flattened."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model, self.names = model, state_names(model.decoder)

    def forward(self, src: torch.Tensor, src_lens: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return flat_state(self.model.encode(src, src_lens), self.names)


class DecoderGraph(nn.Module):
    """One decoding step as search reads it (`Seq2Seq.candidates`): prev_ids (batch,), k (a
    scalar), `named` (batch, m) token ids and the state -> the k best log-probs and ids (batch, k),
    the log-prob of <eos> (batch,), the named tokens' log-probs (batch, m), the attention (batch,
    src_len), the state's changing part (h, c and feed). The banned id is in the weights (see
    `export_run`). `named` is what search's rules name (placeholders, digits, glossary terms): read
    beside the k best, so a rule costs no ranking of the whole vocabulary."""

    def __init__(self, model: nn.Module, eos_id: int):
        super().__init__()
        self.model, self.eos_id, self.names = model, eos_id, state_names(model.decoder)

    def forward(self, prev_ids: torch.Tensor, k: torch.Tensor, named: torch.Tensor, *state: torch.Tensor
                ) -> tuple[torch.Tensor, ...]:
        log_probs, new, weights = self.model.next_log_probs(prev_ids, unflat_state(dict(zip(self.names, state))),
                                                            None)
        top, ids = ranked(log_probs, k)  # as `Seq2Seq.candidates` reads them
        changed = (new.hidden[0], new.hidden[1]) + ((new.feed,) if new.feed is not None else ())
        return (top, ids, log_probs[:, self.eos_id], log_probs.gather(1, named), weights) + changed


def changed_names(names: list[str]) -> list[str]:
    return [n for n in ("h", "c", "feed") if n in names]


def _export(module: nn.Module, args: tuple, path: Path, inputs: list[str], outputs: list[str],
            dynamic: dict[str, dict[int, str]]) -> None:
    import warnings

    # The exporter's notes on LSTMs and packed sequences (Python warnings, and C++ ones written
    # straight to stderr) are about its internals, not the user's model: a failure still raises.
    with warnings.catch_warnings(), _stderr_silenced():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, args, str(path), dynamo=False, opset_version=OPSET, input_names=inputs,
                          output_names=outputs, dynamic_axes=dynamic, do_constant_folding=True)


@contextlib.contextmanager
def _stderr_silenced() -> Iterator[None]:
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def export_fp32(model: nn.Module, directory: Path, eos_id: int) -> None:
    """Trace the encoder and the decoder step into directory/{encoder,decoder}.onnx."""
    names = state_names(model.decoder)
    batch, src_len = 3, 7
    src = torch.randint(4, model.encoder.embedding.num_embeddings, (batch, src_len))
    src_lens = torch.tensor([src_len, 4, 2])
    axes = {"memory": {0: "batch", 1: "src_len"}, "prepared_keys": {0: "batch", 1: "src_len"},
            "src_mask": {0: "batch", 1: "src_len"}, "h": {1: "batch"}, "c": {1: "batch"}, "feed": {0: "batch"}}
    _export(EncoderGraph(model), (src, src_lens), directory / "encoder.onnx", ["src", "src_lens"], names,
            {"src": {0: "batch", 1: "src_len"}, "src_lens": {0: "batch"}, **{n: axes[n] for n in names}})
    with torch.no_grad():
        state = EncoderGraph(model)(src, src_lens)
    changed = changed_names(names)
    outputs = ["top", "ids", "eos", "named_scores", "attention"] + [f"{n}_out" for n in changed]
    out_axes = {"top": {0: "batch", 1: "k"}, "ids": {0: "batch", 1: "k"}, "eos": {0: "batch"},
                "named_scores": {0: "batch", 1: "named"}, "attention": {0: "batch", 1: "src_len"},
                **{f"{n}_out": axes[n] for n in changed}}
    args = (torch.full((batch,), 2), torch.tensor(2), torch.full((batch, 2), eos_id), *state)
    _export(DecoderGraph(model, eos_id), args, directory / "decoder.onnx", ["prev_ids", "k", "named"] + names,
            outputs, {"prev_ids": {0: "batch"}, "named": {0: "batch", 1: "named"}, **{n: axes[n] for n in names},
                      **out_axes})


def split_gemms(graph_proto) -> None:
    """Gemm(A, B, C, transB=1) with B a weight -> MatMul(A, B^T) + Add(C), for the quantizer, which
    quantizes MatMul only. B^T is stored in place of B, or beside it where an embedding lookup
    reads B too (tied embeddings; the lookup then gets its own int8 table, `quantize_embeddings`)."""
    from onnx import helper, numpy_helper

    init = {t.name: t for t in graph_proto.initializer}
    nodes = list(graph_proto.node)
    for node in nodes:
        if node.op_type != "Gemm" or node.input[1] not in init:
            continue
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        if attrs.get("transA", 0) or attrs.get("alpha", 1.0) != 1.0 or attrs.get("beta", 1.0) != 1.0:
            continue
        weight = numpy_helper.to_array(init[node.input[1]])
        if not attrs.get("transB", 0):
            weight = weight.T
        transposed = f"{node.input[1]}.T"
        if transposed not in init:
            init[transposed] = numpy_helper.from_array(weight.T.copy(), transposed)
            graph_proto.initializer.append(init[transposed])
        index = list(graph_proto.node).index(node)
        product = f"{node.output[0]}.matmul"
        replacement = [helper.make_node("MatMul", [node.input[0], transposed], [product], name=f"{node.name}.MatMul")]
        if len(node.input) > 2 and node.input[2]:
            replacement.append(helper.make_node("Add", [product, node.input[2]], [node.output[0]],
                                                name=f"{node.name}.Add"))
        else:
            replacement[0].output[0] = node.output[0]
        graph_proto.node.remove(node)
        for offset, new in enumerate(replacement):
            graph_proto.node.insert(index + offset, new)
    _drop_unused(graph_proto)


def quantize(fp32: Path, int8: Path) -> None:
    """Dynamic int8 quantization (weights per output channel, activations per call) of the LSTMs,
    the projections and the embeddings."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    proto = onnx.load(str(fp32))
    split_gemms(proto.graph)
    weights = {t.name: t for t in proto.graph.initializer}
    # Left in fp32: products of two activations (attention weights x encoder states), which
    # would quantize the encoder states anew at every step, and a weight of one column, the
    # additive attention's score v, whose input is (rows, src_len, units): quantizing it cost
    # beam search 17% of its speed (309 -> 257 sentences/s, same BLEU; a 2-core Xeon, 1 thread).
    fp32_nodes = [n.name for n in proto.graph.node if n.op_type == "MatMul" and
                  (n.input[1] not in weights or weights[n.input[1]].dims[-1] == 1)]
    # reduce_range: weights in 7 bits. Without VNNI (AVX2 laptops, AMD EPYC here) ONNX Runtime's
    # u8 x s8 kernel adds pairs of products in int16, which saturates with 8-bit weights: on an
    # AVX2-only EPYC the toy model's greedy outputs agreed with torch's in 66.5% of sentences with
    # 8 bits, 91.5% with 7. An export must decode right on whatever CPU later loads it.
    quiet = logging.getLogger().level
    logging.getLogger().setLevel(logging.ERROR)  # its advice to pre-process first is for convolutional models
    try:
        quantize_dynamic(proto, int8, op_types_to_quantize=list(QUANTIZED_OPS), per_channel=True, reduce_range=True,
                         weight_type=QuantType.QInt8, nodes_to_exclude=fp32_nodes)
    finally:
        logging.getLogger().setLevel(quiet)
    proto = onnx.load(str(int8))
    quantize_embeddings(proto.graph)
    onnx.save(proto, str(int8))


def quantize_embeddings(graph_proto) -> None:
    """Embedding lookups (a Gather from an fp32 table) read an int8 table instead, symmetric, one
    scale per vocabulary entry: Gather(q) -> Cast -> Mul(Gather(scale)). Before this the fp32
    tables were 90% of the int8 files. A tied target table is thus stored twice in int8, once
    transposed for the output projection's MatMul: reading the lookup's rows out of that one
    instead (strided columns) measured 8% slower greedy and 15% slower beam search (2-core Xeon)."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    init = {t.name: t for t in graph_proto.initializer}
    for node in list(graph_proto.node):
        if node.op_type != "Gather" or node.input[0] not in init or init[node.input[0]].data_type != TensorProto.FLOAT:
            continue
        name = node.input[0]
        axis = next((helper.get_attribute_value(a) for a in node.attribute if a.name == "axis"), 0)
        table = numpy_helper.to_array(init[name])
        if axis != 0 or table.ndim != 2:
            continue
        step = np.maximum(np.abs(table).max(axis=1), 1e-12) / 127
        quantized, scale, last_axis = f"{name}_entries_int8", f"{name}_entries_scale", f"{name}_last_axis"
        graph_proto.initializer.extend([
            numpy_helper.from_array(np.clip(np.rint(table / step[:, None]), -127, 127).astype(np.int8), quantized),
            numpy_helper.from_array(step.astype(np.float32), scale),
            numpy_helper.from_array(np.array([-1], dtype=np.int64), last_axis)])
        out = node.output[0]  # (ids..., embed): each looked-up entry times its scale
        steps = [helper.make_node("Gather", [quantized, node.input[1]], [f"{out}.int8"]),
                 helper.make_node("Cast", [f"{out}.int8"], [f"{out}.float"], to=TensorProto.FLOAT),
                 helper.make_node("Gather", [scale, node.input[1]], [f"{out}.scale"]),
                 helper.make_node("Unsqueeze", [f"{out}.scale", last_axis], [f"{out}.scale_column"]),
                 helper.make_node("Mul", [f"{out}.float", f"{out}.scale_column"], [out])]
        index = list(graph_proto.node).index(node)
        graph_proto.node.remove(node)
        for offset, new in enumerate(steps):
            new.name = f"{node.name}.{offset}"
            graph_proto.node.insert(index + offset, new)
    _drop_unused(graph_proto)


def _drop_unused(graph_proto) -> None:
    used = {i for n in graph_proto.node for i in n.input}
    for tensor in list(graph_proto.initializer):
        if tensor.name not in used:
            graph_proto.initializer.remove(tensor)


def export_run(checkpoint: str | Path | None) -> tuple[Path, Manifest]:
    """Export a checkpoint (a run directory: its best.pt) to export_dir(checkpoint), fp32 and
    int8; written to a temporary directory first, so a failed export leaves the last one whole."""
    if members := ensemble_members(checkpoint):
        raise NmtError("an ensemble is exported member by member: "
                       + "; ".join(f"nmt export {path}" for path, _ in members)
                       + " (then --engine onnx decodes the ensemble with each member's export)")
    require_onnx()
    import onnx
    import onnxruntime

    path = resolve_checkpoint(checkpoint)
    digest = file_sha256(path)  # before reading it: a checkpoint rewritten meanwhile then reads as newer
    loaded = load_model(path)
    model = loaded.model.cpu().eval()
    model.decoder.use_cells = False  # one LSTM node per layer: what DynamicQuantizeLSTM replaces
    banned_id = loaded.tgt_vocab.unk_id if loaded.tokenizer.ban_unk else None
    if banned_id is not None:  # what search bans, as a bias of -inf: no (rows, vocab) mask at every step
        with torch.no_grad():
            model.decoder.out.bias[banned_id] = float("-inf")
    target = export_dir(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    work.chmod(0o755)  # mkdtemp's 0700 would keep the export from anyone else who may read the run
    try:
        export_fp32(model, work, loaded.tgt_vocab.eos_id)
        for part in ("encoder", "decoder"):
            onnx.checker.check_model(str(work / f"{part}.onnx"))
            quantize(work / f"{part}.onnx", work / f"{part}.int8.onnx")
        graphs = {f"{variant}/{part}": graph_name(variant, part) for variant in ("fp32", "int8")
                  for part in ("encoder", "decoder")}
        cfg = loaded.cfg.model
        manifest = Manifest(path.name, digest, cfg.input_feeding, cfg.num_layers,
                            cfg.hidden_size, len(loaded.tgt_vocab), banned_id, torch.__version__,
                            onnxruntime.__version__, OPSET, graphs,
                            {name: (work / name).stat().st_size for name in graphs.values()})
        (work / MANIFEST).write_text(json.dumps(asdict(manifest), indent=2) + "\n", encoding="utf-8")
        _replace_dir(work, target)
    finally:
        if work.exists():
            _remove(work)
    return target, manifest


def _replace_dir(new: Path, target: Path) -> None:
    old = target.with_name(f".{target.name}-old")
    if old.exists():
        _remove(old)
    if target.exists():
        os.replace(target, old)
    os.replace(new, target)
    if old.exists():
        _remove(old)


def _remove(directory: Path) -> None:
    import shutil

    shutil.rmtree(directory, ignore_errors=True)

