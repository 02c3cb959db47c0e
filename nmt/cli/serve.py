"""`nmt serve` and `nmt export`."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from nmt.cli.app import app, setup_logging, user_errors
from nmt.cli.options import BeamOpt, CheckpointOpt, DeviceOpt, EngineOpt, GlossaryOpt, LooseNumbersOpt
from nmt.errors import NmtError


@app.command()
@user_errors
def serve(
    checkpoint: CheckpointOpt = None,
    host: Annotated[str, typer.Option(help="Address to bind; loopback unless you mean to share it.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="Port (0: any free one).")] = 8000,
    device: DeviceOpt = "auto",
    beam: BeamOpt = None,
    max_beam: Annotated[int, typer.Option(min=1, help="Largest beam or n-best a request may ask for.")] = 10,
    max_texts: Annotated[int, typer.Option(min=1, help="Texts in one request.")] = 64,
    max_chars: Annotated[int, typer.Option(min=1, help="Characters in one text.")] = 1000,
    max_body_kb: Annotated[int, typer.Option(min=1, help="Request body size limit, KiB.")] = 256,
    max_batch: Annotated[int, typer.Option(min=1, help="Sentences decoded together.")] = 128,
    max_wait_ms: Annotated[float, typer.Option(min=0, help="How long a request waits for others to batch with.")] = 5.0,
    queue_size: Annotated[int, typer.Option(min=1, help="Texts waiting at most; beyond, 503 + Retry-After.")] = 1024,
    engine: EngineOpt = "torch",
    loose_numbers: LooseNumbersOpt = False,
    glossary: GlossaryOpt = None,
) -> None:
    """Serve a model: JSON API (/translate, OpenNMT-py's /translator/translate, /health, /docs) and a page at /."""
    try:
        import fastapi  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError:
        raise NmtError("nmt serve needs FastAPI and uvicorn: pip install -e '.[serve]' "
                       "(bash scripts/setup.sh installs them)") from None
    from nmt.inference.text.glossary import Glossary
    from nmt.serving.server import ServeSettings, run_server

    setup_logging()
    terms = Glossary.of(glossary)
    settings = ServeSettings(beam=beam, max_beam=max_beam, max_texts=max_texts, max_chars=max_chars,
                             max_body_bytes=max_body_kb * 1024, max_batch=max_batch, max_wait_ms=max_wait_ms,
                             queue_size=queue_size, glossary=terms)
    run_server(checkpoint, device, host, port, settings, engine, False if loose_numbers else None)


@app.command("export")
@user_errors
def export_cmd(run: Annotated[Optional[str], typer.Argument(
        help="A run directory (its best.pt) or a checkpoint file (default: the newest run's best.pt).",
        show_default=False)] = None) -> None:
    """Export a checkpoint for ONNX Runtime (--engine onnx / onnx-fp32): encoder and one-step decoder graphs, fp32 and int8."""
    from nmt.inference.onnx_export import export_run

    setup_logging()
    directory, manifest = export_run(run)
    for name, size in manifest.sizes.items():
        typer.echo(f"{directory / name}  {size / 1e6:.1f} MB")
