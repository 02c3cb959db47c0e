"""The three commands end to end on the toy corpus, and every bad input the CLI must survive."""

import json
import os
import re
import subprocess
import sys

import pytest
import torch
import yaml
from conftest import TINY
from typer.testing import CliRunner

from nmt.cli import app

runner = CliRunner()


def invoke(*args, input=None):
    return runner.invoke(app, [str(a) for a in args], input=input)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """One tiny model trained through the CLI, shared by the tests that only read it."""
    from conftest import train_toy_model
    return train_toy_model(tmp_path_factory.mktemp("cli"), epochs=8)


def assert_one_line_error(result, *fragments):
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    errors = [line for line in result.output.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, result.output
    for fragment in fragments:
        assert fragment in errors[0], errors[0]


def test_help_lists_the_commands():
    result = invoke("--help")
    assert result.exit_code == 0
    for command in ("train", "translate", "eval"):
        assert command in result.output


def test_train_writes_the_run_directory(trained):
    run = trained["run"]
    for name in ("config.yaml", "src_vocab.txt", "tgt_vocab.txt", "metrics.jsonl", "last.pt", "best.pt", "train.log"):
        assert (run / name).is_file(), name
    assert "validation at step" in (run / "train.log").read_text()
    assert yaml.safe_load((run / "config.yaml").read_text())["train"]["epochs"] == 8


def test_translate_arguments_file_and_stdin(trained, tmp_path):
    result = invoke("translate", "I see a cat.", "We like green tea.", "-c", trained["run"])
    assert result.exit_code == 0, result.output
    assert len(result.stdout.splitlines()) == 2
    lines = ["I see a cat.", "", "Zebras juggle quietly.", "   ", "He has the car."]
    path = tmp_path / "in.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    from_file = invoke("translate", "--input", path, "-c", trained["run"])
    assert from_file.exit_code == 0, from_file.output
    out = from_file.stdout.split("\n")[:-1]
    assert len(out) == len(lines)  # one output line per input line, empty ones kept empty
    assert out[1] == "" and out[3] == "" and out[0] and out[2] and out[4]
    from_stdin = invoke("translate", "-i", "-", "-c", trained["run"], input="\n".join(lines) + "\n")
    assert from_stdin.stdout == from_file.stdout
    # A file's translation (back-translating one takes a while) ends with its speed, on stderr.
    assert re.search(r"translated 5 sentences in [\d.]+ s \([\d.,]+ sentences/s\)", from_file.stderr), from_file.stderr


def test_tiny_model_learned_the_toy_language(trained):
    result = invoke("translate", "I see a cat.", "She have the house.", "-c", trained["run"])
    assert result.stdout.splitlines() == ["Je vois un chat.", "Elle ai la maison."]
    tokenized = invoke("translate", "I see a cat.", "She have the house .", "-c", trained["run"], "--tokenized")
    assert tokenized.stdout.splitlines() == ["je vois un chat .", "elle ai la maison ."]


def test_eval_bleu_prints_scores_and_writes_hypotheses(trained):
    result = invoke("eval", "--bleu", "-c", trained["run"], "--data", trained["corpus"])
    assert result.exit_code == 0, result.output
    bleu_line = next(line for line in result.stdout.splitlines() if line.startswith("beam 5: BLEU"))
    assert "chrF" in bleu_line and "nrefs:" in bleu_line and "tok:13a" in bleu_line
    assert float(bleu_line.split()[3]) > 50  # the toy language is easy to learn exactly
    hyps = (trained["run"] / "hyps.test.beam5.txt").read_text().splitlines()
    assert hyps and all(hyps)
    plain = invoke("eval", "-c", trained["run"], "--data", trained["corpus"])
    assert "ppl" in plain.stdout and "BLEU" not in plain.stdout


def test_eval_with_a_glossary_counts_the_terms_used_and_keeps_its_own_hypotheses(trained, tmp_path):
    terms = tmp_path / "terms.tsv"
    # every toy noun becomes "maison": a test source holding one must say maison
    terms.write_text("".join(f"{noun}\tmaison\n" for noun in ("cat", "dog", "bird", "car", "tea", "apples")),
                     encoding="utf-8")
    result = invoke("eval", "--bleu", "-c", trained["run"], "--data", trained["corpus"], "--glossary", terms)
    assert result.exit_code == 0, result.output
    used = next(line for line in result.stdout.splitlines() if line.startswith("glossary terms used:"))
    asked, of = re.match(r"glossary terms used: (\d+) of (\d+) matched", used).groups()
    assert asked == of and int(of) > 0, used
    assert "glossary of 6 terms" in result.stdout
    assert (trained["run"] / "hyps.test.beam5.glossary.txt").is_file()


def test_newest_run_is_the_default_checkpoint(trained, tmp_path):
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "only").symlink_to(trained["run"], target_is_directory=True)
    result = invoke("translate", "I see a cat.")
    assert result.exit_code == 0, result.output
    assert result.stdout.strip()


