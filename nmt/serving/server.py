"""`nmt serve`: a trained model behind a JSON API and a page, with concurrent requests batched
by `nmt.serving.request_queue.BatchingQueue`.

FastAPI (Starlette) and uvicorn do everything at the HTTP level; this module only parses
bodies within limits and turns every bad input into a 4xx with `{"error": "..."}`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import signal
import socket
import time
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse
from pydantic import BaseModel, ConfigDict, ValidationError
from starlette.exceptions import HTTPException

from nmt.errors import NmtError
from nmt.inference.engines import engine_device
from nmt.inference.text.glossary import Glossary
from nmt.inference.text.markup import Markup, MarkupError, read
from nmt.inference.text.words import pharaoh, words_of
from nmt.inference.translator import Translator, one_per_text
from nmt.model.checkpoint import LoadedModel, load_models
from nmt.serving.request_queue import BatchingQueue, Options, QueueFull, Result

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ServeSettings:
    """The server's limits; `nmt serve --help` lists them as flags."""
    beam: int | None = None  # beam size of a request that names none (None: the run's decode.beam_size)
    max_beam: int = 10  # largest beam (and n-best) a request may ask for; never below `beam`
    max_texts: int = 64  # texts in one request
    max_chars: int = 1000  # characters in one text
    max_body_bytes: int = 256 * 1024
    max_batch: int = 128  # sentences decoded together (decode.batch_size's default)
    max_wait_ms: float = 5.0  # how long the first request of a batch waits for company
    queue_size: int = 1024  # texts waiting; beyond it, 503 with Retry-After
    glossary: Glossary | None = None  # every request's (`nmt serve --glossary`); a request's own adds to it


class TranslateRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    text: str | None = None
    texts: list[str] | None = None
    beam: int | None = None
    nbest: int = 1
    attention: bool = False
    scores: bool = False
    align: bool = False
    prefix: str | list[str] | None = None
    glossary: dict[str, str] | None = None
    markup: bool | None = None  # inline tags kept (nmt.inference.text.markup); None: where a text reads as markup


class OpenNMTItem(BaseModel):  # OpenNMT-py's REST server takes a list of these
    model_config = ConfigDict(extra="allow", strict=True)
    src: str
    id: int | None = None


class ApiError(Exception):
    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status, self.message, self.headers = status, message, headers


def _first_error(error: ValidationError) -> str:
    detail = error.errors()[0]
    where = ".".join(str(part) for part in detail["loc"])
    return f"{where}: {detail['msg']}" if where else detail["msg"]


async def read_json(request: Request, limit: int) -> Any:
    """The body as JSON, read no further than `limit` bytes."""
    declared = request.headers.get("content-length", "")
    too_big = ApiError(413, f"the body is over {limit:,} bytes; send fewer or shorter texts")
    if declared.isdigit() and int(declared) > limit:
        raise too_big
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise too_big
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ApiError(400, f"the body is not valid UTF-8 (byte {e.start}); send JSON in UTF-8") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise ApiError(400, f"malformed JSON: {e.msg} at line {e.lineno} column {e.colno}") from None


def _schema(model: type[BaseModel], many: bool = False) -> dict:
    schema = model.model_json_schema()
    body = {"type": "array", "items": schema} if many else schema
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": body}}}}


