"""Tool-call parser failures: the WARNING and ERROR records of vLLM's tool-call parsers
(``vllm/tool_parsers/*_tool_parser.py``, ``entrypoints/openai/tool_parsers/`` before 0.29), about 230
logger calls across releases: ``Error in extracting tool call from response.`` and ``Error trying to
handle streaming tool call.`` (``logger.exception``: a traceback follows), ``Regex timeout occurred when
matching tool call pattern.``, ``Parsed value '%s' of parameter '%s' is not an integer in tool '%s'...``,
``No tool named '%s'.``, ``Failed to extract any tool calls.``...

The model wrote a tool call its parser could not read: the client gets the text as content instead of
a tool call. That is the model's output (or the wrong ``--tool-call-parser``), not a server error, so the
traceback such a record carries is this failure, not a ``traceback`` error (exporter.stream.traceback).

Recognised by where the record comes from, not by its words: a WARNING-or-worse record of a logger whose
file is a tool parser. Its message often quotes the model's output: none of it is kept. Not a Parser
of the table (no needle: the pipeline asks ``failure`` of a WARNING-or-worse record no family took, so the
INFO lines' fast path pays nothing). Event: ``tool_call_parser_failure`` ``{"parser": "hermes"}`` (the
file's name without ``_tool_parser``; the bound is the metric's).

The parsers of ``vllm/parser/`` (0.16+: ``mistral.py``, ``gemma4.py``, ``harmony.py``,
``response_template.py``) and the pythonic parsers' shared helpers (``tool_parsers/utils.py``) have files
whose names other modules share (``vllm/tokenizers/mistral.py``, every ``utils.py``): their records are
taken by file and wording together (``BY_WORDS``), the parser named by the file (``pythonic`` for the
helpers). Their set-up and per-request option notices (structured outputs with a forced tool call...) are
configuration, not the model's output failing to parse, and are not read. A ``logger.exception`` of theirs is
known as a tool parser's by its first line (exporter.stream.pipeline remembers that record's header), not by
its file, so its traceback is this failure too.
"""

from __future__ import annotations

from exporter.framing.frame import Frame
from exporter.parsers.base import lazy_compile, logger_stem
from exporter.parsers.events import Event

_SUFFIX = "_tool_parser"
_NAME = lazy_compile(r"[a-z0-9_]{1,40}")
_HEADER_FILE = lazy_compile(r"\[([^\s\]]+)\]\s*$")
_LEVELS = frozenset({"WARNING", "ERROR", "CRITICAL"})
# (file stem: (the parser it names, the wordings of a tool call it could not read, at the message's start))
BY_WORDS = {
    "mistral": ("mistral", lazy_compile(r"Error in extracting tool call from response\.$|Error trying to handle streaming "
                                      r"tool call\.$|No tool call found in the JSON after ")),
    "gemma4": ("gemma4", lazy_compile(r"Gemma4 (?:args|array) parser made no progress at position \d+")),
    "harmony": ("harmony", lazy_compile(r"Harmony parser ended in a non-terminal state")),
    "response_template": ("response_template",
                          lazy_compile(r"response_template: dropping an? (?:malformed|incomplete) tool call")),
    "utils": ("pythonic", lazy_compile(r"Dict argument keys are not all literals|Non-JSON-representable constant in "
                                     r"tool call arguments|Tool call arguments .* do not end with expected withheld "
                                     r"suffix|Tool call has non-simple function name|Unsupported (?:AST node type|"
                                     r"unary operand) in tool call arguments")),
}


def parser_of(logger: str | None) -> str | None:
    """The tool parser a logger (``hermes_tool_parser.py:112``, ``vllm.tool_parsers.hermes_tool_parser``)
    names, else None."""
    if not logger:
        return None
    stem = logger_stem(logger)
    if not stem.endswith(_SUFFIX):
        return None
    name = stem[:-len(_SUFFIX)]
    return name if _NAME.fullmatch(name) else "other"


def failure(frame: Frame) -> Event | None:
    """A tool-call parser's failure, for a WARNING-or-worse record from a tool parser's file."""
    if frame.level not in _LEVELS or frame.message[:1] in (" ", "\t"):
        return None  # (an indented line is a traceback's code or caret line, a read begun inside it: no record's start)
    name = parser_of(frame.logger)
    if name is None and frame.logger:
        by_words = BY_WORDS.get(logger_stem(frame.logger))
        if by_words is not None and by_words[1].match(frame.message):
            name = by_words[0]
    return Event("tool_call_parser_failure", {"parser": name}) if name is not None else None


def header_parser(header: str | None) -> str | None:
    """The tool parser a record's header names (``... [hermes_tool_parser.py:112] ``), else None."""
    if not header:
        return None
    m = _HEADER_FILE.search(header)
    return parser_of(m.group(1)) if m else None
