"""`nmt serve`: the app through FastAPI's test client (every endpoint, every kind of bad input,
batching, the queue bound) and a real server process (start, translate, SIGTERM)."""

import dataclasses
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch

pytest.importorskip("fastapi")
pytest.importorskip("httpx")
import httpx  # noqa: E402
from conftest import REPO, train_toy_model  # noqa: E402
from fastapi.testclient import TestClient  # noqa: E402

from nmt.inference.text.glossary import Glossary, holds  # noqa: E402
from nmt.inference.translator import Translator  # noqa: E402
from nmt.model.checkpoint import load_model  # noqa: E402
from nmt.serving.server import BatchingQueue, Options, ServeSettings, create_app, server_info  # noqa: E402

SENTENCES = ["I see a cat.", "She has the house.", "We like green tea again.", "You want the small bird today.",
             "He sees a dog.", "I like red apples."]


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    return train_toy_model(tmp_path_factory.mktemp("serve"), epochs=4)["run"]


@pytest.fixture(scope="module")
def translator(run) -> Translator:
    device = torch.device("cpu")
    return Translator.from_loaded(load_model(run, device), device)


def make_client(translator, run, **settings) -> TestClient:
    info = server_info(load_model(run), "cpu")
    return TestClient(create_app(translator, ServeSettings(**settings), info))


@pytest.fixture(scope="module")
def client(translator, run):
    with make_client(translator, run, max_texts=8, max_chars=200, max_body_bytes=4096) as c:
        yield c


def test_health_names_the_run(client, run):
    health = client.get("/health").json()
    assert health["status"] == "ok" and health["run"] == str(run) and health["device"] == "cpu"
    assert health["step"] > 0 and health["val_bleu"] is not None and health["uptime_s"] >= 0
    assert (health["source_lang"], health["target_lang"]) == ("en", "fr")  # the page's heading


def test_translate_gives_what_nmt_translate_gives(client, translator):
    one = client.post("/translate", json={"text": SENTENCES[0]})
    assert one.status_code == 200, one.text
    assert one.json()["translations"][0]["tgt"] == translator.translate([SENTENCES[0]])[0]
    many = client.post("/translate", json={"texts": SENTENCES, "beam": 3}).json()["translations"]
    assert [t["tgt"] for t in many] == translator.translate(SENTENCES, beam=3)
    assert [t["src"] for t in many] == SENTENCES and all(isinstance(t["score"], float) for t in many)


def test_nbest_and_attention(client, translator):
    body = client.post("/translate", json={"text": "I see a cat.", "beam": 4, "nbest": 3, "attention": True}).json()
    entry = body["translations"][0]
    assert len(entry["nbest"]) == 3 and entry["nbest"][0]["tgt"] == entry["tgt"]
    scores = [h["score"] for h in entry["nbest"]]
    assert scores == sorted(scores, reverse=True)
    att = entry["attention"]
    assert att["src_tokens"][-1] == "<eos>" and att["tgt_tokens"][-1] == "<eos>"
    assert len(att["weights"]) == len(att["tgt_tokens"])
    assert all(len(row) == len(att["src_tokens"]) and abs(sum(row) - 1) < 0.01 for row in att["weights"])
    # the run's search (beam 5): the same weights as `nmt translate --show-attention`
    default = client.post("/translate", json={"text": "I see a cat.", "attention": True}).json()
    assert default["beam"] == 5
    best = default["translations"][0]
    src_tokens, out_tokens, weights = translator.attention("I see a cat.")
    assert best["attention"]["tgt_tokens"] == out_tokens
    assert torch.allclose(torch.tensor(best["attention"]["weights"]), weights, atol=1e-3)


