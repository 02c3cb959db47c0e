"""The README is a landing page that stays true: short, its commands still parse, its links and
scripts exist."""

import re
import shlex
import subprocess
from pathlib import Path

import click
import pytest
import typer

from nmt.cli import app

REPO = Path(__file__).resolve().parent.parent
README = (REPO / "README.md").read_text(encoding="utf-8")


def shown_commands(text: str) -> list[str]:
    """The command lines of the README's indented code blocks, comments and line continuations joined."""
    lines, pending = [], ""
    for line in text.splitlines():
        if not line.startswith("    "):
            continue
        line = pending + line.strip()
        pending = ""
        if line.endswith("\\"):
            pending = line[:-1] + " "
            continue
        lines.append(line)
    return [re.sub(r"\s+#.*$", "", x).strip() for x in lines]


def test_the_readme_is_a_landing_page():
    """At most 250 lines; its first screen says what nmt is and how to start, and leaves the CPU
    flags and kernel settings to the figures further down."""
    assert len(README.splitlines()) <= 250
    first_screen = "\n".join(README.splitlines()[:40]).lower()
    assert not [word for word in ("onednn", "avx", "bf16") if word in first_screen]


NMT_COMMANDS = [x for x in shown_commands(README) if x.startswith("nmt ")]


def test_the_readme_shows_the_commands():
    assert {x.split()[1] for x in NMT_COMMANDS} >= {"train", "translate", "eval", "serve", "prepare"}


@pytest.mark.parametrize("line", NMT_COMMANDS)
def test_each_nmt_command_the_readme_shows_parses(line):
    group = typer.main.get_command(app)
    args = [a for a in shlex.split(line)[1:] if not (a.startswith("[") and a.endswith("]"))]
    context = click.Context(group, info_name="nmt")
    name, command, rest = group.resolve_command(context, args)
    command.make_context(name, rest, parent=context)  # parses every option and argument, or raises


# a script the README names "at COMMIT" (a settled measurement whose script was removed) is read there
SCRIPT = re.compile(r"(scripts/[\w/]+\.(?:py|sh))(?:[^`\n]*`)?(?: at ([0-9a-f]{7,40})\b)?")


def test_scripts_and_links_it_names_exist():
    named = set(SCRIPT.findall(README))
    links = set(re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", README))
    assert named and links and any(commit for _, commit in named)
    for path in {path for path, commit in named if not commit} | links:
        assert (REPO / path).exists(), path
    for path, commit in {(path, commit) for path, commit in named if commit}:
        if subprocess.run(["git", "cat-file", "-e", f"{commit}^{{commit}}"], cwd=REPO, capture_output=True).returncode:
            pytest.skip(f"this checkout does not hold commit {commit} (a shallow clone?)")
        found = subprocess.run(["git", "cat-file", "-e", f"{commit}:{path}"], cwd=REPO, capture_output=True)
        assert found.returncode == 0, f"{path} at {commit}"


RESULTS = (REPO / "docs" / "results.md").read_text(encoding="utf-8")
# A figure: digits with a decimal part (46.01, 0.87, 1,034.5), as the README's prose and tables quote
# results; code (indented blocks, `inline`) and a version (Python 3.10) are not results.
FIGURE = re.compile(r"(?<![\w.`/=])[+-]?(\d[\d,]*\.\d+)(?![\d.])")


def readme_figures(text: str) -> set[str]:
    prose = [re.sub(r"`[^`]*`|Python \d+\.\d+", " ", line) for line in text.splitlines() if not line.startswith("    ")]
    return {match.group(1) for match in FIGURE.finditer("\n".join(prose))}


def test_every_figure_the_readme_quotes_is_the_results_pages():
    """A figure in the README comes from docs/results.md, where its command is: a stale one (the
    page re-measured, the README not) fails here."""
    figures = readme_figures(README)
    assert len(figures) > 50  # (the README's results, read)
    assert sorted(f for f in figures if f not in RESULTS) == []
    assert readme_figures("BLEU 47.27 against 96.25, `1.5` and Python 3.10:\n    nmt 9.99") == {"47.27", "96.25"}
