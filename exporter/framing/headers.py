"""Where a vLLM record starts, and what its start says: process tags, vLLM's logger header, the headers
that other loggers and platforms put on vLLM's records, and the search for that start inside a line.

A record's start is what vLLM (or the process that printed the record) wrote first: the process tag
``(EngineCore_DP0 pid=7) ``, vLLM's header ``INFO 12-05 10:00:00 [loggers.py:259] `` (V0's without the
``[``), LMCache's, uvicorn's ``INFO:     `` access line, or a header another logging setup gave the
record (a user's logging config, the logging cookbook's, NIXL's, KServe's, NVIDIA Dynamo's). ``read``
reads one at the start of a text into a frame; ``find`` finds the first one in a line whose start is
none (what stands before it is a wrapper, exporter.framing.wrappers decides whether it may be one).

The first start wins: text after it is the record's message, whatever it holds, so a client's text that
vLLM echoes inside a record can never supply a header of its own.

Pure: patterns and functions of text; the frame is any object with Frame's fields.
"""

from __future__ import annotations

import re
from datetime import datetime

from exporter.framing.clock import plausible

LEVELS_P = "DEBUG|INFO|WARNING|ERROR|CRITICAL"

# "(APIServer pid=53) ", "(VllmWorker rank=0 pid=12) ", "(RayWorkerWrapper pid=1, ip=10.0.0.2) ",
# "(VllmWorker-0 pid=10614) ". The name is whatever vLLM's decorate_logs() was given, else the
# multiprocessing process name (vllm/utils/system_utils.py:197 in 0.32): multiproc_executor names its
# workers f"VllmWorker-{rank}" and nested processes are "SpawnProcess-1:2", hence "-", ":" and ".".
# At most 64 characters: a longer "name" is no process's (it would become a worker label).
PROCESS_NAME_P = r"[A-Za-z_][\w.:-]{0,63}"
# Other fields may stand between the rank and the pid ("(VllmWorker rank=4 engine_index=0 pid=31778)",
# LMCache#889), and some builds print vLLM's own process names with no pid ("(EngineCore) ",
# vllm-project/vllm#43009): without a pid only those names are a tag, so "(Note) ..." stays text.
PROCESS_P = (rf"\((?=[^)]* pid=\d|(?:EngineCore|APIServer|ApiServer|VllmWorker|Worker)[\w.:-]*\))"
             rf"({PROCESS_NAME_P}(?: rank=\d+)?)(?: (?!pid=)[a-z_]+=\d+)*(?: pid=(\d+))?(?:, ip=[^)]*)?\) ?")
PROCESS = re.compile(PROCESS_P)
# Ray's prefix for a task or actor without a name (ray/_private/worker.py's print_worker_logs: "(pid=311)",
# "(pid=311, ip=10.0.0.2)"); a named actor's is a process tag as above ("(ServeReplica:app:LLMServer pid=311)").
_RAY_PID = re.compile(r"\(pid=(\d+)(?:, ip=[^)]*)?\) ?")
# Tags other tools put between the process tag and the header (vLLM-Omni's stage, "[Stage-1] ", in
# vllm_omni's logger; VLLM_LOGGING_PREFIX's text): bracketed words, read only when a header follows.
_TAGS = re.compile(r"(?:\[[\w.:#/-]{1,40}\] ?){1,3}")
# torchrun/elastic: "[rank0]: ".
RANK = re.compile(r"\[rank(\d+)\]:? ?")

# vLLM's logger: "LEVEL MM-DD HH:MM:SS [file.py:123] msg" (0.8+) or "... file.py:123] msg" (older).
# Pastes sometimes drop the date ("INFO [quant_config.py:75] ...") or shorten it ("INFO ... [x.py:1] "),
# so the date is optional.
HEADER_P = (rf"({LEVELS_P}) (?:(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)(?:\.\d+)? |(?:\.\.\.|…) )?"
            r"\[?([^\s\]]+):(\d+)\] ?")