def test_scores_alignments_and_prefixes(client, translator):
    body = client.post("/translate", json={"texts": SENTENCES[:2], "scores": True, "align": True}).json()
    for entry, t in zip(body["translations"], translator.translations(SENTENCES[:2])):
        assert entry["words"] == t.words and entry["word_scores"] == [round(s, 4) for s in t.word_scores]
        assert entry["mean_score"] == round(t.mean_score, 4)
        assert len(entry["alignment"].split()) == len(entry["src_words"]) > 0  # each source word once
        assert "attention" not in entry  # align alone does not send the matrix
    # one request, one text with a prefix and one without: they share the batch
    mixed = client.post("/translate", json={"texts": SENTENCES[:2], "prefix": ["nous", ""]}).json()["translations"]
    assert [m["tgt"] for m in mixed] == [translator.translate(SENTENCES[0], prefix="nous"),
                                        translator.translate(SENTENCES[1])]
    assert mixed[0]["tgt"].lower().startswith("nous")


def test_glossaries_per_request_and_for_the_whole_server(client, translator, run):
    plain = client.post("/translate", json={"texts": SENTENCES[:2]}).json()["translations"]
    asked = client.post("/translate", json={"texts": SENTENCES[:2], "glossary": {"cat": "maison"}}).json()
    assert "maison" not in plain[0]["tgt"] and holds(asked["translations"][0]["tgt"], "maison")
    assert asked["translations"][0]["tgt"] == translator.translate(SENTENCES[0], glossary={"cat": "maison"})
    assert asked["translations"][1]["tgt"] == plain[1]["tgt"]  # no term of its own: as without
    bad = client.post("/translate", json={"text": SENTENCES[0], "glossary": {"cat": " "}})
    assert bad.status_code == 422 and bad.json()["error"].startswith("glossary:"), bad.text
    with make_client(translator, run, glossary=Glossary.parse(["cat\tmaison"])) as served:
        served_term = served.post("/translate", json={"text": SENTENCES[0]}).json()["translations"][0]["tgt"]
        assert holds(served_term, "maison")
        own = served.post("/translate", json={"text": SENTENCES[0], "glossary": {"cat": "voiture"}}).json()
        assert holds(own["translations"][0]["tgt"], "voiture")  # the request's term for a source wins
        onmt = served.post("/translator/translate", json=[{"src": SENTENCES[0], "id": 1}]).json()
        assert holds(onmt[0][0]["tgt"], "maison")


def test_markup_is_kept_per_request_and_malformed_markup_is_a_422(client, translator):
    text = "I see a <b>cat</b>."
    asked = client.post("/translate", json={"texts": [text, SENTENCES[1]]}).json()["translations"]
    assert asked[0]["src"] == text and asked[0]["tgt"] == translator.translate(text, markup=True)  # the CLI's road
    assert asked[0]["tgt"].count("<b>") == asked[0]["tgt"].count("</b>") == 1, asked[0]
    assert asked[1]["tgt"] == translator.translate(SENTENCES[1])  # no markup in it: as without
    as_text = client.post("/translate", json={"text": text, "markup": False}).json()["translations"][0]
    assert as_text["tgt"] == translator.translate(text)
    bad = client.post("/translate", json={"texts": [SENTENCES[0], "a <b>cat"], "markup": True})
    assert bad.status_code == 422 and bad.json()["error"] == "markup: text 2: '<b>' is never closed: close it with </b>"


def test_opennmt_py_clients_work_unchanged(client, translator):
    # The exact shape an OpenNMT-py REST client sends, and the shape it reads back.
    response = client.post("/translator/translate", content=json.dumps([{"src": "I see a cat.", "id": 100}]),
                           headers={"Content-Type": "application/json"})
    assert response.status_code == 200, response.text
    out = response.json()
    assert isinstance(out, list) and len(out) == 1 and len(out[0]) == 1
    assert set(out[0][0]) == {"src", "tgt", "n_best", "pred_score"}
    assert out[0][0]["src"] == "I see a cat." and out[0][0]["tgt"] == translator.translate(["I see a cat."])[0]
    assert client.get("/translator/models").json()[0]["model_id"] == 100


