"""The trust boundary (issue 32, item 2): text a client chooses, which vLLM echoes into its log,
never becomes an error, a death, a stall, a stats window, a supervisor event or an alert.

The eleven prompts are the issue's: each is a line of another family, sent as a prompt (or
generated as output) to a server logging requests (``--enable-log-requests``,
``--enable-log-outputs``); vLLM 0.32 echoes it in the request logger's lines
(``entrypoints/serve/utils/request_logger.py``), older releases in ``Received request ...: prompt:``.
"""

from __future__ import annotations

import pytest

from exporter.alerts.from_events import Alerts
from tests.conftest import run_lines

# The issue's eleven echoed prompts: what each would be, were it a line of vLLM's own.
ELEVEN = {
    "oom": "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity "
           "of 79.15 GiB of which 1.02 GiB is free.",
    "cuda_error": "RuntimeError: CUDA error: an illegal memory access was encountered",
    "nccl_error": "RuntimeError: NCCL error: unhandled cuda error (run with NCCL_DEBUG=INFO for details)",
    "engine_dead": "EngineCore encountered a fatal error.",
    "rpc_timeout": "TimeoutError: RPC call to execute_model timed out.",
    "worker_died": "Worker proc VllmWorker-0 died unexpectedly (exit code: -9), shutting down executor.",
    "gpu_memory_fault": "Memory access fault by GPU node-2 (Agent handle: 0x55d1c0) on address 0x7f0c. "
                        "Reason: Page not present or supervisor privilege.",
    "engine_stats": "Engine 000: Avg prompt throughput: 1.0 tokens/s, Avg generation throughput: 2.0 tokens/s, "
                    "Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 99.0%, Prefix cache hit rate: 0.0%",
    "startup_failure": "ValueError: To serve at least one request with the models's max seq len (8192), (4.00 GiB "
                       "KV cache is needed, which is larger than the available KV cache memory (1.00 GiB).",
    "process_exit": "vllm.service: Main process exited, code=killed, status=9/KILL",
    # a record of vLLM's own inside the prompt: the glued-record split made it one
    "glued_engine_dead": "x ERROR 12-04 10:00:00 [core.py:1] EngineCore encountered a fatal error.",
}

HEADER = "(APIServer pid=1) INFO 12-04 10:00:00 [request_logger.py:71] "
OLD_HEADER = "INFO 06-01 10:00:00 [logger.py:39] "


def echoes(text: str) -> list[str]:
    """``text`` as vLLM's request logger prints it: 0.32's request and response lines, its DEBUG
    details line, and the prompt line of 0.5-0.10."""
    return [
        HEADER + f"Received request cmpl-{text[:5]}: params: SamplingParams(n=1, stop=[{text!r}]), lora_request: None.",
        HEADER + f"Generated response chatcmpl-1: output: {text!r}, finish_reason: stop",
        HEADER + f"Request chatcmpl-1 details: prompt: {text!r}, prompt_token_ids: [1, 2], prompt_embeds shape: None.",
        OLD_HEADER + f"Received request cmpl-1: prompt: {text!r}, params: SamplingParams(n=1), "
                     "prompt_token_ids: [1], lora_request: None, prompt_adapter_request: None.",
    ]


@pytest.mark.parametrize("name", sorted(ELEVEN))
def test_the_issues_eleven_echoed_prompts_give_nothing_and_page_nobody(name):
    text = ELEVEN[name]
    for line in echoes(text):
        _, events = run_lines([line], derived=True)
        # (the request log's bounded facts only: the adapter, the finish reason, never the text)
        assert [e.kind for e in events if e.kind != "request_log"] == [], line
        assert all(set(e.fields) <= {"record", "lora", "finish_reason"} and e.fields.get("lora") is None
                   and e.fields.get("finish_reason", "stop") == "stop" for e in events), line
        alerts = Alerts(instance="127.0.0.1:10825")
        alerts.observe("gp", events, now=1e9)
        assert alerts.pending(now=1e9) == [], line