VLLM_HEADER = re.compile(HEADER_P)
# A header shortened to its file and line ("[kv_cache_utils.py:868] Maximum concurrency for ..."): a
# Python file's, at the start of what vLLM wrote.
_FILE_HEADER = re.compile(r"\[([\w./-]+\.py):(\d+)\] ")
# A user-supplied logging config seen in the wild: "2024-12-19 21:40:35 ERROR 56542 [file.py:64] ".
_ALT_HEADER = re.compile(
    rf"(\d{{4}})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)(?:[,.]\d+)? ({LEVELS_P}) (\d+ )?\[([^\s\]]+):(\d+)\] ?"
)
# The Python logging cookbook's "%(asctime)s - %(name)s - %(levelname)s - %(message)s", which
# frameworks that embed vLLM configure (xorbitsai/inference#3787: "2025-07-08 17:24:00 -
# vllm.engine.metrics - INFO - Avg prompt throughput: ..."). The logger is the module name.
_DASH_HEADER = re.compile(
    rf"(\d{{4}})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)(?:[,.]\d+)? - ([\w.]+) - ({LEVELS_P}) - "
)
# KServe's logging config (kserve/logging.py, KSERVE_LOGGER_FORMAT): "%(asctime)s.%(msecs)03d %(process)s
# %(name)s %(levelname)s [%(filename)s:%(funcName)s():%(lineno)s] %(message)s" (older releases: without the
# file, or without the function), which its model servers give the records of the loggers they configure.
_KSERVE_HEADER = re.compile(
    rf"(\d{{4}})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)\.\d{{3}} \d+ ([\w.]+) ({LEVELS_P}) "
    r"\[(?:([\w.-]+\.py):)?(?:[\w<>]+\(\):)?(\d+)\] ")
# NIXL's (nixl/logging.py in nixl-cu12 1.x): "%(asctime)s NIXL %(levelname)-7s %(filename)s:%(lineno)d %(message)s".
_NIXL_HEADER = re.compile(rf"(\d{{4}})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)(?:[,.]\d+)? NIXL ({LEVELS_P}) +([\w.-]+):(\d+) ")
# NVIDIA Dynamo hands vLLM's records to Rust's tracing (dynamo/runtime/logging.py: a handler whose
# target is "module.funcName"; lib/runtime/src/logging.rs: tracing-subscriber's compact format), after
# its RFC 3339 stamp: "2025-06-06T09:52:01.833Z ERROR core.run_engine_core: EngineCore failed to start."
# (ai-dynamo/dynamo#1408), the level right-aligned in five columns. Read only after such a stamp.
_DYNAMO_HEADER = re.compile(r" ?(ERROR|WARN|INFO|DEBUG|TRACE) ([A-Za-z_]\w*)(?:\.[\w<>]+)?: ")
_DYNAMO_LEVELS = {"ERROR": "ERROR", "WARN": "WARNING", "INFO": "INFO", "DEBUG": "DEBUG", "TRACE": "DEBUG"}
# uvicorn's "INFO:     " level prefix (levelname + ':' padded to 9, then a space).
UVICORN = re.compile(rf"({LEVELS_P}):\s+")

# The connectors' own record headers, printed by their loggers inside vLLM's processes (findings 10 of
# catalogue/findings.md): LMCache's (lmcache/logging.py, every release read: "[%(asctime)s] LMCache
# %(levelname)s: %(message)s (%(filename)s:%(lineno)d:%(name)s)"; 0.2's experimental tree "%(levelname)s
# LMCache: %(message)s [%(asctime)s] -- %(pathname)s:%(lineno)d"), as pastes also show it: the stamp's "["
# or the space after the colon lost, a placeholder for the stamp, none at all; and a progress bar that
# lost its newline before it ("Adding requests: 0%|...| 0/2 [00:00<?, ?it/s](EngineCore_DP0 pid=1) [..."),
# which a terminal would have redrawn away.
PROGRESS_GLUE = re.compile(r"(?:Adding requests|Processed prompts)[^\]]*\]")
_LMCACHE_HEADER = re.compile(
    rf"(?:\[?(?:(\d{{4}})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)(?:,\d+)?|[^\]\s]*(?: [^\]\s]*)?)\] ?)?LMCache ({LEVELS_P}): ?"
    rf"|({LEVELS_P}) LMCache: ")
_LMCACHE_TRAILER = re.compile(r" \(([\w.-]+\.py):(\d+):[\w.]+\)$| \[[^\]]*\] -- \S*?([\w.-]+\.py):(\d+)$")