BAD = [
    ("malformed JSON", b'{"text": "Go.",', "malformed JSON"),
    ("wrong type", b'{"text": 5}', "text"),
    ("wrong type in list", b'{"texts": ["Go.", 7]}', "texts.1"),
    ("missing text", b'{"beam": 2}', '"text"'),
    ("both text and texts", b'{"text": "Go.", "texts": ["Hi."]}', "one of the two"),
    ("unknown key", b'{"txt": "Go."}', "txt"),
    ("empty list", b'{"texts": []}', "empty"),
    ("empty text", b'{"text": "   "}', "empty"),
    ("text over the length limit", json.dumps({"text": "a" * 201}).encode(), "limit is 200"),
    ("too many texts", json.dumps({"texts": ["Go."] * 9}).encode(), "limit is 8"),
    ("beam out of range", b'{"text": "Go.", "beam": 0}', "beam"),
    ("beam too large", b'{"text": "Go.", "beam": 99}', "beam"),
    ("nbest out of range", b'{"text": "Go.", "nbest": 11}', "nbest"),
    ("body over the size limit", json.dumps({"texts": ["x" * 150] * 40}).encode(), "bytes"),
    ("bytes that are not UTF-8", b'{"text": "Caf\xe9"}', "UTF-8"),
    ("not an object", b'["Go."]', "TranslateRequest"),
    ("a prefix for some texts", b'{"texts": ["Go.", "Hi."], "prefix": ["Va"]}', "1 prefixes for 2 texts"),
    ("a prefix that is no string", b'{"text": "Go.", "prefix": 3}', "prefix"),
]


@pytest.mark.parametrize("name, body, fragment", BAD, ids=[b[0] for b in BAD])
def test_bad_input_is_a_4xx_with_a_reason_and_the_server_lives_on(client, name, body, fragment):
    response = client.post("/translate", content=body, headers={"Content-Type": "application/json"})
    assert 400 <= response.status_code < 500, (name, response.status_code, response.text)
    error = response.json()["error"]
    assert isinstance(error, str) and fragment in error, (name, error)
    assert client.post("/translate", json={"text": "Go."}).status_code == 200


def test_bad_opennmt_input_and_unknown_routes(client):
    for body in (b'{"src": "Go."}', b'[{"id": 100}]', b'[{"src": 3}]', b"[]"):
        response = client.post("/translator/translate", content=body)
        assert response.status_code == 422 and response.json()["error"], body
    missing = client.get("/nope")
    assert missing.status_code == 404 and missing.json() == {"error": "Not Found"}
    assert client.get("/translate").status_code == 405


