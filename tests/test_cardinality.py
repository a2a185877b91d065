"""Labels from log content stay bounded: a log full of new engine numbers, worker names, models and
status codes makes no series beyond a fixed ceiling, counted as overflow instead."""

import random

from exporter.framing.clock import Clock
from exporter.metrics import Metrics
from exporter.stream.pipeline import Pipeline
from tests.helpers import samples

HEAD = "(APIServer pid=53) INFO 08-04 02:45:02 [loggers.py:314] "
# What one server may hold: the flood below (engines 0-63 and any number beyond, 10^6 worker names,
# a new model per line, every status 100-999) makes 777 series; the same flood made 60,390 before
# the bounds (engine 0-63 | aggregated | other, 32 workers + other, registered HTTP codes).
CEILING = 1_000


def flood(n, seed):
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        e = i if i < 100 else rnd.randrange(1_000_000)  # every engine number in range, then any
        out.append(f"{HEAD}Engine {e:03d}: Avg prompt throughput: 1.0 tokens/s, Avg generation throughput: 2.0 "
                   f"tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 1.0%, Prefix cache hit rate: 0.0%")
        out.append(f"(Worker_TP{rnd.randrange(10**6)} pid={i}) INFO 08-04 02:44:28 [gpu_worker.py:617] "
                   f"Available KV cache memory: 8.59 GiB")
        out.append(f"(APIServer pid=53) INFO 08-04 02:43:00 [api_utils.py:345]   █▄█▀ █     █     █     █  "
                   f"model   /models/m{i}")
        out.append(f'(APIServer pid=53) INFO:     127.0.0.1:1 - "GET /v1/models HTTP/1.1" {100 + i % 900} OK')
        out.append(f'(APIServer pid=53) INFO:     127.0.0.1:1 - "{rnd.choice("GET POST BREW X1".split())} '
                   f'/x{i} HTTP/1.1" 200 OK')
    return out


def series(m: Metrics, server="gp") -> int:
    return sum(1 for (_, labels) in samples(m.render().decode()) if ("server", server) in labels)


def feed(m, lines, batch=500):
    p = Pipeline(Clock(year=2026))
    m.add_server("gp")
    for i in range(0, len(lines), batch):
        counts, events, access, _ = p.feed_batch(lines[i:i + batch])
        m.observe_many("gp", events)
        m.observe_access("gp", access)


def test_a_flood_of_new_label_values_stays_under_the_ceiling():
    m = Metrics(process_metrics=False)
    feed(m, flood(5000, 1))
    after_5k = series(m)
    feed(m, flood(5000, 2))
    assert series(m) == after_5k  # nothing grows with more of the same: memory stays flat
    assert after_5k <= CEILING, after_5k
    s = samples(m.render().decode())
    models = [ls for (n, ls) in s if n == "vllm_log_model_info"]
    assert models == [frozenset({("server", "gp"), ("model", "/models/m4999"), ("path", "/models/m4999")})]
    overflow = {dict(ls)["label"]: v for (n, ls), v in s.items() if n == "vllm_log_exporter_label_overflow_total"}
    assert overflow["engine"] > 9000 and overflow["worker"] > 9000 and overflow["status"] > 1000
    assert overflow["method"] > 1000 and overflow["endpoint"] > 5000
    statuses = {dict(ls)["status"] for (n, ls) in s if n == "vllm_log_http_requests_total"}
    assert "200" in statuses and "other" in statuses and "999" not in statuses and "299" not in statuses


def test_ordinary_labels_are_kept():
    m = Metrics(process_metrics=False)
    feed(m, [f"{HEAD}Engine 003: Avg prompt throughput: 1.0 tokens/s, Avg generation throughput: 2.0 tokens/s, "
             f"Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 1.0%, Prefix cache hit rate: 0.0%",
             '(APIServer pid=53) INFO:     127.0.0.1:1 - "POST /v1/chat/completions HTTP/1.1" 429 Too Many Requests'])
    s = samples(m.render().decode())
    assert s[("vllm_log_requests_running", frozenset({("server", "gp"), ("engine", "3")}))] == 1
    assert s[("vllm_log_http_requests_total", frozenset({("server", "gp"), ("method", "POST"),
                                                        ("endpoint", "/v1/chat/completions"), ("status", "429")}))] == 1
    assert all(v == 0 for (n, _), v in s.items() if n == "vllm_log_exporter_label_overflow_total")