# The search for a record's start inside a line (``find``): the starts above that say plainly they are
# one (a process tag with its pid, a header with its date or a Python file, the dated headers of other
# logging setups, LMCache's, uvicorn's level
# prefix padded as uvicorn pads it, "INFO:     ", "WARNING:  ", Dynamo's stamp and header),
# each standing after a space, a bar or a bracket (or at the line's start), never inside a word. The
# leftmost wins.
_FIND = re.compile(
    r"(?<![^\s|│┃║>\])}])(?:"
    r"\([A-Za-z_][\w.:-]{0,63}(?: rank=\d+)?(?: [a-z_]+=\d+)* pid=\d+(?:, ip=[^)]*)?\)"
    r"|\(pid=\d+(?:, ip=[^)]*)?\)"
    r"|\((?:EngineCore|APIServer|ApiServer|VllmWorker|Worker)[\w.:-]*\)"
    rf"|(?:{LEVELS_P}) (?:\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? \[?[^\s\]]+:\d+\]|(?:(?:\.\.\.|…) )?\[[\w./-]+\.py:\d+\] )"
    r"|\[[\w./-]+\.py:\d+\] "
    rf"|\d{{4}}-\d\d-\d\d \d\d:\d\d:\d\d(?:[,.]\d+)? (?:NIXL |- [\w.]+ - |\d+ [\w.]+ )?(?:{LEVELS_P}) "
    rf"|\[\d{{4}}-\d\d-\d\d \d\d:\d\d:\d\d(?:,\d+)?\] ?LMCache (?:{LEVELS_P}):|(?:{LEVELS_P}) LMCache: "
    r"|(?:INFO:     |WARNING:  |ERROR:    |DEBUG:    |CRITICAL: )(?=\S)"
    r"|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)  ?(?:ERROR|WARN|INFO|DEBUG|TRACE) [A-Za-z_]\w*(?:\.[\w<>]+)?: )")
# What a line must hold somewhere for ``find`` to find anything: most lines that hold no start hold none
# of these (a traceback's "  File ..." lines, progress bars), and cost the search nothing.
_FIND_HINTS = ("pid=", "INFO", "WARN", "ERROR", "DEBUG", "CRITICAL", "TRACE", ".py:", "(EngineCore", "(APIServer",
               "(ApiServer", "(VllmWorker", "(Worker")
FIND_WITHIN = 320  # how far into a line its record's start is looked for


def find(text: str) -> int:
    """Where the first record start in the first FIND_WITHIN characters of ``text`` is (-1: none)."""
    head = text[:FIND_WITHIN + 64]
    for hint in _FIND_HINTS:
        if hint in head:
            break
    else:
        return -1
    m = _FIND.search(head, 0, FIND_WITHIN + 64)
    return m.start() if m is not None and m.start() <= FIND_WITHIN else -1


def _local_date(m: re.Match, clock) -> float | None:
    try:
        return plausible(datetime(*(int(m.group(i)) for i in range(1, 7)), tzinfo=clock.tz).timestamp())
    except (ValueError, OverflowError, OSError):
        return None


