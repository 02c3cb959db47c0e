"""The `nmt` command line: train, prepare, distill, translate, score, eval, plot, average, serve,
export. Each
command parses its arguments and calls the library; `NmtError` becomes one `error:` line and exit code 1."""

# isort: off
# Each module registers its commands on the app, in the order `nmt --help` lists them.
from nmt.cli import train, distill, translate, evaluate, average, serve  # noqa: F401
# isort: on
from nmt.cli.app import app

__all__ = ["app", "main"]


def main() -> None:
    app()
