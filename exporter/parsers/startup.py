"""Start-up identity and timing: version, model, engine config, engine init time, warm-up run.

- ``vLLM API server version 0.6.3.post1`` (0.3–0.14) and the 0.15+ ASCII banner, whose lines end in
  ``version 0.11.2.dev280+gilded...`` and ``model   /models/snapshots/...``; with the banner disabled
  ``vLLM server version X, serving model Y``. One of these is printed once per server start.
- ``Initializing a V1 LLM engine (v0.9.1) with config: model='...', ..., max_seq_len=32768, ...`` and
  ``non-default args: {'model': ..., 'max_num_seqs': 2}`` -> ``engine_config`` (with ``access_log``: ``flag``
  for ``--disable-uvicorn-access-log``, ``log_level`` for a ``--uvicorn-log-level`` above info: no access lines;
  ``request_log``: ``on`` for ``--enable-log-requests`` (0.10.2+, off by default), ``off`` for 0.9's
  ``--disable-log-requests`` (on by default then); ``output_log``: ``on`` for ``--enable-log-outputs``).
- ``Using max model len 2048`` (``config/model.py:2152`` in 0.32; earlier releases' ``config.py``): the
  context length the server settled on, which the config dump only shows as ``max_seq_len`` ->
  ``engine_config`` with ``max_model_len``.
- ``init engine (profile, create kv cache, warmup model) took 47.53 s (compilation: 12.64 s)``
  (0.20+; older ``took 12.34 seconds``).
- ``Supported tasks: ['generate']`` (``entrypoints/launchers/api_server/entry.py`` in 0.29-0.32):
  the API server's first line once its engine client (and so vLLM's stats logger, whose first
  window starts then) exists: 7 ms after it on a sub-second-stamped 0.32 run here -> ``supported_tasks``.
- ``[backbone] Initial profiling/warmup run took 0.01 s`` (``compilation/monitor.py:91`` in 0.32:
  ``"%sInitial profiling/warmup run took %.2f s"``, the prefix ``"[tag] "`` or empty) -> ``warmup``.
"""

from __future__ import annotations

from exporter.parsers.events import Event
from exporter.framing.frame import Frame
from exporter.parsers._values import literal_eval
from exporter.parsers.base import INFO_LEVELS, Parser, lazy_compile, where

_INIT = lazy_compile(
    r"init engine \(profile, create kv cache, warmup model\) took ([\d.]+) (?:s|secs|seconds)"
    r"(?: \(compilation: ([\d.]+) s(?: \S+ language_model: ([\d.]+) s, encoder: ([\d.]+) s)?\))?"
)
_API_VERSION = lazy_compile(r"vLLM (?:API )?server version (\S+?)(?:, serving model (\S+))?$")
_BANNER_VERSION = lazy_compile(r"█\s+version\s+(\S+)")
_BANNER_MODEL = lazy_compile(r"█\s+model\s+(\S.*)$")
_ENGINE_INIT = lazy_compile(r"Initializing an? (?:V\d )?LLM engine \(v?([^)\s]+)\) with config: (.*)")
_CONFIG_ITEM = lazy_compile(r"(?:^|, )([a-z_]+)=('[^']*'|\"[^\"]*\"|[^,]*)")
_NON_DEFAULT = lazy_compile(r"non-default args: (\{.*\})")
_MAX_MODEL_LEN = lazy_compile(r"^Using max model len (\d+)$")
_TASKS = lazy_compile(r"^Supported tasks: ([\[(].{0,500}[\])])$")
_WARMUP = lazy_compile(r"^(?:\[([^\]\s]+)\] )?Initial profiling/warmup run took ([\d.]+) s$")

# the engine config dump's "speculative_config=SpeculativeConfig(method='ngram', model=None, num_spec_tokens=4)"
# (0.10+; None without speculation)
_SPEC_CONFIG = lazy_compile(r"speculative_config=SpeculativeConfig\(method='([\w.-]+)'(?:.*?num_spec_tokens=(\d+))?")

_CONFIG_KEYS = {
    "model", "served_model_name", "max_seq_len", "max_model_len", "tensor_parallel_size",
    "pipeline_parallel_size", "data_parallel_size", "quantization", "kv_cache_dtype", "dtype",
    "enable_prefix_caching", "max_num_seqs", "max_num_batched_tokens", "gpu_memory_utilization",
    "decode_context_parallel_size", "enforce_eager", "num_speculative_tokens", "seed",
}


def _scalar(text: str):
    t = text.strip()
    if t[:1] in "'\"":
        return t[1:-1]
    if t in ("True", "False"):
        return t == "True"
    if t == "None":
        return None
    try:
        return int(t)
    except ValueError:
        try:
            return float(t)
        except ValueError:
            return t


_COMPILE_TOTAL = lazy_compile(r"torch\.compile (?:takes|took) ([\d.]+) ?s in total")


def _init(frame: Frame) -> list[Event] | None:
    m = _INIT.search(frame.message)
    if not m:
        m = _COMPILE_TOTAL.search(frame.message)  # the compilation part, on a line of its own
        return [Event("init_engine", {"compilation_seconds": float(m.group(1))})] if m else None
    fields = {"seconds": float(m.group(1))}
    if m.group(2):
        fields["compilation_seconds"] = float(m.group(2))
    if m.group(3):
        fields["language_model_compilation_seconds"] = float(m.group(3))
        fields["encoder_compilation_seconds"] = float(m.group(4))
    return [Event("init_engine", fields)]


