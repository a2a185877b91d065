"""Shared by the hostile-input tests and the fuzz tier: every family's real lines (the fixtures), the
numbers an attacker would put in them, and the wrappers a line can come in."""

from __future__ import annotations

import json
import re

import yaml

from tests.conftest import FIXTURES, SAMPLE, SAMPLE_LMCACHE, SAMPLE_V0


def family_lines() -> list[str]:
    """One of each line shape the fixtures hold (digits folded to tell shapes apart): the packaged
    samples, the seed article's log, the warning signs and the real lines of public threads."""
    lines = []
    for path in (SAMPLE, SAMPLE_V0, SAMPLE_LMCACHE, FIXTURES / "seed_article.log", FIXTURES / "warning_signs.log"):
        lines += path.read_text(encoding="utf-8").splitlines()
    for path in sorted((FIXTURES / "real_lines").glob("*.yaml")):
        lines += [e["line"] for e in yaml.safe_load(path.read_text(encoding="utf-8")) if isinstance(e.get("line"), str)]
    shapes: dict[str, str] = {}
    for line in lines:
        shapes.setdefault(re.sub(r"\d+", "N", line), line)
    return list(shapes.values())


DIGITS = re.compile(r"\d+")
# What a number in a line can be made into: past Python's 4,300-digit conversion limit, past a
# float's range, past any real value but convertible, and the non-finite words.
HOSTILE_NUMBERS = ("9" * 5000, "9" * 400, "9" * 25, "1e308", "inf", "nan", "-0", "0" * 30 + "1")


def with_number(line: str, i: int, number: str) -> str:
    """``line`` with its ``i``-th run of digits replaced by ``number``."""
    m = list(DIGITS.finditer(line))[i]
    return line[:m.start()] + number + line[m.end():]


def json_record(message: str, **extra) -> str:
    rec = {"asctime": "2026-12-04 18:07:07,802", "levelname": "ERROR", "name": "vllm.v1.engine.core",
           "processName": "MainProcess", "process": 7, "message": message, "vllm_process_name": "EngineCore_DP0"}
    rec.update(extra)
    return json.dumps(rec)


# Bad records of issue 32 item 3: each made one of the offline commands end with a traceback.
OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."
BAD_RECORDS = {
    "nested_1000_deep": '{"message": ' + "[" * 1000 + "]" * 1000 + "}",
    "timestamp_in_milliseconds": json.dumps({"message": OOM, "levelname": "ERROR", "timestamp": 1785811440000}),
    "timestamp_nan": '{"message": "x", "levelname": "ERROR", "timestamp": NaN}',
    "timestamp_infinity": '{"message": "' + OOM + '", "levelname": "ERROR", "timestamp": Infinity}',
    "timestamp_1e308": json.dumps({"message": OOM, "levelname": "ERROR", "timestamp": 1e308}),
    "asctime_year_1": json_record(OOM, asctime="0001-01-01 00:00:00,000"),
    "pid_5000_digits": 'Aug 04 02:50:01 h vllm[1]: (APIServer pid=' + "9" * 5000
                       + ') INFO:     10.0.0.1:5 - "GET /health HTTP/1.1" 200 OK',
    "count_5000_digits": "(APIServer pid=7) INFO 08-04 02:50:01 [loggers.py:271] Engine 000: Avg prompt throughput: "
                         "0.0 tokens/s, Avg generation throughput: 1.0 tokens/s, Running: " + "9" * 5000
                         + " reqs, Waiting: 0 reqs, GPU KV cache usage: 1.9%, Prefix cache hit rate: 0.0%",
}


# Single lines that held the daemon's memory (issue 32 item 1), as files written a piece at a time.
CRI_STAMP = "2026-08-04T02:50:00.000000000Z"
OOM_LINE = "(EngineCore_DP0 pid=7) ERROR 08-04 02:50:00 [core.py:1] torch.OutOfMemoryError: CUDA out of memory."


def write_cri_giant(path, total_bytes: int, part_bytes: int = 16 << 10) -> None:
    """One logical line of ``total_bytes`` in Kubernetes' CRI ``P`` parts (containerd's 16 KiB), its
    ``F`` part ending in a CUDA OOM: the line that peaked at 528 MB for 93 MB."""
    filler = "x" * part_bytes
    with open(path, "a", encoding="utf-8") as f:
        f.write(f"{CRI_STAMP} stderr P {OOM_LINE[:60]}\n")
        for _ in range(total_bytes // part_bytes):
            f.write(f"{CRI_STAMP} stderr P {filler}\n")
        f.write(f"{CRI_STAMP} stderr F {OOM_LINE}\n")


def json_exc_list(items: int = 200_000) -> str:
    """A JSON record of ~1 MiB whose ``exc_info`` is a list of ``items`` lines ending in the OOM:
    one frame per item, all held at once, peaked at 299 MB."""
    return json.dumps({"levelname": "ERROR", "name": "vllm.v1.engine.core", "message": "EngineCore failed",
                       "exc_info": ["Traceback (most recent call last):"] + ["x"] * items
                       + ["torch.OutOfMemoryError: CUDA out of memory."]})


def json_newlines(chars: int = 1_000_000) -> str:
    """A JSON record whose message is ``chars`` newlines."""
    return json.dumps({"levelname": "WARNING", "name": "vllm.entrypoints", "message": "\n" * chars})


def write_plain_giant(path, total_bytes: int, chunk: int = 1 << 20) -> None:
    """One physical line of ``total_bytes`` without a newline until its end."""
    with open(path, "a", encoding="utf-8") as f:
        for _ in range(total_bytes // chunk):
            f.write("y" * chunk)
        f.write("\n")
