import hashlib
import http.server
import threading
import zipfile

import pytest
from conftest import toy_lines, write_corpus_zip, seed_data

from nmt.data.corpus import download, load_splits, read_lines, resolve_corpus, split_of
from nmt.errors import DataError


def test_split_rule_pinned_values():
    # md5(key) % 100: 0 -> test, 1 -> test, 2 -> valid, anything else -> train
    assert split_of("sentence number 468 .") == "test"
    assert split_of("sentence number 57 .") == "test"
    assert split_of("sentence number 45 .") == "valid"
    assert split_of("go .") == "train"  # bucket 87


def test_all_translations_of_a_source_share_a_split(toy_zip):
    splits = load_splits(toy_zip)
    where = {}
    for name in ("train", "valid", "test"):
        for pair in getattr(splits, name):
            where.setdefault(" ".join(pair.src), set()).add(name)
    assert all(len(names) == 1 for names in where.values())
    assert len(splits.train) + len(splits.valid) + len(splits.test) == len(toy_lines())
    assert splits.test and splits.valid  # the toy corpus is large enough to fill every split


def test_zip_ignores_macosx_and_plain_text_reads_the_same(toy_zip, tmp_path):
    plain = tmp_path / "fra.txt"
    plain.write_text("\n".join(toy_lines()) + "\n", encoding="utf-8")
    assert read_lines(toy_zip) == read_lines(plain) == toy_lines()


def test_num_pairs_keeps_the_first_lines(toy_zip):
    splits = load_splits(toy_zip, num_pairs=40)
    assert len(splits.train) + len(splits.valid) + len(splits.test) == 40


def test_bad_lines_are_counted_and_skipped(tmp_path):
    path = tmp_path / "fra.txt"
    path.write_text("Go.\tVa !\nno tab here\n\tempty English\nEmpty French.\t\nHi.\tSalut.\n", encoding="utf-8")
    splits = load_splits(path)
    assert splits.skipped == 3
    assert len(splits.train) + len(splits.valid) + len(splits.test) == 2


def test_bad_corpus_files_give_clear_errors(tmp_path):
    corrupt = tmp_path / "bad.zip"
    corrupt.write_bytes(b"PK\x03\x04 this is not really a zip")
    with pytest.raises(DataError, match="not a valid zip"):
        read_lines(corrupt)
    empty_zip = tmp_path / "nofra.zip"
    with zipfile.ZipFile(empty_zip, "w") as z:  # a zip's one text file of pairs is read, whatever its name
        z.writestr("fra-eng/_about.txt", "x")
        z.writestr("fra-eng/notes.md", "x")
    with pytest.raises(DataError, match="holds no text file of sentence pairs"):
        read_lines(empty_zip)
    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes("Go.\tVa !\nCafé.\tCafé.\n".encode("latin-1"))
    with pytest.raises(DataError, match="line 2 is not valid UTF-8"):
        read_lines(latin1)
    no_pairs = tmp_path / "junk.txt"
    no_pairs.write_text("no tabs\nat all\n", encoding="utf-8")
    with pytest.raises(DataError, match="no usable"):
        load_splits(no_pairs)


def test_resolution_order(tmp_path, monkeypatch):
    files = {name: write_corpus_zip(tmp_path / f"{name}.zip", toy_lines()[:5])
             for name in ("cli", "config", "env", "cache")}
    monkeypatch.setenv("NMT_CORPUS", str(files["env"]))
    cfg = seed_data(path=str(files["config"]))
    assert resolve_corpus(str(files["cli"]), cfg, cache=files["cache"]) == files["cli"]
    assert resolve_corpus(None, cfg, cache=files["cache"]) == files["config"]
    assert resolve_corpus(None, seed_data(), cache=files["cache"]) == files["env"]
    monkeypatch.delenv("NMT_CORPUS")
    assert resolve_corpus(None, seed_data(), cache=files["cache"]) == files["cache"]
    with pytest.raises(DataError, match="from --data"):
        resolve_corpus(str(tmp_path / "missing.zip"), cfg, cache=files["cache"])


class _Server:
    """Serves one file on a loopback port, as the corpus host would."""

    def __init__(self, payload: bytes):
        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                if self.path != "/fra-eng.zip":
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args):
                pass

        self.httpd = http.server.HTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_port}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def test_download_into_cache_with_checksum(toy_zip, tmp_path):
    payload = toy_zip.read_bytes()
    server = _Server(payload)
    try:
        cache = tmp_path / "data" / "fra-eng.zip"
        cfg = seed_data(url=f"{server.url}/fra-eng.zip", sha1=hashlib.sha1(payload).hexdigest())
        assert resolve_corpus(None, cfg, cache=cache) == cache
        assert cache.read_bytes() == payload
        assert len(read_lines(cache)) == len(toy_lines())

        bad_sum = tmp_path / "other" / "fra-eng.zip"
        with pytest.raises(DataError, match="checksum mismatch"):
            download(f"{server.url}/fra-eng.zip", bad_sum, "0" * 40)
        assert not bad_sum.exists() and not list(bad_sum.parent.glob("*.part"))

        missing = seed_data(url=f"{server.url}/nothing-here.zip")
        with pytest.raises(DataError, match=r"Looked for the corpus in --data, data.path, \$NMT_CORPUS"):
            resolve_corpus(None, missing, cache=tmp_path / "third" / "fra-eng.zip")
    finally:
        server.close()


def test_real_corpus_split_sizes_and_no_test_leak(real_corpus):
    splits = load_splits(real_corpus)
    assert (len(splits.train), len(splits.valid), len(splits.test)) == (162_252, 1_753, 3_125)
    assert splits.skipped == 0
    seen = {tuple(p.src) for p in splits.train} | {tuple(p.src) for p in splits.valid}
    assert not any(tuple(p.src) in seen for p in splits.test)