def test_openapi_page_documents_the_api(client):
    spec = client.get("/openapi.json").json()
    assert {"/translate", "/translator/translate", "/health"} <= set(spec["paths"])
    schema = spec["paths"]["/translate"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert {"text", "texts", "beam", "nbest", "attention"} <= set(schema["properties"])
    assert client.get("/docs").status_code == 200


def test_the_page_is_one_self_contained_file(client):
    page = client.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "<script" in page.text and "/translate" in page.text
    assert "http://" not in page.text and "https://" not in page.text  # no CDN: works offline


def test_queue_batches_concurrent_jobs_and_each_gets_its_own(translator):
    queue = BatchingQueue(translator, max_batch=64, max_wait_s=0.2, max_pending=100)
    try:
        futures = [queue.submit([s], Options(1, 1)) for s in SENTENCES]
        futures.append(queue.submit(SENTENCES[:2], Options(1, 1)))
        results = [f.result(timeout=30) for f in futures]
    finally:
        queue.close()
    assert queue.batches == 1  # all seven jobs arrived within the wait: one decoder call
    expected = translator.translate(SENTENCES, beam=1)  # the jobs asked for greedy search
    assert [r[0].translations[0].text for r in results[:-1]] == expected
    assert [r.translations[0].text for r in results[-1]] == expected[:2]


def test_a_lone_caller_does_not_wait_for_company(translator):
    queue = BatchingQueue(translator, max_batch=64, max_wait_s=3.0, max_pending=100)
    try:
        queue.submit([SENTENCES[0]], Options(1, 1)).result(timeout=30)  # waits: company may come
        start = time.monotonic()
        queue.submit([SENTENCES[1]], Options(1, 1)).result(timeout=30)
        alone = time.monotonic() - start
    finally:
        queue.close()
    assert alone < 2.0  # its last batch held one request: decoded at once, not after 3 s


def test_a_caller_answered_may_ask_again_at_once(translator):
    """The queue frees a batch's places before its callers hear back: one who asks again the
    moment the answer arrives (here, in the future's callback) is not refused as busy."""
    queue = BatchingQueue(translator, max_batch=64, max_wait_s=0.0, max_pending=2)
    seen = []
    future = queue.submit(SENTENCES[:2], Options(beam=1, n=1))
    future.add_done_callback(lambda _: seen.append(queue.pending))
    future.result(timeout=60)
    queue.close()
    assert seen == [0]


def test_full_queue_answers_503_with_retry_after(translator, run, monkeypatch):
    gate, entered = threading.Event(), threading.Event()
    original = Translator.run

    def held(self, *args, **kwargs):
        entered.set()
        gate.wait(timeout=30)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Translator, "run", held)
    with make_client(translator, run, queue_size=2, max_wait_ms=0) as c:
        first = threading.Thread(target=lambda: c.post("/translate", json={"texts": SENTENCES[:2]}))
        first.start()
        assert entered.wait(timeout=30)  # the worker holds two texts: the queue is full
        refused = c.post("/translate", json={"text": "Go."})
        gate.set()
        first.join(timeout=30)
        assert refused.status_code == 503 and refused.headers["retry-after"] == "1"
        assert "busy" in refused.json()["error"]
        assert c.post("/translate", json={"text": "Go."}).status_code == 200


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(run: Path, port: int, *extra: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen([sys.executable, "-m", "nmt", "serve", "-c", str(run), "--port", str(port), *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def wait_for_health(url: str, proc: subprocess.Popen, timeout: float = 60) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"the server exited: {proc.communicate()}")
        try:
            return httpx.get(f"{url}/health", timeout=2).json()
        except httpx.TransportError:
            time.sleep(0.2)
    raise AssertionError("the server never answered /health")


def test_real_server_translates_and_stops_cleanly_on_sigterm(run, translator):
    port = free_port()
    proc = start_server(run, port)
    try:
        url = f"http://127.0.0.1:{port}"
        assert wait_for_health(url, proc)["status"] == "ok"
        response = httpx.post(f"{url}/translate", json={"texts": SENTENCES[:2]}, timeout=30)
        assert [t["tgt"] for t in response.json()["translations"]] == translator.translate(SENTENCES[:2])
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, stderr
    assert "Traceback" not in stderr


def test_port_in_use_is_one_line(run):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        proc = start_server(run, taken.getsockname()[1])
        _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 1 and "Traceback" not in stderr
    errors = [line for line in stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "cannot listen" in errors[0] and "--port" in errors[0], stderr


def chromium_path() -> str:
    path = os.environ.get("NMT_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if not path:
        pytest.skip("no Chromium installed (Debian: apt-get install chromium; or set NMT_CHROMIUM)")
    return path


def test_the_page_in_a_real_browser(run, translator, tmp_path):
    """Chromium types into the page, reads the French and the drawn heatmap, light and dark, at
    desktop and phone width. NMT_SERVE_CHECKPOINT serves another run (the README's screenshots)
    and NMT_SCREENSHOTS keeps the pictures in that folder."""
    playwright = pytest.importorskip("playwright.sync_api")
    executable = chromium_path()
    checkpoint = Path(os.environ.get("NMT_SERVE_CHECKPOINT") or run)
    sentence = os.environ.get("NMT_SERVE_SENTENCE", "Go.")
    keep = Path(os.environ.get("NMT_SCREENSHOTS") or tmp_path)
    keep.mkdir(parents=True, exist_ok=True)
    port = free_port()
    proc = start_server(checkpoint, port)
    try:
        url = f"http://127.0.0.1:{port}/"
        wait_for_health(url.rstrip("/"), proc)
        with playwright.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=executable, args=["--no-sandbox"])
            for name, viewport, scheme in (("serve-page.png", {"width": 1100, "height": 900}, "light"),
                                           ("serve-page-phone-dark.png", {"width": 390, "height": 844}, "dark")):
                page = browser.new_page(viewport=viewport, color_scheme=scheme)
                page.goto(url)
                page.wait_for_function("document.querySelector('#beam').options.length > 0")
                page.fill("#source", sentence)
                page.wait_for_function("document.querySelector('#output').textContent.trim() !== '' && "
                                       "!document.querySelector('#output').classList.contains('pending')",
                                       timeout=30_000)
                output = page.text_content("#output")
                assert output and output.strip(), output
                rows = page.eval_on_selector_all("#heatmap .tgt", "els => els.length")
                cols = page.eval_on_selector_all("#heatmap .src", "els => els.length")
                cells = page.eval_on_selector_all("#heatmap .cell", "els => els.length")
                assert rows > 0 and cols > 0 and cells == rows * cols
                page.hover("#heatmap .cell")
                assert "←" in page.text_content("#hover")
                page.screenshot(path=str(keep / name), full_page=True)
                assert (keep / name).stat().st_size > 10_000
                page.close()
            if checkpoint == run:  # the page shows what `nmt translate` prints
                page = browser.new_page()
                page.goto(url)
                page.fill("#source", "I see a cat.")
                page.wait_for_function("expected => document.querySelector('#output').textContent === expected",
                                       arg=translator.translate(["I see a cat."])[0], timeout=30_000)
                # each word shaded by its score
                best = translator.translations(["I see a cat."])[0]
                assert page.eval_on_selector_all("#output .word", "els => els.map(e => e.textContent)") == best.words
                shades = page.eval_on_selector_all("#output .word",
                                                   "els => els.map(e => e.style.getPropertyValue('--d'))")
                assert all(0 <= float(d) <= 1 for d in shades), shades
                # hovering an output word marks the source words `align` links to it (each source word has one)
                links = translator.attention("I see a cat.", best.tokens).alignment(best)
                linked = max(range(len(best.words)), key=lambda o: sum(t == o for _, t in links))
                page.hover(f"#output .word >> nth={linked}")
                assert page.eval_on_selector_all("#src-words .aligned", "els => els.map(e => Number(e.dataset.i))") \
                    == sorted(s for s, t in links if t == linked) != []
                # the user's own start is completed as they type; Tab takes the completion
                completed = translator.translate("I see a cat.", prefix="Nous")
                page.fill("#prefix", "Nous")
                page.wait_for_function("expected => document.querySelector('#completion').textContent === expected",
                                       arg=completed, timeout=30_000)
                assert page.text_content("#completion .ghost") == completed[len("Nous"):]
                page.focus("#prefix")
                page.keyboard.press("Tab")
                assert page.input_value("#prefix") == completed
            browser.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)
    assert proc.returncode == 0


def test_a_cut_is_said_in_the_answer(translator, run):
    """A text cut to decode.max_input_len (one with a prefix is translated whole) and an output cut at
    its length cap each come back with a `warnings` field: an HTTP client never sees the server's log."""
    cut = Translator(translator.model, translator.src_vocab, translator.tgt_vocab,
                     dataclasses.replace(translator.cfg, max_input_len=3), translator.device, translator.tokenizer)
    capped = Translator(translator.model, translator.src_vocab, translator.tgt_vocab,
                        dataclasses.replace(translator.cfg, max_output_ratio=0.01, max_output_extra=2),
                        translator.device, translator.tokenizer)
    with make_client(cut, run) as c:
        body = c.post("/translate", json={"texts": ["You want the small bird today.", "Go."], "prefix": "vous"}).json()
    first, second = body["translations"]
    assert first["warnings"] == ["the source was cut to decode.max_input_len=3 tokens"], first
    assert "warnings" not in second  # two tokens and <eos>: nothing was cut
    with make_client(capped, run) as c:
        (answer,) = c.post("/translate", json={"text": SENTENCES[0]}).json()["translations"]
    assert len(answer["tgt"].split()) <= 2 and any("length cap of 2 tokens" in w for w in answer["warnings"]), answer
    with make_client(translator, run) as c:
        assert "warnings" not in c.post("/translate", json={"text": SENTENCES[0]}).json()["translations"][0]
