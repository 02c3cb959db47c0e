"""Requests that arrive together, decoded together: a bounded queue in front of one translator.

The translator decodes many sentences in one batch about as fast as one, so a request waits a few
milliseconds for others with the same search options and they share a decoder call; each caller
gets its own results, the same as `nmt translate` gives.
"""

from __future__ import annotations

import queue
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field

from nmt.inference.translator import Attention, Options, Translation, Translator, one_per_text


@dataclass
class Submission:
    texts: list[str]
    options: Options  # its beam and n must be equal for requests to share a batch; its prefixes (one a
    # text, "": nothing) and glossary are its own
    attention: bool = False  # also the weights behind each best translation
    future: Future = field(default_factory=Future)


@dataclass
class Result:
    translations: list[Translation]  # best first; [] for an empty source
    attention: Attention | None = None


class QueueFull(Exception):
    pass


class BatchingQueue:
    """One worker thread owns the translator. It takes the oldest submission, waits up to
    `max_wait_s` for more (up to `max_batch` sentences; no wait when the last batch held one request
    alone), decodes each group of equal options in one call and hands every submission its own
    slice. At most `max_pending` texts wait; beyond that `submit` refuses."""

    def __init__(self, translator: Translator, max_batch: int, max_wait_s: float, max_pending: int):
        self.translator, self.max_batch, self.max_wait_s, self.max_pending = (
            translator, max_batch, max_wait_s, max_pending)
        self.submissions: queue.Queue[Submission | None] = queue.Queue()
        self.pending = 0
        self.lock = threading.Lock()
        self.batches = 0  # decoder calls made, for /health and the tests
        self.last_size = 0  # requests in the last batch
        self.worker = threading.Thread(target=self._run, name="nmt-batcher", daemon=True)
        self.worker.start()

    def submit(self, texts: list[str], options: Options, attention: bool = False) -> Future:
        with self.lock:
            if self.pending + len(texts) > self.max_pending:
                raise QueueFull
            self.pending += len(texts)
        submission = Submission(texts, options, attention)
        self.submissions.put(submission)
        return submission.future

    def close(self) -> None:
        self.submissions.put(None)
        self.worker.join()

    def _collect(self, first: Submission) -> tuple[list[Submission], bool]:
        batch, size = [first], len(first.texts)
        # After a batch that held one request alone (one person typing), no wait for company.
        wait = self.max_wait_s if self.last_size != 1 else 0.0
        deadline = time.monotonic() + wait
        while size < self.max_batch:
            try:
                submission = self.submissions.get(timeout=max(deadline - time.monotonic(), 0))
            except queue.Empty:
                break
            if submission is None:
                return batch, True
            batch.append(submission)
            size += len(submission.texts)
        return batch, False

    def _run(self) -> None:
        stop = False
        while not stop:
            first = self.submissions.get()
            if first is None:
                break
            batch, stop = self._collect(first)
            self.last_size = len(batch)
            groups: dict[tuple[int | None, int], list[Submission]] = {}
            for submission in batch:
                groups.setdefault((submission.options.beam, submission.options.n), []).append(submission)
            for (beam, n), group in groups.items():
                self._decode(beam, n, group)

    def _release(self, group: list[Submission]) -> None:
        """Free the group's places in the queue: before its callers get their answers, so one who
        asks again at once is never refused for texts that were already decoded."""
        with self.lock:
            self.pending -= sum(len(s.texts) for s in group)

    def _decode(self, beam: int | None, n: int, group: list[Submission]) -> None:
        texts = [text for submission in group for text in submission.texts]
        prefixes = [p for s in group for p in (s.options.prefix or [""] * len(s.texts))]
        glossaries = [s.options.glossary for s in group for _ in s.texts]
        markup = [flag for s in group for flag in one_per_text(s.options.markup, len(s.texts))]
        try:  # requests with and without prefixes or glossaries share the batch ("", None: nothing)
            translations = self.translator.run(texts, Options(beam, n, prefixes if any(prefixes) else None,
                                                              glossary=glossaries if any(glossaries) else None,
                                                              markup=markup))
            self.batches += 1
        except Exception as e:  # the callers get the error; the worker lives on
            self._release(group)
            for submission in group:
                submission.future.set_exception(e)
            return
        self._release(group)
        start = 0
        for submission in group:
            mine = translations[start: start + len(submission.texts)]
            start += len(submission.texts)
            try:  # the attention too is computed here: one thread owns the model
                submission.future.set_result([
                    Result(t, self.translator.attention(text, t[0]) if submission.attention and _read(t) else None)
                    for text, t in zip(submission.texts, mine)])
            except Exception as e:
                submission.future.set_exception(e)


def _read(translations: list[Translation]) -> bool:
    """Whether a text's best translation read any of it (markup of tags alone, "<br/>", reads nothing)."""
    best = translations[0] if translations else None
    return best is not None and bool(best.tokens or best.parts or best.sentence is not None)
