"""The `nmt` command line: prepare, train, translate, score, eval, plot, serve, export. Each command
parses its arguments and calls the library; `NmtError` becomes one `error:` line and exit code 1."""

from nmt.cli import evaluate, serve, train, translate  # noqa: F401  (each registers its commands)
from nmt.cli.app import app

__all__ = ["app", "main"]


def main() -> None:
    app()