def test_bad_config_is_one_line_naming_key_and_file(tmp_path):
    config = tmp_path / "bad.yaml"
    config.write_text(yaml.safe_dump({**TINY, "model": {**TINY["model"], "hiden_size": 3}}))
    result = invoke("train", config)
    assert_one_line_error(result, "hiden_size", str(config))
    assert not (tmp_path / "runs").exists()
    bad_set = invoke("train", tmp_path / "missing.yaml")
    assert_one_line_error(bad_set, "config file not found")


def test_existing_run_directory_is_never_overwritten(trained, tmp_path):
    before = (trained["run"] / "best.pt").read_bytes()
    result = invoke("train", trained["config"], "--out", trained["run"], "--data", trained["corpus"])
    assert_one_line_error(result, "already exists")
    assert (trained["run"] / "best.pt").read_bytes() == before


def test_missing_corpus_says_where_it_looked(tiny_config):
    result = invoke("train", tiny_config, "--set", "data.url=http://127.0.0.1:9/fra-eng.zip", "--quiet")
    assert_one_line_error(result, "--data", "$NMT_CORPUS", "data/fra-eng.zip")


def test_missing_checkpoint_says_train_first(tmp_path):
    assert_one_line_error(invoke("translate", "Go ."), "train first")
    assert_one_line_error(invoke("translate", "Go .", "-c", tmp_path / "nope.pt"), "train first")
    assert_one_line_error(invoke("eval", "--bleu", "-c", tmp_path), "train first")


def test_bad_translate_inputs(trained, tmp_path):
    assert_one_line_error(invoke("translate", "", "-c", trained["run"]), "empty")
    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes("I see a cat.\nCafé.\n".encode("latin-1"))
    assert_one_line_error(invoke("translate", "-i", latin1, "-c", trained["run"]), "line 2", "UTF-8")
    assert_one_line_error(invoke("translate", "-i", tmp_path / "none.txt", "-c", trained["run"]), "cannot read")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message shown when CUDA is absent")
def test_cuda_requested_without_cuda(trained, tmp_path):
    assert_one_line_error(invoke("translate", "Go .", "-c", trained["run"], "--device", "cuda"),
                          "no CUDA device", "--device cpu")
    run = tmp_path / "run"
    assert_one_line_error(invoke("train", trained["config"], "--out", run, "--data", trained["corpus"],
                                 "--device", "cuda"), "no CUDA device", "--device cpu")
    assert not run.exists()  # refused before anything was written


def test_corrupt_and_truncated_checkpoints(trained, tmp_path):
    truncated = tmp_path / "truncated.pt"
    truncated.write_bytes((trained["run"] / "best.pt").read_bytes()[:5000])
    assert_one_line_error(invoke("translate", "Go .", "-c", truncated), "corrupt or truncated")
    garbage = tmp_path / "garbage.pt"
    garbage.write_bytes(b"not a checkpoint at all")
    assert_one_line_error(invoke("translate", "Go .", "-c", garbage), str(garbage))


