"""Every door a text goes through, on a probe of the text people write, as one JSON file: two
versions of nmt that must translate alike are run on the same run and their files compared.

    python scripts/tools/text_probe.py RUN --out new.json
    PYTHONPATH=../old python scripts/tools/text_probe.py RUN --out old.json && cmp old.json new.json

It reads nmt only through what a user reaches (`nmt.load`, the `nmt` command, the server's app), so
the same file runs against any version that has them. The probe holds paragraphs, a long sentence,
capitals and Title Case, links, e-mail addresses, emoji, paths, code, numbers (`30 000`, `3.5`,
`7:45`), markup, glossary terms, a prefix and n-best lists; scores are rounded to 4 decimals.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import tempfile
from pathlib import Path

PROBE = [
    "Go.",
    "I am cold.",
    "Some text. Another one.",
    "He left early. She stayed until the end!\n\nThe next day, nobody spoke about it. Why?",
    "I AM VERY COLD TODAY.",
    "Where Is The Train Station?",
    "The meeting, which was planned for Monday, has been moved to Thursday because the manager, who is "
    "travelling, cannot come back before then, and the team, which is tired, agreed to it without a word.",
    "Visit https://example.com/page?id=3 for the details.",
    "Write to anna.smith@example.org before 7:45 tomorrow.",
    "I paid 30 000 euros, that is 3.5 times more than in 2019.",
    "The file is in ~/notes/todo.txt and /usr/local/bin/run.sh.",
    "Run `pip install nmt` then call @support on #help 😀.",
    "I love Tokyo (東京) in the spring 🌸.",
    "She has 2 cats, 3 dogs and 12 birds.",
    "",
]
MARKED = ["Click <b>Save</b> to keep the file.", "I <i>really</i> like <b>green tea</b>."]
GLOSSARY = {"cold": "rhume", "train station": "gare"}
PREFIXED = ("I am cold.", "Je")


def _rounded(value):
    return round(value, 4) if isinstance(value, float) else value


def api(run: str) -> dict:
    """`nmt.load(...)`: translate, the tokenized form, n-best with scores, a prefix, a glossary,
    word scores, given outputs scored and the attention."""
    import nmt

    model = nmt.load(run, device="cpu")
    texts = [t for t in PROBE if t]
    out = {"translate": model.translate(PROBE),
           "greedy": model.translate(PROBE, beam=1),
           "tokenized": model.translate(PROBE, tokenized=True),
           "nbest": [[(t.text, _rounded(t.score)) for t in hyps] for hyps in model.nbest(PROBE, n=3)],
           "prefix": model.translate(PREFIXED[0], prefix=PREFIXED[1]),
           "glossary": model.translate(PROBE, glossary=GLOSSARY),
           "glossary_greedy": model.translate(PROBE, beam=1, glossary=GLOSSARY)}
    best = model.translations(texts)
    out["word_scores"] = [[_rounded(s) for s in t.word_scores] for t in best]
    out["attention"] = [[_rounded(w) for w in row] for row in model.attention(texts[2]).weights.tolist()]
    out["scored"] = [_rounded(t.score) for t in model.score(texts, [t.text for t in best])]
    return out


def command(run: str, folder: Path) -> dict:
    """The `nmt` command: translate (--markup, --align, --nbest, --scores, a file) and eval."""
    from typer.testing import CliRunner

    from nmt.cli import app

    runner = CliRunner()
    one_line = [t for t in PROBE if t and "\n" not in t]  # (a file's line is a text)
    lines = folder / "probe.txt"
    lines.write_text("\n".join(one_line) + "\n", encoding="utf-8")
    refs = folder / "refs.txt"
    refs.write_text("\n".join("Je ne sais pas." for _ in one_line) + "\n", encoding="utf-8")
    terms = folder / "terms.tsv"
    terms.write_text("".join(f"{s}\t{t}\n" for s, t in GLOSSARY.items()), encoding="utf-8")

    def run_nmt(*args: str) -> str:
        result = runner.invoke(app, [*args, "-c", run, "--device", "cpu"])
        timed = ("sentences/s)", "sent/s)")  # (the speed and the folder differ between runs)
        shown = [line.replace(str(folder), "PROBE") for line in result.output.splitlines()
                 if not line.endswith(timed) and "sent/s);" not in line and ", ETA " not in line]  # (a slow run's meter)
        return "\n".join([f"exit {result.exit_code}", *shown])

    return {"markup": run_nmt("translate", "--markup", *MARKED),
            "align_scores": run_nmt("translate", "--align", "--scores", "--input", str(lines)),
            "nbest": run_nmt("translate", "--nbest", "2", "--input", str(lines)),
            "glossary_file": run_nmt("translate", "--glossary", str(terms), "--input", str(lines)),
            "eval": run_nmt("eval", "--bleu", "--src", str(lines), "--ref", str(refs))}


def server(run: str) -> dict:
    """`nmt serve`'s app: texts with options, the attention, markup, OpenNMT-py's shape."""
    from fastapi.testclient import TestClient

    from nmt.inference.translator import Translator
    from nmt.model.checkpoint import load_model
    from nmt.serving.server import ServeSettings, create_app, server_info

    translator = Translator.load(run, "cpu")
    texts = [t for t in PROBE if t]
    asked = [{"texts": texts}, {"texts": texts[:4], "nbest": 2, "scores": True, "align": True},
             {"text": texts[2], "attention": True}, {"texts": MARKED}, {"texts": texts, "glossary": GLOSSARY},
             {"texts": texts[:2], "prefix": ["Je", ""]}]
    with TestClient(create_app(translator, ServeSettings(), server_info(load_model(run), "cpu"))) as client:
        out = [client.post("/translate", json=body).json() for body in asked]
        out.append(client.post("/translator/translate", json=[{"src": t, "id": 100} for t in texts[:3]]).json())
    return json.loads(json.dumps(out), parse_float=lambda s: round(float(s), 4))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    os.environ.setdefault("NMT_CACHE_DIR", tempfile.mkdtemp())
    with tempfile.TemporaryDirectory() as folder, contextlib.redirect_stderr(io.StringIO()):
        outputs = {"api": api(args.run), "command": command(args.run, Path(folder)), "server": server(args.run)}
    Path(args.out).write_text(json.dumps(outputs, ensure_ascii=False, indent=1, sort_keys=True) + "\n",
                              encoding="utf-8")


if __name__ == "__main__":
    main()