@dataclass
class Service:
    """What the endpoints share: the translator behind its queue, the run's facts, the limits."""
    translator: Translator
    settings: ServeSettings
    info: dict[str, Any]
    queue: BatchingQueue | None = None
    started: float = field(default_factory=time.monotonic)

    def check(self, texts: list[str], beam: int | None, nbest: int) -> Options:
        s = self.settings
        if not texts:
            raise ApiError(422, 'texts: the list is empty; send at least one text')
        if len(texts) > s.max_texts:
            raise ApiError(413, f"texts: {len(texts)} texts in one request; the limit is {s.max_texts}")
        for i, text in enumerate(texts):
            where = "text" if len(texts) == 1 else f"texts[{i}]"
            if not text.strip():
                raise ApiError(422, f"{where}: empty; send some text to translate")
            if len(text) > s.max_chars:
                raise ApiError(413, f"{where}: {len(text):,} characters; the limit is {s.max_chars:,}")
        beam = s.beam if beam is None else beam
        for name, value in (("beam", beam), ("nbest", nbest)):
            if not 1 <= value <= s.max_beam:
                raise ApiError(422, f"{name}: {value} is out of range; use 1 to {s.max_beam}")
        return Options(max(beam, nbest) if nbest > 1 else beam, nbest)

    def prefixes(self, prefix: str | list[str] | None, count: int) -> list[str] | None:
        """A request's prefixes, one per text (one string is every text's)."""
        if prefix is None:
            return None
        try:
            prefixes = one_per_text(prefix, count, texts="texts")
        except NmtError as e:
            raise ApiError(422, f"prefix: {e}") from None
        if any(len(p) > self.settings.max_chars for p in prefixes):
            raise ApiError(413, f"prefix: over {self.settings.max_chars:,} characters")
        return prefixes

    def glossary(self, terms: dict[str, str] | None) -> Glossary | None:
        """The glossary a request's translations obey: the server's, with the request's own terms."""
        try:
            given = Glossary.of(terms or None)  # {} asks for nothing
        except NmtError as e:
            raise ApiError(422, f"glossary: {e}") from None
        return self.settings.glossary.updated(given) if self.settings.glossary else given

    async def translate(self, texts: list[str], options: Options, attention: bool = False) -> list[Result]:
        assert self.queue is not None, "the queue starts with the app"
        try:
            future = self.queue.submit(texts, options, attention)
        except QueueFull:
            raise ApiError(503, "the server is busy; retry shortly", {"Retry-After": "1"}) from None
        return await asyncio.wrap_future(future)

    @staticmethod
    def markup(texts: list[str], markup: bool | None) -> list[Markup | None]:
        """Each text read as markup where the request asks for it (malformed: 422 naming the text,
        before it waits in the queue), which its translation then reads as markup."""
        try:
            return [read(text, markup, f"text {i}") for i, text in enumerate(texts, 1)]
        except MarkupError as e:
            raise ApiError(422, f"markup: {e}") from None

    def entry(self, text: str, result: Result, nbest: int, scores: bool = False, align: bool = False,
              attention: bool = True) -> dict[str, Any]:
        best = result.translations[0] if result.translations else None
        out: dict[str, Any] = {"src": text, "tgt": best.text if best else "",
                               "score": round(best.score, 4) if best else None}
        if best and best.warnings:  # what was cut: an HTTP client never sees the server's log
            out["warnings"] = list(best.warnings)
        if scores and best:
            out.update(mean_score=round(best.mean_score, 4), words=best.words,
                       word_scores=[round(s, 4) for s in best.word_scores])
        if nbest > 1:
            out["nbest"] = [{"tgt": t.text, "score": round(t.score, 4)} for t in result.translations]
        if align and result.attention is not None:
            out["alignment"] = pharaoh(result.attention.alignment(best, frequent=self.translator.frequent))
            out["src_words"] = [w for w, _ in words_of(result.attention.src_tokens)]  # what the indices count
        if attention and result.attention is not None:  # `align` alone computes it but does not send it
            src_tokens, out_tokens, weights = result.attention
            out["attention"] = {"src_tokens": src_tokens, "tgt_tokens": out_tokens,
                                "weights": [[round(w, 4) for w in row] for row in weights.tolist()]}
        return out