class _Exploit:
    def __reduce__(self):
        return (os.system, (f"touch {os.getcwd()}/pwned",))


def test_checkpoint_that_runs_code_is_refused(tmp_path):
    evil = tmp_path / "evil.pt"
    torch.save({"model": _Exploit(), "config": {}, "src_vocab": [], "tgt_vocab": []}, evil)
    result = invoke("translate", "Go .", "-c", evil)
    assert_one_line_error(result, "refused")
    assert not (tmp_path / "pwned").exists()
    torch.load(evil, weights_only=False)  # the file really is an exploit when loaded unsafely
    assert (tmp_path / "pwned").exists()


def test_checkpoint_that_does_not_fit_its_config(trained, tmp_path):
    state = torch.load(trained["run"] / "best.pt", weights_only=True)
    state["config"]["model"]["hidden_size"] = 40
    bad = tmp_path / "mismatch.pt"
    torch.save(state, bad)
    assert_one_line_error(invoke("translate", "Go .", "-c", bad), "do not fit")


def test_quiet_training_prints_no_progress(tmp_path, toy_zip, tiny_config):
    result = invoke("train", tiny_config, "--data", toy_zip, "--out", tmp_path / "q", "--quiet",
                    "--set", "train.epochs=1")
    assert result.exit_code == 0, result.output
    assert result.output == ""
    assert "validation at step" in (tmp_path / "q" / "train.log").read_text()


def test_training_into_a_file_writes_plain_lines_one_per_log_every(tmp_path, toy_zip, tiny_config):
    log = tmp_path / "log"
    with open(log, "w") as out:  # as `nmt train ... > log 2>&1`
        done = _nmt_process(["train", tiny_config, "--data", toy_zip, "--out", tmp_path / "run", "--set",
                             "train.epochs=1"], stdout=out, stderr=subprocess.STDOUT).wait(timeout=300)
    text = log.read_text()
    assert done == 0, text
    assert "\r" not in text  # no progress-bar redraws
    steps = json.loads((tmp_path / "run" / "metrics.jsonl").read_text().splitlines()[-1])["step"]
    step_line = re.compile(r"step \d+ \| epoch 1 \| loss [\d.]+ .* tok/s \| [\d:]+ elapsed, ETA [\d:]+$")
    lines = [x for x in text.splitlines() if step_line.search(x)]
    assert len(lines) == steps // TINY["train"]["log_every"] > 1, text


def test_beam_search_is_the_default_and_beam_1_is_exactly_greedy(trained):
    from nmt.inference.decoding.constraints import NO_RULES
    from nmt.inference.decoding.search import Sources
    from helpers.searches import greedy
    from nmt.inference.text.road import output_cap, source_ids
    from nmt.inference.translator import Translator

    sentences = ["I see a cat.", "He has the car.", "You like the small bird again."]
    translator = Translator.load(str(trained["run"]), "cpu")
    assert translator.cfg.beam_size == 5  # the run's config sets no decode.beam_size
    default = invoke("translate", *sentences, "-c", trained["run"])
    assert default.stdout == invoke("translate", *sentences, "-c", trained["run"], "--beam", "5").stdout
    # --beam 1 is the greedy search itself, sentence by sentence.
    expected = []
    for sentence in sentences:
        ids = source_ids(translator.tokenizer.source_tokens([sentence])[0], translator.src_vocab,
                         translator.cfg.max_input_len)
        src, src_lens = torch.tensor([ids]), torch.tensor([len(ids)])
        cap = torch.tensor([output_cap(len(ids), NO_RULES, translator.cfg, 1)])
        (out,) = greedy(translator.model, Sources(src, src_lens, cap), translator.specials)
        expected.append(translator.tokenizer.target_text(translator.tgt_vocab.decode(out.tokens)))
    assert invoke("translate", *sentences, "-c", trained["run"], "--beam", "1").stdout.splitlines() == expected
    # Validation during training kept its own, fast search and said so.
    assert "(epoch 1, greedy)" in (trained["run"] / "train.log").read_text()
    records = [json.loads(x) for x in (trained["run"] / "metrics.jsonl").read_text().splitlines()]
    assert {r["val_search"] for r in records} == {"greedy"}