# ---- every family's fixture lines, in every shape vLLM echoes a client's text in --------------------

import gzip  # noqa: E402
import json  # noqa: E402
import re  # noqa: E402
from urllib.parse import quote  # noqa: E402

import yaml  # noqa: E402
from hypothesis import given, settings, strategies as st  # noqa: E402

from exporter.framing.clock import Clock  # noqa: E402
from exporter.framing.frame import frame_line  # noqa: E402
from exporter.parsers import PARSERS  # noqa: E402
from exporter.stream.pipeline import Pipeline  # noqa: E402
from tests.conftest import FIXTURES, ROOT  # noqa: E402

_DIGITS = re.compile(r"\d+")


def _fixture_lines():
    for path in sorted(FIXTURES.glob("*.log")) + sorted((ROOT / "exporter" / "data").glob("*.log")):
        yield from path.read_text(encoding="utf-8").splitlines()
    for path in sorted((FIXTURES / "vllm-0.32-cpu").glob("*.log.gz")):
        yield from gzip.open(path, "rt", encoding="utf-8").read().splitlines()
    for path in sorted((FIXTURES / "real_lines").glob("*.yaml")):
        for entry in yaml.safe_load(path.read_text(encoding="utf-8")):
            yield entry["line"]
            if entry.get("message"):
                yield entry["message"]


def _family_lines() -> list[str]:
    """Every fixture line that is a fact of some family when it stands alone (one of each shape: lines
    that differ only in their numbers are one), and the issue's eleven."""
    picked: dict[tuple, str] = {}
    for line in _fixture_lines():
        _, events = run_lines([line])
        if events:
            picked.setdefault((frozenset(e.kind for e in events), _DIGITS.sub("N", line[-80:])), line)
    return list(picked.values()) + list(ELEVEN.values())


FAMILY_LINES = _family_lines()
# each one as a whole line (wrappers, process tag and header included) and as its message alone
PAYLOADS = sorted({text for line in FAMILY_LINES for text in (line, frame_line(line, Clock(year=2026)).message) if text})


def test_the_payloads_hold_a_line_of_every_family():
    clock = Clock(year=2026)
    frames = [frame_line(line, clock) for line in FAMILY_LINES]
    missing = [p.name for p in PARSERS
               if not any(p.where.admits(f) and any(n in f.message for n in p.needles) and p.parse(f) for f in frames)]
    assert missing == []


H = "(APIServer pid=1) {level} 12-04 10:00:00 [{logger}] "
REQUEST_LOGGER = H.format(level="INFO", logger="request_logger.py:65")
DEBUG_REQUEST_LOGGER = H.format(level="DEBUG", logger="request_logger.py:50")
PARAMS = "SamplingParams(n=1, presence_penalty=0.0, temperature=0.7, top_p=1.0, seed=None, stop=[], max_tokens=16)"


def _one_line(text: str) -> str:
    """Text as a header value or a path can carry it: no line break (HTTP refuses them)."""
    return text.replace("\r", " ").replace("\n", " ")


def _newline_in_id(text: str, header: str) -> list[str]:
    """A body's request id "x\\n<text>": vLLM's formatter repeats the record's header after the newline
    (and ends the first line with a carriage return)."""
    return [header + "Received request chatcmpl-x\r", header + f"{text}: params: {PARAMS}, lora_request: None."]


