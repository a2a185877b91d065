"""Text is text, whatever bytes it came in: the one policy from bytes to ``str`` (every source and
the offline commands) and from ``str`` to every output (labels, JSON, Markdown, HTML, alerts).

Coming in (what a line is made of; applied by exporter.framing.lines and where JSON is unescaped):

- bytes that are not UTF-8: each replaced by U+FFFD (a line is never refused for its bytes);
- a lone UTF-16 surrogate (JSON's ``\\ud800`` escape, which Python's JSON formatter writes for a
  client's lone surrogate): U+FFFD. No ``str`` past framing holds one, so no output can fail to
  encode it;
- NUL: dropped. A NUL is never text in a log: a run of them is the hole a writer without O_APPEND
  leaves after a copytruncate, or a file system's padding after a crash;
- a byte order mark (U+FEFF) at the start of a line: dropped (an editor's or Windows tool's BOM in
  front of a file's first line, usually vLLM's banner);
- line ends: ``\\n``; ``\\r\\n`` is ``\\n`` plus a ``\\r`` framing drops. A source whose first 64 KiB,
  read from a file's first byte, hold two ``\\r`` and no ``\\n`` (or whose whole input, ended, holds a
  ``\\r`` and no ``\\n``: a file written with classic Mac line ends) has ``\\r`` as its line end up to
  its first ``\\n``. Anywhere else a bare ``\\r`` stays in its line: a progress bar redrawing itself
  (framing keeps the last drawing), or a client's text inside a record (never a line of its own);
- other C0 and C1 controls (ESC above all): kept, for framing reads colour codes and takes them off.

Going out (``label``, ``visible``, ``markdown_cell``, ``chat_safe``):

- Prometheus label values, OpenMetrics included: every control character (C0, DEL, C1) and any
  surrogate becomes U+FFFD; the format's own escapes (``\\\\``, ``\\"``, ``\\n``) then apply;
- JSON (the report's, alerts' bodies): JSON escapes what it must; the text holds no surrogate;
- Markdown: one line per value (line breaks, U+2028 too, become spaces), controls become U+FFFD (no
  terminal escape reaches a terminal), the characters that would add a column, HTML, a code span or a
  link are escaped; HTML pages escape every character HTML reads; what the commands print to a
  terminal shows controls as U+FFFD;
- alerts: controls but the newline become U+FFFD, and ``<`` ``>`` become look-alikes (‹ ›) so that a
  chat receiver (Slack's ``<!channel>``, ``<@user>``, ``<url|text>``) reads no markup in a log's words,
  and ``@everyone``/``@here``/``@channel`` get a zero-width space after the ``@``.
"""

from __future__ import annotations

import json
import re

REPLACEMENT = "\ufffd"
BOM = "\ufeff"
_SURROGATES = re.compile("[\ud800-\udfff]")
# C0 but tab, DEL, C1, surrogates: what no output shows as itself
_CONTROLS = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\ud800-\udfff]")
_CONTROLS_BUT_NEWLINE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")
# what some reader would take for a line's end: in a table cell, a space
_LINE_BREAKS = re.compile("\r\n|[\n\r\x0b\x0c\x1c-\x1e\x85\u2028\u2029]")
_MENTION = re.compile(r"@(everyone|here|channel)\b", re.IGNORECASE)
_MARKDOWN = re.compile(r"([\\|<>`\[\]])")


def scrub(text: str) -> str:
    """``text`` with each lone surrogate replaced and NULs dropped: what every ``str`` from an
    escaped source (a JSON record, a journal entry) goes through."""
    if text.isascii():
        return text.replace("\x00", "") if "\x00" in text else text
    if "\x00" in text:
        text = text.replace("\x00", "")
    return _SURROGATES.sub(REPLACEMENT, text)


def text_lines(text: str) -> str:
    """Text that arrives whole (a journal entry's message): scrubbed, and a BOM at the start of any of
    its lines dropped, as the line splitter treats a file's bytes."""
    text = scrub(text)
    if BOM in text:
        text = text.replace("\n" + BOM, "\n")
        if text.startswith(BOM):
            text = text[1:]
    return text


def unescaped_may_need_scrub(json_text: str) -> bool:
    """Whether a JSON text's strings, once decoded, may hold a surrogate or NUL (an escape of one):
    a cheap look at the text before the decoded values are walked."""
    return "\\u" in json_text and ("\\ud" in json_text or "\\uD" in json_text or "\\u0000" in json_text)


def scrub_json(value, depth: int = 0):
    """A decoded JSON value with every string in it (keys too) scrubbed."""
    if isinstance(value, str):
        return scrub(value)
    if depth > 64 and isinstance(value, (dict, list)):  # deeper: as its JSON text, escapes and all (ASCII)
        try:
            return json.dumps(value)
        except (ValueError, RecursionError):
            return ""
    if isinstance(value, dict):
        return {scrub(k) if isinstance(k, str) else k: scrub_json(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [scrub_json(v, depth + 1) for v in value]
    return value


def label(value: str) -> str:
    """A label value as every exposition may hold it: no control character, no surrogate."""
    if value.isprintable():
        return value
    return _CONTROLS.sub(REPLACEMENT, value)


def visible(text: str, keep_newlines: bool = False) -> str:
    """``text`` with every control character but tab (and any surrogate) shown as U+FFFD: nothing
    that a terminal or a viewer would act on; ``keep_newlines``: newlines stay."""
    if text.isprintable():
        return text
    controls = _CONTROLS_BUT_NEWLINE if keep_newlines else _CONTROLS
    return text if controls.search(text) is None else controls.sub(REPLACEMENT, text)


def markdown_cell(text: str) -> str:
    """Log text inside a Markdown table or paragraph: on one line (every line break, U+2028 too, a
    space), controls shown as U+FFFD, and the characters that would change the page escaped with a
    backslash: ``|`` (a column), ``<`` ``>`` (HTML: ``<img onerror>``), a backtick (a code span), ``[``
    ``]`` (a link), ``\\`` itself."""
    text = visible(_LINE_BREAKS.sub(" ", text))
    return _MARKDOWN.sub(r"\\\1", text)


def markdown_safe(value, depth: int = 0):
    """A copy of a report's data (dicts, lists, tuples) with every string, keys too, a markdown_cell: what
    a Markdown page is written from (its JSON is written from the data as it was)."""
    if isinstance(value, str):
        return markdown_cell(value)
    if depth > 32:  # (a report's data is a few levels deep)
        return markdown_cell(str(value))
    if isinstance(value, dict):
        return {markdown_safe(k, depth + 1): markdown_safe(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(markdown_safe(v, depth + 1) for v in value)
    return value


_MD_UNESCAPE = re.compile(r"\\([\\|<>`\[\]])")


def markdown_unescape(text: str) -> str:
    """What ``markdown_cell`` escaped, as the characters themselves (for a page that escapes them its own way)."""
    return _MD_UNESCAPE.sub(r"\1", text) if "\\" in text else text


def chat_safe(text: str) -> str:
    """Log text for an alert's annotations: controls but the newline shown as U+FFFD, and no chat
    markup (``<!channel>`` and friends) or mass mention that a receiver would act on."""
    text = visible(text, keep_newlines=True)
    if "<" in text or ">" in text:
        text = text.replace("<", "\u2039").replace(">", "\u203a")
    if "@" in text:
        text = _MENTION.sub("@\u200b\\1", text)
    return text