def test_beam_and_nbest(trained, tmp_path):
    nbest = invoke("translate", "-i", "-", "-c", trained["run"], "--beam", "4", "--nbest", "3",
                   input="I see a cat.\n\nHe has the car.\n")
    assert nbest.exit_code == 0, nbest.output
    rows = [line.split("\t") for line in nbest.stdout.splitlines()]
    assert [r[0] for r in rows] == ["0", "0", "0", "1", "2", "2", "2"]
    assert rows[3] == ["1", "", ""]
    scores = [float(r[1]) for r in rows[:3]]
    assert scores == sorted(scores, reverse=True) and len({r[2] for r in rows[:3]}) == 3
    assert invoke("translate", "Go .", "-c", trained["run"], "--beam", "0").exit_code == 2  # typer's range check
    ev = invoke("eval", "--bleu", "--beam", "3", "-c", trained["run"], "--data", trained["corpus"])
    assert ev.exit_code == 0 and "beam 3: BLEU" in ev.stdout
    assert (trained["run"] / "hyps.test.beam3.txt").is_file()


def test_attention_outputs(trained, tmp_path):
    pytest.importorskip("matplotlib")
    png = tmp_path / "attention.png"
    result = invoke("translate", "I see a cat.", "-c", trained["run"], "--plot", png, "--show-attention")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == "Je vois un chat."
    assert lines[1].split() == ["i", "see", "a", "cat", ".", "<eos>"]  # the table's header: source tokens
    assert [row.split()[0] for row in lines[2:]] == ["je", "vois", "un", "chat", ".", "<eos>"]
    for row in lines[2:]:
        assert sum(float(x) for x in row.split()[1:]) == pytest.approx(1.0, abs=0.03)
    assert png.read_bytes()[:4] == b"\x89PNG"
    two = invoke("translate", "Go .", "Hi .", "-c", trained["run"], "--plot", png)
    assert_one_line_error(two, "--plot takes exactly one sentence")


def test_training_draws_its_curves_and_plot_redraws_them(trained, tmp_path):
    pytest.importorskip("matplotlib")
    assert (trained["run"] / "curves.png").read_bytes()[:4] == b"\x89PNG"
    result = invoke("plot", trained["run"], "--out", tmp_path / "c.png")
    assert result.exit_code == 0 and (tmp_path / "c.png").is_file()
    records = [json.loads(x) for x in (trained["run"] / "metrics.jsonl").read_text().splitlines()]
    assert all("train_loss" in r for r in records)
    assert_one_line_error(invoke("plot", tmp_path), "no metrics.jsonl")


def _nmt_process(args, **kwargs):
    return subprocess.Popen([sys.executable, "-m", "nmt", *map(str, args)], **kwargs)


def test_pipe_is_answered_line_by_line(trained):
    import subprocess
    proc = _nmt_process(["translate", "-c", trained["run"]], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE, text=True, bufsize=1)
    try:
        proc.stdin.write("I see a cat.\n")
        proc.stdin.flush()
        assert proc.stdout.readline() == "Je vois un chat.\n"  # answered while stdin is still open
        proc.stdin.write("She have the house.\n")
        proc.stdin.flush()
        assert proc.stdout.readline() == "Elle ai la maison.\n"
    finally:
        proc.stdin.close()
        proc.wait(timeout=60)
    assert proc.returncode == 0