def _version(frame: Frame) -> list[Event] | None:
    msg = frame.message
    m = _BANNER_VERSION.search(msg)
    if m:
        return [Event("version", {"version": m.group(1)})]
    m = _BANNER_MODEL.search(msg)
    if m:
        return [Event("model", {"model": m.group(1).strip()})]
    m = _API_VERSION.search(msg)
    if m:
        fields = {"version": m.group(1)}
        if m.group(2):
            fields["model"] = m.group(2)
        return [Event("version", fields)]
    return None


def _tasks(frame: Frame) -> list[Event] | None:
    m = _TASKS.match(frame.message)
    if not m:
        return None
    try:
        tasks = literal_eval(m.group(1))
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    if not isinstance(tasks, (list, tuple)):
        return None
    return [Event("supported_tasks", {"tasks": [str(t)[:40] for t in tasks[:16]]})]


def _warmup(frame: Frame) -> list[Event] | None:
    m = _WARMUP.match(frame.message)
    if not m:
        return None
    fields: dict = {"seconds": float(m.group(2))}
    if m.group(1):
        fields["stage"] = m.group(1)[:40]  # the compiled part ("backbone"); vLLM's own word, few of them
    return [Event("warmup", fields)]


def _engine_config(frame: Frame) -> list[Event] | None:
    msg = frame.message
    m = _MAX_MODEL_LEN.match(msg)
    if m:
        return [Event("engine_config", {"max_model_len": int(m.group(1))})]
    m = _ENGINE_INIT.search(msg)
    if m:
        fields: dict = {"version": m.group(1)}
        for item in _CONFIG_ITEM.finditer(m.group(2)):
            # the first one is the engine's own: 0.32 prints "speculative_config=SpeculativeConfig(method='ngram',
            # model=None, ...)" after the top-level model='...', and the nested None must not replace it
            if item.group(1) in _CONFIG_KEYS and item.group(1) not in fields:
                fields[item.group(1)] = _scalar(item.group(2))
        sm = _SPEC_CONFIG.search(m.group(2))
        if sm:
            fields["speculative_method"] = sm.group(1)[:40]
            if sm.group(2):
                fields.setdefault("num_speculative_tokens", int(sm.group(2)))
        return [Event("engine_config", fields)]
    m = _NON_DEFAULT.search(msg)
    if m and len(m.group(1)) < 20000:
        try:
            args = literal_eval(m.group(1))
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return None
        if not isinstance(args, dict):
            return None
        fields = {
            k: v for k, v in args.items()
            if isinstance(k, str) and isinstance(v, (str, int, float, bool)) and k in _CONFIG_KEYS
        }
        # the access log switched off (uvicorn's access lines are INFO: a quieter uvicorn log level drops them too);
        # --disable-access-log-for-endpoints only filters, so the HTTP counts stay (without those endpoints)
        if args.get("disable_uvicorn_access_log") is True:
            fields["access_log"] = "flag"
        elif args.get("uvicorn_log_level") in ("warning", "error", "critical"):
            fields["access_log"] = "log_level"
        # whether vLLM logs requests (and aborts) and responses: only what the arguments say (the default changed
        # in 0.10.2, and the line does not name the release)
        if args.get("enable_log_requests") is True:
            fields["request_log"] = "on"
        elif args.get("disable_log_requests") is True:
            fields["request_log"] = "off"
        if args.get("enable_log_outputs") is True:
            fields["output_log"] = "on"
        spec = args.get("speculative_config")  # {'method': 'ngram', 'num_speculative_tokens': 4, ...}
        if isinstance(spec, dict):
            if isinstance(spec.get("method"), str):
                fields["speculative_method"] = spec["method"][:40]
            if type(spec.get("num_speculative_tokens")) is int:
                fields["num_speculative_tokens"] = spec["num_speculative_tokens"]
        return [Event("engine_config", fields)]
    return None


# Where vLLM prints them (the trust boundary): start-up INFO records, each fact's words first (the banner's
# lines start with its block letters).
INIT_ENGINE = Parser("init_engine", ("init engine (", "torch.compile "), _init, where(
    INFO_LEVELS, start=r"(?:init engine \(profile|torch\.compile (?:takes|took) )"))
VERSION = Parser("version", ("version ", "█"), _version, where(
    INFO_LEVELS, start=r"(?:vLLM (?:API )?server version |[\s█▄▀]*█\s+(?:version|model)\s)"))
ENGINE_CONFIG = Parser("engine_config", ("LLM engine (", "non-default args: ", "Using max model len "), _engine_config,
                       where(INFO_LEVELS, start=r"(?:Initializing an? (?:V\d )?LLM engine \(|non-default args: |"
                                                r"Using max model len )"))
WARMUP = Parser("warmup", ("profiling/warmup run took ",), _warmup, where(
    INFO_LEVELS, start=r"(?:\[[^\]\s]+\] )?Initial profiling/warmup run took "))
SUPPORTED_TASKS = Parser("supported_tasks", ("Supported tasks: ",), _tasks, where(
    INFO_LEVELS, start=r"Supported tasks: "))
