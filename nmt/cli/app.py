"""The typer app every command registers on, logging, and the wrapper that turns the library's
NmtError into one `error:` line and exit code 1."""

from __future__ import annotations

import functools
import logging
import sys
from collections.abc import Callable
from typing import Any

import typer

from nmt.errors import NmtError

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Train and run an LSTM encoder–decoder with attention (English→French by default).")
logger = logging.getLogger("nmt")


def setup_logging(quiet: bool = False) -> None:
    """INFO to stderr (WARNING with --quiet); the root stays at INFO so train.log gets everything."""
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr, force=True)
    logging.getLogger().handlers[0].setLevel(logging.WARNING if quiet else logging.INFO)


@app.callback()
def _startup() -> None:
    from nmt import hardware

    hardware.keep_freed_memory()  # decoding and training both allocate large per-step tensors


def user_errors(command: Callable[..., Any]) -> Callable[..., Any]:
    """Turn the library's NmtError into one line on stderr and exit code 1, with no traceback."""
    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except NmtError as e:
            typer.echo(f"error: {e}", err=True)
            raise typer.Exit(code=1) from None
    return wrapper