def read(f, text: str, clock, after_rfc3339: bool = False) -> str | None:
    """The message after the record start at the beginning of ``text``, its facts (process, level,
    logger, header, time when nothing better was read) set on ``f``; None when ``text`` starts with none.
    ``after_rfc3339``: an RFC 3339 stamp stood right before ``text`` (where Dynamo's header follows one)."""
    found = False
    # Process tag(s); when nested, the innermost one is the process that wrote the line.
    if text[:1] == "(":
        m = PROCESS.match(text) or _RAY_PID.match(text)
        while m:
            if m.re is _RAY_PID:
                f.pid = pid_of(m.group(1))
            else:
                proc, pid = m.groups()
                f.process, f.pid = proc, pid_of(pid)
            found = True
            text = text[m.end():]
            m = (PROCESS.match(text) or _RAY_PID.match(text)) if text[:1] == "(" else None
        if found and text[:1] == " ":
            # a colour code that lost its ESC between the tag and the header leaves a second space
            s = text.lstrip(" ")
            if s[:1] in "DIWEC[" and VLLM_HEADER.match(s):
                text = s
    c0 = text[:1]
    if c0 == "[":
        m = RANK.match(text)
        if m:
            found = True
            text = text[m.end():]
            c0 = text[:1]
        elif not text.startswith("[20"):
            m = _TAGS.match(text)
            if m and VLLM_HEADER.match(text, m.end()):
                text = text[m.end():]
                c0 = text[:1]
    if "LMCache" in text[:240]:
        rest = _lmcache_header(f, text, clock)
        if rest is not None:
            return rest
    if c0 in "DIWEC" and c0:
        m = VLLM_HEADER.match(text)
        if m:
            level, mo, day, hh, mm, ss, fname, lineno = m.groups()
            f.level = level
            f.logger = f"{fname}:{lineno}"
            end = m.end()
            f.header = text[:end]
            if mo is not None and f.ts_source is None:
                ts = clock.local(int(mo), int(day), int(hh), int(mm), int(ss))
                if ts is not None:
                    f.ts, f.ts_source = ts, "vllm"
            return text[end:]
        m = UVICORN.match(text)
        if m:
            f.level = m.group(1)
            f.uvicorn = True
            return text[m.end():]
    elif c0 == "[":
        m = _FILE_HEADER.match(text)
        if m:
            f.logger = f"{m.group(1)}:{m.group(2)}"
            f.header = m.group(0)
            return text[m.end():]
    elif c0.isdigit():
        m = _ALT_HEADER.match(text)
        if m:
            f.level = m.group(7)
            f.logger = f"{m.group(9)}:{m.group(10)}"
        else:
            m = _DASH_HEADER.match(text)
            if m:
                f.level = m.group(8)
                f.logger = m.group(7)
            else:
                m = _NIXL_HEADER.match(text) or _KSERVE_HEADER.match(text)
                if m is not None and m.re is _NIXL_HEADER:
                    f.level = m.group(7)
                    f.logger = f"{m.group(8)}:{m.group(9)}"
                elif m is not None:
                    f.level = m.group(8)
                    f.logger = f"{m.group(9)}:{m.group(10)}" if m.group(9) else f"{m.group(7)}:{m.group(10)}"
        if m:
            f.header = m.group(0)
            if f.ts_source is None:
                ts = _local_date(m, clock)
                if ts is not None:
                    f.ts, f.ts_source = ts, "vllm"
            return text[m.end():]
    if after_rfc3339 and not found:
        m = _DYNAMO_HEADER.match(text)
        if m:
            f.level = _DYNAMO_LEVELS[m.group(1)]
            f.logger = m.group(2) + ".py"
            f.header = m.group(0)
            return text[m.end():]
    return text if found else None


def pid_of(digits: str | None) -> int | None:
    """A process tag's pid; None past ten digits (no pid is that long, and Python refuses to convert
    more than 4,300)."""
    return int(digits) if digits is not None and len(digits) <= 10 else None


def _lmcache_header(f, text: str, clock) -> str | None:
    """LMCache's record header at the start of ``text`` (after vLLM's process tag, where framing reads a
    vLLM header): its level, its file and line from the record's end, its stamp; the message without
    them. None when ``text`` does not start with one."""
    start = 0
    m = PROGRESS_GLUE.match(text)
    if m is not None:  # the bar's redraw was lost: what follows it is the line
        start = m.end()
        p = PROCESS.match(text, start)
        if p is not None:
            proc, pid = p.groups()
            f.process, f.pid = proc, int(pid) if pid is not None else None
            start = p.end()
    m = _LMCACHE_HEADER.match(text, start)
    if m is None:
        return None
    f.level = m.group(7) or m.group(8)
    f.header = text[start:m.end()]
    if m.group(1) is not None and f.ts_source is None:
        try:
            # (a year outside EARLIEST..LATEST is no time: a client can write any digits there)
            f.ts = plausible(datetime(*(int(m.group(i)) for i in range(1, 7)), tzinfo=clock.tz).timestamp())
            f.ts_source = "vllm" if f.ts is not None else None
        except ValueError:
            pass
    text = text[m.end():]
    t = _LMCACHE_TRAILER.search(text)
    if t is not None:
        f.logger = f"{t.group(1)}:{t.group(2)}" if t.group(1) else f"{t.group(3)}:{t.group(4)}"
        text = text[:t.start()]
    return text