# name -> (the shape: text -> physical lines, the events the echo itself may give)
SHAPES = {
    "request, stop string": (lambda t: [REQUEST_LOGGER + f"Received request chatcmpl-1: params: "
                                        f"{PARAMS[:-1]}, stop=[{t!r}]), lora_request: None."], {"request_log"}),
    "request, X-Request-Id": (lambda t: [REQUEST_LOGGER + f"Received request chatcmpl-{_one_line(t)}: params: {PARAMS}, "
                                         "lora_request: None."], {"request_log"}),
    "request, body id with a newline": (lambda t: _newline_in_id(t, REQUEST_LOGGER), {"request_log"}),
    "request, body id with a newline, CR lost": (
        lambda t: [line.rstrip("\r") for line in _newline_in_id(t, REQUEST_LOGGER)], {"request_log"}),
    "request, carriage return in the id": (
        lambda t: [REQUEST_LOGGER + f"Received request chatcmpl-x\r{_one_line(t)}: params: {PARAMS}, lora_request: None."],
        {"request_log"}),
    "request, 0.5-0.10 prompt": (lambda t: ["INFO 06-01 10:00:00 [logger.py:39] Received request cmpl-1: prompt: "
                                            f"{t!r}, params: {PARAMS}, prompt_token_ids: [1, 2], lora_request: None, "
                                            "prompt_adapter_request: None."], {"request_log"}),
    "request, 0.4 engine": (lambda t: ["INFO 06-01 10:00:00 async_llm_engine.py:529] Received request cmpl-1: prompt: "
                                       f"{t!r}, sampling_params: {PARAMS}, prompt_token_ids: [1], lora_request: None."],
                            {"request_log"}),
    "request details": (lambda t: [DEBUG_REQUEST_LOGGER + f"Request chatcmpl-1 details: prompt: {t!r}, prompt_token_ids: "
                                   "[1, 2, 3], prompt_embeds shape: None."], set()),
    "request body": (lambda t: [DEBUG_REQUEST_LOGGER + "Request chatcmpl-1 JSON body: " + json.dumps(
        {"model": "m", "messages": [{"role": "user", "content": t}]}, ensure_ascii=False)], set()),
    "request body, cut at --max-log-len": (lambda t: [DEBUG_REQUEST_LOGGER + "Request chatcmpl-1 JSON body: " + json.dumps(
        {"model": "m", "messages": [{"role": "user", "content": t}]}, ensure_ascii=False)[:40 + len(t) // 2]], set()),
    "response": (lambda t: [REQUEST_LOGGER.replace(":65", ":108") + f"Generated response chatcmpl-1: output: {t!r}, "
                                                                    "finish_reason: stop"], {"request_log"}),
    "response, streaming delta": (lambda t: [REQUEST_LOGGER.replace(":65", ":108") + "Generated response chatcmpl-1 "
                                             f"(streaming delta): output: {t!r}, finish_reason: None"], set()),
    "engine client, added": (lambda t: [H.format(level="INFO", logger="async_llm.py:578")
                                        + f"Added request chatcmpl-{_one_line(t)}."], set()),
    # a body's id with a line break, the carriage return lost (a collector's doing): the record's later line is the
    # client's text and the record's end, under the record's header (every line of it must stay the record's)
    "engine client, added, body id with a newline, CR lost": (
        lambda t: [H.format(level="INFO", logger="async_llm.py:578") + line for line in (
            "Added request chatcmpl-x", f"{t}.")], set()),
    "engine client, aborted, body id with a newline, CR lost": (
        lambda t: [H.format(level="INFO", logger="async_llm.py:612") + line for line in (
            "Aborted request(s) chatcmpl-x", f"{t}.")], {"request_log"}),
    "response body, a line break in it": (
        lambda t: [H.format(level="INFO", logger="log_response.py:52") + line for line in (
            "response_body={'id': 'chatcmpl-1', 'choices': [{'text': 'x", t + "'}]}")], set()),
    "access path": (lambda t: ['(APIServer pid=1) INFO:     10.0.0.1:4242 - "GET /'
                               + quote(_one_line(t)) + ' HTTP/1.1" 404 Not Found'], {"access_log"}),
    "access path, decoded": (lambda t: ['INFO:     10.0.0.1:4242 - "GET /' + _one_line(t).replace('"', "%22")
                                        + ' HTTP/1.1" 404 Not Found'], {"access_log"}),
    "access query": (lambda t: ['INFO:     10.0.0.1:4242 - "GET /v1/models?q=' + _one_line(t).replace('"', "%22")
                                + ' HTTP/1.1" 200 OK'], {"access_log"}),
    "model name in an error": (lambda t: [H.format(level="ERROR", logger="serving.py:274") + "Error with model "
                                          f"error=ErrorInfo(message={'The model `' + t + '` does not exist.'!r}, "
                                          "type='NotFoundError', param='model', code=404)"], {"request_error"}),
    "model name in an error, before 0.10": (lambda t: [H.format(level="ERROR", logger="serving_chat.py:130")
                                                       + "Error with model object='error' message="
                                                       f"{'The model `' + t + '` does not exist.'!r} "
                                                       "type='NotFoundError' param=None code=404"], {"request_error"}),
    "tool parser warning": (lambda t: [H.format(level="WARNING", logger="dots_tool_parser.py:248")
                                       + f"Failed to parse Dots tool call: {t}"], {"log", "tool_call_parser_failure"}),
    "tool parser debug, glued": (lambda t: [H.format(level="DEBUG", logger="deepseekv3_tool_parser.py:135")
                                            + f"delta_text: x{t}"], set()),
    "tool parser traceback": (lambda t: [H.format(level="ERROR", logger="serving.py:1391") + line for line in (
        "Error in extracting tool call from response.", "Traceback (most recent call last):",
        '  File "/v/tool_parsers/hermes_tool_parser.py", line 112, in extract_tool_calls',
        f"ValueError: Invalid tool call: {_one_line(t)}")], {"log", "traceback"}),
    "LoRA name": (lambda t: [H.format(level="INFO", logger="serving.py:226") + f"Loaded new LoRA adapter: name "
                             f"'{_one_line(t)}', path '/adapters/a'"], {"lora_adapter"}),
    "LoRA name with a newline": (lambda t: [H.format(level="INFO", logger="serving.py:226") + line for line in (
        "Loaded new LoRA adapter: name 'a\r", f"{t}', path '/adapters/a'")], {"lora_adapter"}),
}


def _json_record(message: str, name: str, level: str = "INFO") -> str:
    return json.dumps({"asctime": "2026-12-04 10:00:00,000", "levelname": level, "name": name, "processName":
                       "MainProcess", "process": 1, "message": message, "vllm_process_name": "APIServer"})


JSON_SHAPES = {
    "JSON request": (lambda t: [_json_record(f"Received request chatcmpl-x\n{t}: params: {PARAMS}, lora_request: None.",
                                             "vllm.entrypoints.serve.utils.request_logger")], {"request_log"}),
    "JSON response": (lambda t: [_json_record(f"Generated response chatcmpl-1: output: {t!r}, finish_reason: stop",
                                              "vllm.entrypoints.serve.utils.request_logger")], {"request_log"}),
    "JSON access path": (lambda t: [_json_record(f'10.0.0.1:4242 - "GET /{quote(_one_line(t))} HTTP/1.1" 404',
                                                 "uvicorn.access")], {"access_log"}),
    "JSON model name in an error": (lambda t: [_json_record(
        f"Error with model error=ErrorInfo(message={'The model `' + t + '` does not exist.'!r}, type='NotFoundError', "
        "param='model', code=404)", "vllm.entrypoints.openai.chat_completion.serving", "ERROR")], {"request_error"}),
    "JSON tool parser warning": (lambda t: [_json_record(f"Failed to parse Dots tool call: {t}",
                                                         "vllm.tool_parsers.dots_tool_parser", "WARNING")],
                                 {"log", "tool_call_parser_failure"}),
}

WRAPPERS = {"plain": "", "journald": "Dec 04 10:00:00 gpu1 vllm[100]: ", "CRI": "2026-12-04T10:00:00.123456789Z stdout F "}


def _fed(lines: list[str], batch: bool) -> list:
    pipe = Pipeline(Clock(year=2026))
    events = []
    if batch:
        counts, events, access, _ = pipe.feed_batch(lines)
        events = events + [e for e in pipe.flush()]
        return [e.kind for e in events] + ["access_log"] * sum(access.values())
    for line in lines:
        events.extend(pipe.feed(line)[1])
    events.extend(pipe.flush())
    return events


def _check(shape: str, make, own: set, payloads, wrappers=WRAPPERS) -> list:
    """What each payload in ``shape`` gave beyond the echo's own events (line by line and by the batch
    path), and any alert it would push."""
    bad = []
    for text in payloads:
        for wname, wrap in wrappers.items():
            lines = [wrap + line for line in make(text)]
            events = _fed(lines, batch=False)
            kinds = [e.kind for e in events]
            extra = [k for k in kinds if k not in own]
            # an access line is one access line; a model name refused, one refusal
            if extra or ("access_log" in own and kinds.count("access_log") != 1) or (
                    "request_error" in own and kinds.count("request_error") != 1):
                bad.append((shape, wname, text, kinds))
                continue
            batch_kinds = _fed(lines, batch=True)
            if sorted(batch_kinds) != sorted(kinds):
                bad.append((shape, wname, text, kinds, "batch", batch_kinds))
                continue
            alerts = Alerts(instance="127.0.0.1:10825")
            alerts.observe("gp", events, now=1e9)
            if alerts.pending(now=1e9):
                bad.append((shape, wname, text, "alert"))
    return bad


@pytest.mark.parametrize("shape", sorted(SHAPES) + sorted(JSON_SHAPES))
def test_no_family_line_echoed_by_vllm_gives_more_than_the_echo(shape):
    make, own = SHAPES.get(shape) or JSON_SHAPES[shape]
    wrappers = WRAPPERS if shape in SHAPES else {"plain": "", "CRI": WRAPPERS["CRI"]}
    bad = _check(shape, make, own, PAYLOADS, wrappers)
    assert bad == [], f"{len(bad)} of {len(PAYLOADS) * len(wrappers)}: {bad[:5]}"


_SHAPE_NAMES = sorted(SHAPES)
_GLUE = ["", "x", "'", '"', ": ", "\t", "0%", "] ", "\\n"]


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(_SHAPE_NAMES), st.lists(st.sampled_from(PAYLOADS), min_size=1, max_size=3),
       st.sampled_from(_GLUE), st.integers(0, 400), st.integers(0, 400))
def test_payloads_spliced_and_cut_anywhere_give_no_more(shape, texts, glue, cut_from, cut_to):
    """Payloads joined by what may stand before a record's header, and cut anywhere: still nothing but
    the echo's own events."""
    text = glue.join(texts)
    if cut_from < cut_to:
        text = text[cut_from:cut_to] or text
    make, own = SHAPES[shape]
    assert _check(shape, make, own, [text]) == []


# ---- what a line break in a client's text can do, in text logs and in JSON ---------------------------

FORGED_TRACEBACK = ("Traceback (most recent call last):\n  File \"/v/x.py\", line 1, in f\n"
                    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.")
REAL_TRACEBACK = ("Traceback (most recent call last):\n  File \"/v/serving.py\", line 9, in handle\n"
                  "fastapi.exceptions.HTTPException: 400")


def test_a_json_records_message_never_opens_a_traceback_its_exc_info_does():
    """vLLM 0.32 logs ``HTTPException caught. Request id: %s`` with logger.exception: the id is a body's
    ``request_id``, printed raw, so it may hold a whole traceback. In the text format its lines are
    the record's continuation lines, whose header the real traceback's share (the limit docs/security.md states);
    a JSON record keeps them apart: the message's lines are text, only ``exc_info`` is a traceback."""
    line = _json_record(f"HTTPException caught. Request id: chatcmpl-x\n{FORGED_TRACEBACK}",
                        "vllm.entrypoints.serve.exception_handling.handlers.http", "ERROR")
    record = json.loads(line)
    record["exc_info"] = REAL_TRACEBACK
    _, events = run_lines([json.dumps(record)], derived=True)
    assert [e.kind for e in events] == ["log", "traceback"]
    assert events[1].fields["exception"] == "fastapi.exceptions.HTTPException"


def test_a_json_records_later_message_lines_are_its_text_but_the_banners():
    """vLLM's start-up banner is one record of several lines (0.32 ``serve/utils/api_utils.py``): its
    version and model lines still count; the other families' words on a later line do not."""
    logo = ("\n       █     █     █▄   ▄█\n ▄▄ ▄█ █     █     █ ▀▄▀ █  version 0.34.0\n"
            "  █▄█▀ █     █     █     █  model   /models/tiny\n   ▀▀  ▀▀▀▀▀ ▀▀▀▀▀ ▀     ▀\n")
    _, events = run_lines([_json_record(logo, "vllm.entrypoints.common.startup")])
    assert [(e.kind, e.fields) for e in events] == [("version", {"version": "0.34.0"}),
                                                     ("model", {"model": "/models/tiny"})]
    _, events = run_lines([_json_record("Aborted request(s) a,b.\n" + ELEVEN["engine_stats"],
                                        "vllm.v1.engine.async_llm")])
    assert [(e.kind, e.fields) for e in events] == [("request_log", {"record": "aborted"})]  # the abort, no stats
    _, events = run_lines([_json_record("Unexpected: grammar rejected tokens [1] for request x\n"
                                        + ELEVEN["engine_dead"], "vllm.v1.core.sched.scheduler", "ERROR")])
    assert [(e.kind, e.fields.get("level")) for e in events] == [("log", "error")]


# ---- the boundary, family by family --------------------------------------------------------------------

def test_every_family_declares_where_its_lines_come_from():
    """Parser.where is the boundary every family keeps (and a rule registered as a parser gets): the
    access log's is its own rule, shared with the batch path (no vLLM header before its client,
    nothing after its status)."""
    assert [p.name for p in PARSERS if p.where.start is None] == ["access_log"]
    assert all(p.where.start is not None and p.where.levels is not None for p in PARSERS if p.name != "access_log")


def test_every_family_reads_its_words_only_at_the_start_of_the_message():
    """Anchored: each family line with words in front of its message ("a b ", which no exception type
    and no header is) is no longer that family's."""
    clock = Clock(year=2026)
    moved = []
    for line in FAMILY_LINES:
        f = frame_line(line, clock)
        for p in PARSERS:
            if p.name == "access_log" or not any(n in f.message for n in p.needles):
                continue
            if p.where.admits(f) and p.parse(f):
                f.message = "a b " + f.message
                if p.where.admits(f) and p.parse(f):
                    moved.append((p.name, line))
                f.message = f.message[4:]
    assert moved == []


def test_an_info_or_debug_record_is_never_an_error_a_death_or_a_supervisors_line():
    """A line break in a client's text, printed raw in an INFO record, gives a line with that record's
    header: whatever follows it, no error, death, warning sign, stats window or exit."""
    for level in ("INFO", "DEBUG"):
        for logger in ("core.py:1", "async_llm.py:578", "serving.py:226"):
            for text in ELEVEN.values():
                _, events = run_lines([f"(APIServer pid=1) {level} 12-04 10:00:00 [{logger}] {text}"], derived=True)
                assert events == [], (level, logger, text)


def test_a_record_glued_on_is_split_off_only_after_vllms_own_text():
    stats = ELEVEN["engine_stats"].replace("99.0%", "3.0%")
    glued = "INFO 07-28 06:41:19 [loggers.py:1] " + stats
    for host in ("INFO 07-28 06:41:09 [loggers.py:1] " + stats,  # vllm-project/vllm#18115
                 "Processed prompts: 100%|██████████| 2/2 [00:05<00:00,  2.61s/it]",
                 'INFO:     1.2.3.4:5 - "GET /health HTTP/1.1" 200 OK'):
        _, events = run_lines([host + glued])
        assert [e.kind for e in events][-1:] == ["engine_stats"] and events[-1].ts is not None, host
    for host in ("WARNING 07-28 06:41:09 [serving.py:1] Failed to notify KV connector about rejected request x",
                 'INFO:     1.2.3.4:5 - "GET /x',
                 "(EngineCore_DP0 pid=2) [2026-01-07 22:21:10,470] LMCache INFO: Storing KV cache for 2048 out of "
                 "43008 tokens (skip_leading_tokens=40960) for request x"):
        _, events = run_lines([host + "ERROR 07-28 06:41:19 [core.py:1] " + ELEVEN["engine_dead"]], derived=True)
        assert not {"engine_dead", "engine_death"} & {e.kind for e in events}, host


def test_an_echo_records_bounded_fields_for_counting_later():
    from exporter.parsers import echo

    gen = ("Generated response chatcmpl-a, finish_reason: length: output: 'x, finish_reason: length', "
           "finish_reason: stop")
    assert echo.fields("generated", gen) == {"record": "generated", "finish_reason": "stop"}
    assert echo.fields("generated", "Generated response c (streaming delta): output: 'x', finish_reason: None") == {
        "record": "generated"}
    rec = (f"Received request c: params: {PARAMS[:-1]}, stop=[\", lora_request: LoRARequest(lora_name='evil'\"]), "
           "lora_request: LoRARequest(lora_name='sql-lora', lora_int_id=1, lora_path='/adapters/sql', "
           "base_model_name=None, tensorizer_config_dict=None, load_inplace=False).")
    assert echo.fields("received", rec) == {"record": "received", "lora": "sql-lora"}
    assert echo.fields("received", f"Received request c: params: {PARAMS}, lora_request: None.") == {
        "record": "received", "lora": None}
    # what is counted: these facts, and an abort or a LoRA adapter's event without its name or the ids
    assert [(e.kind, e.fields) for e in echo.events("received", rec)] == [
        ("request_log", {"record": "received", "lora": "sql-lora"})]
    assert [(e.kind, e.fields) for e in echo.events("aborted", "Aborted request(s) a,evil\nb.")] == [
        ("request_log", {"record": "aborted"})]
    assert [(e.kind, e.fields) for e in echo.events("lora", "Failed to load LoRA 'evil' resolved by r: x")] == [
        ("lora_adapter", {"event": "load_failed"})]
    assert echo.events("request", "Request evil aborted.") == []
    assert echo.events("generated", "Generated response c (streaming delta): output: 'x', finish_reason: None") == []


def test_a_request_whose_id_breaks_the_line_is_counted_once_whatever_its_lines_say():
    """vLLM 0.32 prints a body's request_id raw: its lines follow under the record's header, and the record's
    facts (the adapter, the finish reason) end its last line. Each record is counted once, on the first line
    that holds its facts, line by line and batched; a delta is never a response, whatever a line claims."""
    rl = REQUEST_LOGGER.replace(":71", ":65")
    forged = f"x: params: {PARAMS}, lora_request: None."
    received = [rl + "Received request chatcmpl-a", rl + forged, rl + forged, rl + f"end: params: {PARAMS}, lora_request: None."]
    gen = rl.replace(":65", ":108")
    delta = [gen + "Generated response chatcmpl-a", gen + "b, finish_reason: stop (streaming delta): output: 'x', "
                                                          "finish_reason: None"]
    forged_delta = [gen + "Generated response chatcmpl-a", gen + "b (streaming delta): output: 'x', finish_reason: stop"]
    done = [gen + "Generated response chatcmpl-a", gen + "b (streaming complete): output: 'xy', finish_reason: "
                                                         "streaming_complete"]
    for batch in (False, True):
        for lines, n in ((received, 1), (delta, 0), (forged_delta, 0), (done, 1), (received * 3, 3)):
            kinds = _fed(lines, batch)
            kinds = kinds if batch else [e.kind for e in kinds]
            assert kinds.count("request_log") == n, (batch, lines)