def test_every_mode_streams_a_piped_file_with_the_progress_line(trained):
    """--scores (like --align, --prefix and --nbest) goes through the one pipeline plain --input
    does: the first chunk is answered before the input ends, and the speed line comes at the end."""
    import subprocess
    proc = _nmt_process(["translate", "-c", trained["run"], "--scores", "--input", "-"], stdin=subprocess.PIPE,
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1)
    try:
        proc.stdin.write("I see a cat.\n" * 513)  # decode.batch_size 32: a chunk of 512, and one line more
        proc.stdin.flush()
        assert proc.stdout.readline().startswith("Je vois un chat.\t")  # while stdin is still open
    finally:
        proc.stdin.close()
    out, err = proc.stdout.read(), proc.stderr.read()
    assert proc.wait(timeout=120) == 0 and len(out.splitlines()) == 512
    assert all(line.count("\t") == 2 for line in out.splitlines()) and "translated 513 sentences" in err


def test_interactive_prompt_on_a_terminal(trained):
    import pty
    import select
    main_fd, child_fd = pty.openpty()
    proc = _nmt_process(["translate", "-c", trained["run"]], stdin=child_fd, stdout=child_fd, stderr=child_fd)
    os.close(child_fd)

    def read_until(marker: bytes, timeout=60.0) -> bytes:
        import time
        seen, deadline = b"", time.monotonic() + timeout
        while marker not in seen and time.monotonic() < deadline:
            if select.select([main_fd], [], [], 0.5)[0]:
                try:
                    seen += os.read(main_fd, 4096)
                except OSError:
                    break
        return seen

    try:
        assert b"en> " in read_until(b"en> ")
        os.write(main_fd, b"I see a cat.\n")
        assert b"Je vois un chat." in read_until(b"Je vois un chat.")
        read_until(b"en> ")
        os.write(main_fd, b"\n")  # an empty line ends the session
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(main_fd)


def test_file_input_is_streamed_in_chunks(trained, tmp_path, monkeypatch):
    from nmt.inference.translator import Translator
    seen = []
    original = Translator.run

    def spy(self, lines, *args, **kwargs):
        seen.append(len(lines))
        return original(self, lines, *args, **kwargs)

    monkeypatch.setattr(Translator, "run", spy)
    path = tmp_path / "many.txt"
    path.write_text("I see a cat.\n" * 1100, encoding="utf-8")
    result = invoke("translate", "-i", path, "-c", trained["run"])  # decode.batch_size 32: chunks of 512
    assert result.exit_code == 0
    assert result.stdout.splitlines() == ["Je vois un chat."] * 1100
    assert seen == [512, 512, 76]


def test_one_input_is_tokenized_and_glossary_matched_once_whatever_it_is_asked_for(trained, tmp_path, monkeypatch):
    """--align, --markup and a glossary read the sentence record the search read: its attention
    comes from the ids already made, not from tokenizing the text again."""
    from nmt.data.tokenizer import WordTokenizer
    from nmt.inference.text.glossary import Glossary
    tokenized, matched = [], []
    source_tokens, matches = WordTokenizer.source_tokens, Glossary.matches
    monkeypatch.setattr(WordTokenizer, "source_tokens", lambda self, texts: tokenized.extend(texts) or source_tokens(
        self, texts))
    monkeypatch.setattr(Glossary, "matches", lambda self, text: matched.append(text) or matches(self, text))
    terms = tmp_path / "terms.tsv"
    terms.write_text("cat\tmaison\n", encoding="utf-8")
    result = invoke("translate", "I see a <b>cat</b>. He has the car.", "-c", trained["run"], "--align", "--markup",
                    "--glossary", terms)
    assert result.exit_code == 0, result.output
    text, links = result.stdout.rstrip("\n").split("\t")  # the translation, then its alignment
    assert "maison" in text and text.count("<b>") == text.count("</b>") == 1 and re.fullmatch(r"(\d+-\d+ ?)+", links)
    assert sorted(tokenized) == ["He has the car.", "I see a cat."]  # each sentence once, tags out
    assert sorted(matched) == sorted(tokenized)