def create_app(translator: Translator, settings: ServeSettings, info: dict[str, Any]) -> FastAPI:
    beam = settings.beam or translator.cfg.beam_size  # none given: the run's own search, as translate and eval's
    settings = dataclasses.replace(settings, beam=beam, max_beam=max(settings.max_beam, beam))  # always allowed
    service = Service(translator, settings, info)

    async def lifespan(app: FastAPI):
        service.queue = BatchingQueue(translator, settings.max_batch, settings.max_wait_ms / 1000,
                                      settings.queue_size)
        yield
        service.queue.close()

    app = FastAPI(title="nmt", lifespan=lifespan,
                  description="Translation with an LSTM encoder–decoder with attention.")
    app.state.service = service

    @app.exception_handler(ApiError)
    async def api_error(request: Request, exc: ApiError) -> JSONResponse:
        return JSONResponse({"error": exc.message}, status_code=exc.status, headers=exc.headers)

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> JSONResponse:
        return JSONResponse({"error": str(exc.detail)}, status_code=exc.status_code, headers=exc.headers)

    @app.exception_handler(Exception)
    async def internal_error(request: Request, exc: Exception) -> JSONResponse:
        logger.error("internal error on %s: %r", request.url.path, exc)
        return JSONResponse({"error": f"internal error: {type(exc).__name__}"}, status_code=500)

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse({"error": str(exc.errors()[0].get("msg", exc))}, status_code=422)

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    async def page() -> str:
        return resources.files("nmt.serving").joinpath("static/index.html").read_text(encoding="utf-8")

    @app.post("/translate", openapi_extra=_schema(TranslateRequest))
    async def translate(request: Request) -> dict[str, Any]:
        """Translate `text` (a string) or `texts` (a list); optional `beam`, `nbest`, `attention`
        (source and output tokens with the weight matrix, output x source), `scores` (the mean
        token log-probability, the words and each word's), `align` (Pharaoh word alignment) and
        `prefix` (what each output starts with: one string, or one per text), `glossary`
        ({"source term": "target term"}, added to the server's own) and `markup` (inline tags kept
        around the aligned words; default: where a text reads as markup)."""
        try:
            body = TranslateRequest.model_validate(await read_json(request, settings.max_body_bytes))
        except ValidationError as e:
            raise ApiError(422, _first_error(e)) from None
        if (body.text is None) == (body.texts is None):
            raise ApiError(422, 'send "text" (a string) or "texts" (a list of strings), one of the two')
        texts = [body.text] if body.text is not None else list(body.texts or [])
        options = service.check(texts, body.beam, body.nbest)
        prefixes = service.prefixes(body.prefix, len(texts))
        marked = service.markup(texts, body.markup)
        asked = dataclasses.replace(options, prefix=prefixes, glossary=service.glossary(body.glossary),
                                    markup=[m is not None for m in marked])
        results = await service.translate(texts, asked, body.attention or body.align)
        entries = [service.entry(t, r, body.nbest, body.scores, body.align, body.attention)
                   for t, r in zip(texts, results)]
        return {"translations": entries, "beam": options.beam}

    @app.post("/translator/translate", openapi_extra=_schema(OpenNMTItem, many=True))
    async def translate_opennmt(request: Request) -> list[list[dict[str, Any]]]:
        """OpenNMT-py's REST shape: `[{"src": "...", "id": 100}]` in, `[[{"src", "tgt", "n_best",
        "pred_score"}]]` out, so its clients work unchanged."""
        data = await read_json(request, settings.max_body_bytes)
        if not isinstance(data, list):
            raise ApiError(422, 'send a list of {"src": "...", "id": N} objects, as OpenNMT-py clients do')
        try:
            items = [OpenNMTItem.model_validate(x) for x in data]
        except ValidationError as e:
            raise ApiError(422, _first_error(e)) from None
        texts = [item.src for item in items]
        options = service.check(texts, None, 1)
        results = await service.translate(texts, dataclasses.replace(options, glossary=service.glossary(None)))
        entries = [service.entry(t, r, 1) for t, r in zip(texts, results)]
        return [[{"src": e["src"], "tgt": e["tgt"], "n_best": 1, "pred_score": e["score"]} for e in entries]]

    @app.get("/translator/models")
    async def models() -> list[dict[str, Any]]:
        """The one model, in OpenNMT-py's listing shape."""
        return [{"model_id": 100, "loaded": True, "run": info.get("run"), "opt": {"beam_size": settings.beam}}]

    @app.get("/health")
    @app.get("/translator/health", include_in_schema=False)
    async def health() -> dict[str, Any]:
        """The run and checkpoint served, the device, and how long the server has been up."""
        return {"status": "ok", **info, "beam": settings.beam, "max_beam": settings.max_beam,
                "uptime_s": round(time.monotonic() - service.started, 1),
                "batches": service.queue.batches if service.queue else 0}

    return app


def server_info(loaded: LoadedModel, device_name: str, engine: str = "torch") -> dict[str, Any]:
    progress = loaded.state.get("progress") or {}
    best = progress.get("best") or {}
    return {"run": str(loaded.path.parent), "checkpoint": loaded.name, "step": progress.get("step"),
            "ensemble": [str(m.path) for m in loaded.members] or None,
            "val_bleu": best.get("val_bleu"), "device": device_name, "engine": engine,
            "precision": "int8" if engine == "onnx" else "fp32",
            "trained_in": loaded.cfg.train.precision, "tokenizer": loaded.tokenizer.kind,
            "source_lang": loaded.tokenizer.source_lang, "target_lang": loaded.tokenizer.target_lang,
            "init_from": loaded.cfg.train.init_from, "init_from_sha256": loaded.cfg.train.init_from_sha256}


def bind(host: str, port: int) -> socket.socket:
    """The listening socket, bound here so that a port in use is one clear line, not a traceback."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as e:
        raise NmtError(f"--host {host}: cannot resolve it ({e.strerror})") from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
    except OSError as e:
        sock.close()
        raise NmtError(f"cannot listen on {host}:{port}: {e.strerror}; pick another --port "
                       f"(or stop what is using it)") from None
    return sock


def run_server(checkpoint: str | None, device_name: str, host: str, port: int, settings: ServeSettings,
               engine: str = "torch", strict_numbers: bool | None = None) -> None:
    """Load the model once and serve until SIGINT or SIGTERM; uvicorn then stops taking
    connections, answers the requests in flight, and returns."""
    import uvicorn

    device = engine_device(engine, device_name)
    loaded = load_models(checkpoint, device)
    translator = Translator.from_loaded(loaded, device, engine=engine, strict_numbers=strict_numbers)
    app = create_app(translator, settings, server_info(loaded, str(device), engine))
    sock = bind(host, port)
    bound = sock.getsockname()[1]
    logger.info("serving %s on http://%s:%d/ (API docs at /docs); Ctrl-C stops", loaded.name, host, bound)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False, timeout_graceful_shutdown=30))
    # uvicorn shuts down gracefully on SIGINT/SIGTERM, then raises the signal again for the handler
    # it found: this one notes it, so a requested stop exits 0 instead of dying by the signal.
    received: list[int] = []
    previous = {s: signal.signal(s, lambda signum, frame: received.append(signum))
                for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        server.run(sockets=[sock])
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    logger.info("stopped%s", f" by {signal.Signals(received[0]).name}" if received else "")
