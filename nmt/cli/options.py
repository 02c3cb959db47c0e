"""The typed options of the commands, declared once so that an option shared by several reads the same in each."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

CheckpointOpt = Annotated[Optional[str], typer.Option(
    "--checkpoint", "-c", help="A checkpoint file or a run directory (default: the newest run's best.pt); runs "
                               "joined by '+' decode as one ensemble (runs/a+runs/b, weighted runs/a:2+runs/b:1).")]
DeviceOpt = Annotated[str, typer.Option(help="auto, cpu or cuda (auto takes CUDA when present).")]
BeamOpt = Annotated[Optional[int], typer.Option(
    "--beam", "-k", min=1, help="Beam size (default: the checkpoint's decode.beam_size; 1 is greedy).")]
DataOpt = Annotated[Optional[str], typer.Option(
    "--data", help="The corpus: a zip, a tab-separated file, or PREFIX of PREFIX.<src_lang> and "
                   "PREFIX.<tgt_lang> (default: data.path, $NMT_CORPUS, the data/ cache, download).")]
TextArg = Annotated[Optional[list[str]], typer.Argument(help="Sentence(s) to translate.")]
InputOpt = Annotated[Optional[str], typer.Option(
    "--input", "-i", help="Translate a file ('-' for stdin) in batches, one output line per input line.")]
NbestOpt = Annotated[int, typer.Option(
    min=1, help="Print the N best translations per input as 'index<TAB>score<TAB>text'.")]
PlotOpt = Annotated[Optional[Path], typer.Option(
    help="Write a heatmap of the attention weights of the (one) sentence to this PNG.")]
ShowAttentionOpt = Annotated[bool, typer.Option(
    "--show-attention", help="Print each sentence's attention weights as a table.")]
TokenizedOpt = Annotated[bool, typer.Option(
    "--tokenized", help="Print the old lowercased, tokenized form ('va !') instead of plain text.")]
ScoresOpt = Annotated[bool, typer.Option(
    "--scores", help="After each translation, a tab, its mean token log-probability (natural log, <eos> "
                     "counted), a tab and each word's (the lowest of its pieces'), space-separated.")]
AlignOpt = Annotated[bool, typer.Option(
    "--align", help="After each translation, a tab and its word alignment to the source from the attention, "
                    "Pharaoh format: 'source-output' word indices from 0.")]
PrefixOpt = Annotated[Optional[str], typer.Option(
    "--prefix", help="Every translation starts with this text (tokenized as the output is); the search "
                     "completes it, e.g. --prefix 'Je ne'.")]
GlossaryOpt = Annotated[Optional[Path], typer.Option(
    "--glossary", help="A file of 'source term<TAB>target term' lines: where a source holds a term (whole "
                       "words, any case), its translation contains the target term as written.")]
MarkupOpt = Annotated[Optional[bool], typer.Option(
    "--markup/--no-markup", show_default=False,
    help="Keep inline XML/HTML tags (<b>..</b>, <a href=..>..</a>, <br/>): taken out, the text translated, each put "
         "back around the aligned output words, always well formed. Default: for sources that read as well-formed "
         "markup; --markup: every source (malformed markup is an error), --no-markup: none.")]
TargetArg = Annotated[Optional[Path], typer.Argument(
    help="YAML config (default: configs/default.yaml); with --resume, a run directory "
         "(default: the newest run under runs/).", show_default=False)]
ResumeOpt = Annotated[bool, typer.Option(
    "--resume", help="Continue a run exactly where its newest good checkpoint left it.")]
SetOpt = Annotated[Optional[list[str]], typer.Option(
    "--set", help="Override a config value: --set train.lr=0.0005 (repeatable).")]
EngineOpt = Annotated[str, typer.Option(
    help="torch (PyTorch, fp32), onnx (ONNX Runtime, int8) or onnx-fp32; the onnx ones need "
         "`nmt export` first and run on the CPU.")]
NprocOpt = Annotated[int, typer.Option(
    min=1, help="Data-parallel processes on this machine (runs torchrun --standalone; "
                "global batch = N x train.batch_size).")]

ValidOpt = Annotated[Optional[str], typer.Option(
    "--valid", help="Your dev set (any form --data takes): validation, early stopping and best.pt follow it "
                    "(data.valid).")]
TestOpt = Annotated[Optional[str], typer.Option(
    "--test", help="Your test set (any form --data takes): the run's test split (data.test).")]
InitFromOpt = Annotated[Optional[str], typer.Option(
    "--init-from", help="Start a new run from this run's (or checkpoint's) weights, tokenizer and vocabularies, "
                        "with a fresh optimizer, schedule and budget: fine-tuning on --data.")]
LooseNumbersOpt = Annotated[bool, typer.Option(
    "--loose-numbers", help="A data.protect model may drop a source number or write digits of its own "
                            "(default: every number exactly once, no other digit), for comparison.")]
SampleOpt = Annotated[bool, typer.Option(
    "--sample", help="Draw each translation from the model's distribution instead of searching for the best "
                     "(with --nbest N: N samples); --top-k, --top-p, --temperature and --seed shape it.")]
TopKOpt = Annotated[int, typer.Option(
    "--top-k", min=0, help="With --sample: draw from the K most likely tokens (0: all).")]
TopPOpt = Annotated[float, typer.Option(
    "--top-p", help="With --sample: draw from the smallest set of tokens whose probability reaches P (1: all).")]
TemperatureOpt = Annotated[float, typer.Option(
    "--temperature", help="With --sample: below 1 sharpens the distribution, above 1 flattens it.")]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar or log lines.")]
SeedOpt = Annotated[int, typer.Option("--seed", help="With --sample: the same seed draws the same samples.")]
