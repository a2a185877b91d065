#!/usr/bin/env python3
"""Bounded OpenAI-API traffic against a live vLLM, every request and its answer recorded.

Standard library only, like tools/vllm_cpu.py (which starts the server): completions and chats,
streaming or not, over repetitive prompts (prefix-cache hits, ngram drafts that get accepted), at a
bounded concurrency, and one of each client error (400, 404, 405). Each request is one JSON line:
method, path, the status actually received (None when no answer came), times.
"""

from __future__ import annotations

import json
import random
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, Iterable

from tools.vllm_cpu import MODEL_NAME

# Repetitive text: the ngram proposer drafts from earlier n-grams of prompt+output, and a shared
# long prefix gives prefix-cache hits on every request after the first.
PREFIX = " ".join(["the quick brown fox jumps over the lazy dog and the cat sat on the mat."] * 24)
PROMPTS = [
    "one two three four one two three four one two three four one two three",
    "alpha beta gamma delta alpha beta gamma delta alpha beta gamma",
    "red green blue red green blue red green blue red green",
    "the server sends a token, the server sends a token, the server sends a",
]


class Client:
    """Bounded OpenAI-API traffic; each request is one JSON line in ``record_path``."""

    def __init__(self, base_url: str, record_path: Path | str, model: str = MODEL_NAME,
                 timeout: float = 120.0):
        self.base, self.model, self.timeout = base_url.rstrip("/"), model, timeout
        self.path = Path(record_path)
        self._lock = threading.Lock()
        self.records: list[dict[str, Any]] = []

    def call(self, method: str, path: str, body: Any = None, *, raw: bytes | None = None,
             stream: bool = False, kind: str = "") -> dict[str, Any]:
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"} if data else {})
        rec: dict[str, Any] = {"method": method, "path": path, "kind": kind, "stream": stream,
                               "started": round(time.time(), 3)}
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as r:
                rec["status"] = r.status
                payload = r.read()  # a stream ends when the server closes it after "data: [DONE]"
                rec["bytes"] = len(payload)
                if stream:
                    rec["events"] = payload.count(b"data:")
        except urllib.error.HTTPError as e:
            rec["status"] = e.code
            rec["body"] = e.read()[:300].decode("utf-8", "replace")
        except Exception as e:  # refused/reset/timeout: no status was received
            rec["status"] = None
            rec["error"] = f"{type(e).__name__}: {e}"
        rec["ended"] = round(time.time(), 3)
        with self._lock:
            self.records.append(rec)
            with open(self.path, "a") as f:
                f.write(json.dumps(rec) + "\n")
        return rec

    def completion(self, prompt: str, max_tokens: int = 32, stream: bool = False, **extra) -> dict:
        body = {"model": self.model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0.0,
                "stream": stream, **extra}
        return self.call("POST", "/v1/completions", body, stream=stream, kind="completion")

    def chat(self, text: str, max_tokens: int = 32, stream: bool = False, **extra) -> dict:
        body = {"model": self.model, "max_tokens": max_tokens, "temperature": 0.0, "stream": stream,
                "messages": [{"role": "system", "content": PREFIX}, {"role": "user", "content": text}],
                **extra}
        return self.call("POST", "/v1/chat/completions", body, stream=stream, kind="chat")

    def bad_requests(self) -> list[dict]:
        """One of each client error; the status recorded is what vLLM actually answered."""
        c = {"model": self.model, "prompt": "hi", "max_tokens": 4}
        return [
            self.call("POST", "/v1/completions", {**c, "max_tokens": -1}, kind="bad:max_tokens<0"),
            self.call("POST", "/v1/completions", raw=b'{"model": "x", "prompt": ', kind="bad:json"),
            self.call("POST", "/v1/completions", {**c, "model": "no-such-model"}, kind="bad:model"),
            self.call("POST", "/v1/chat/completions", {"model": self.model, "messages": "nope"},
                      kind="bad:messages"),
            self.call("GET", "/v1/no-such-path", kind="bad:path"),
            self.call("GET", "/v1/completions", kind="bad:method"),
        ]

    def mixed_jobs(self, n: int, seed: int = 7, max_tokens: int = 48) -> list[Callable[[], dict]]:
        """n requests: completions and chats, streaming and not, over the repetitive prompts
        (prefixed by PREFIX for prefix-cache hits), ignore_eos so each runs its full length."""
        rng = random.Random(seed)
        jobs: list[Callable[[], dict]] = []
        for i in range(n):
            prompt, stream = rng.choice(PROMPTS), rng.random() < 0.4
            toks = rng.choice([max_tokens // 2, max_tokens, max_tokens * 2])
            if i % 3 == 2:
                jobs.append(lambda p=prompt, s=stream, t=toks: self.chat(p, t, s, ignore_eos=True))
            else:
                jobs.append(lambda p=PREFIX + " " + prompt, s=stream, t=toks:
                            self.completion(p, t, s, ignore_eos=True))
        return jobs

    def run(self, jobs: list[Callable[[], dict]], concurrency: int = 4) -> list[dict]:
        concurrency = max(1, min(8, concurrency))
        with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="traffic") as pool:
            return list(pool.map(lambda job: job(), jobs))

    def run_for(self, seconds: float, concurrency: int = 4, *, seed: int = 0, max_tokens: int = 48,
                max_requests: int = 400) -> int:
        """Keep ``concurrency`` requests in flight for ``seconds`` (no new one starts after that),
        at most ``max_requests`` in all; returns how many were sent. A tiny model answers in
        milliseconds, so a fixed count would be over before a 10 s scrape or a kill lands."""
        jobs = iter(self.mixed_jobs(max_requests, seed, max_tokens))
        deadline, lock, sent = time.monotonic() + seconds, threading.Lock(), [0]

        def worker() -> None:
            while time.monotonic() < deadline:
                with lock:
                    job = next(jobs, None)
                    sent[0] += job is not None
                if job is None:
                    return
                job()

        threads = [threading.Thread(target=worker, name=f"traffic-{i}")
                   for i in range(max(1, min(8, concurrency)))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(seconds + self.timeout + 5)  # each request is bounded by the client timeout
        return sent[0]


def status_counts(records: Iterable[dict]) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in records:
        key = str(r.get("status"))
        out[key] = out.get(key, 0) + 1
    return dict(sorted(out.items()))
