"""A rule's pattern as it is matched: by RE2 (google-re2: linear time, no backtracking) wherever RE2 says
the same as Python's ``re``, else by ``re`` itself.

A rule is written in Python's syntax and checked by exporter.config.regex_check, everywhere alike, so a
config that loads on one machine loads on every other. What matches it is the engine that gives the same
answer at the least cost: Python's ``re`` backtracks, and a pattern regex_check lets through may still
cost the square of the text's length (``(?P<name>\\w+) loaded`` over 2,048 word characters: 23 ms a line
with ``re``, 0.007 ms with RE2, bench/rule_patterns.py); but a call into RE2 costs ~7 us where ``re``
finds a short line's words in 0.3 us. So ``re`` searches texts of up to SHORT_CHARS (its worst case
there is ~1.4 ms) and RE2 the longer ones. RE2's classes are ASCII and Python's are Unicode, so
the pattern is translated first: ``\\d`` to ``\\p{Nd}``, ``\\w`` to ``[\\p{L}\\p{N}_]``, ``\\s`` to the
characters Python calls space, ``\\uXXXX`` to ``\\x{XXXX}``, ``{,n}`` to ``{0,n}``, ``\\Z`` to ``\\z``.
What cannot be translated decides:

- ``\\b``, ``\\B``, ``\\W`` in a class: the same as Python on ASCII text only: RE2 reads the long messages
  that are ASCII (nearly every vLLM line), ``re`` the others;
- lookarounds, backreferences, ``(?x)``, ``(?a)``, possessive repeats and atomic groups, ``\\S`` in a
  class, a repeat over 1,000, or anything else RE2 refuses: ``re`` always (bounded by the rule's
  ``max_chars`` and by the daemon's time slices, exporter.daemon.runners).

Without google-re2 (a platform with no wheel) every rule is matched by ``re``. ``engine`` says which.
"""

from __future__ import annotations

import re

try:
    import re2
except ImportError:  # pragma: no cover - a declared dependency; re matches every rule without it
    re2 = None

# the characters Python's \s matches in a str pattern (str.isspace), as an RE2 class body
_SPACES = r"\t\n\x0b\x0c\r\x1c-\x1f \x85\xa0\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}"
_WORD = r"\p{L}\p{N}_"
_OUTSIDE = {"d": r"\p{Nd}", "D": r"\P{Nd}", "w": f"[{_WORD}]", "W": f"[^{_WORD}]", "s": f"[{_SPACES}]",
            "S": f"[^{_SPACES}]", "Z": r"\z"}
_INSIDE = {"d": r"\p{Nd}", "D": r"\P{Nd}", "w": _WORD, "s": _SPACES}
_ASCII_ONLY = {"b", "B"}  # outside a class
_ASCII_ONLY_INSIDE = {"W"}
_NEVER = set("123456789gNkpPXQEG")  # backreferences and what RE2 reads otherwise than re


class _Untranslatable(Exception):
    pass


def translate(pattern: str) -> tuple[str, bool]:
    """(the pattern in RE2's syntax, whether it means the same on ASCII text only). _Untranslatable
    when it cannot say the same."""
    out: list[str] = []
    ascii_only = False
    i, n = 0, len(pattern)
    in_class = False
    while i < n:
        c = pattern[i]
        if c == "\\" and i + 1 < n:
            e = pattern[i + 1]
            if e in ("u", "U"):
                width = 4 if e == "u" else 8
                digits = pattern[i + 2:i + 2 + width]
                if len(digits) != width or not all(d in "0123456789abcdefABCDEF" for d in digits):
                    raise _Untranslatable
                out.append(f"\\x{{{digits}}}")
                i += 2 + width
                continue
            if e in _NEVER or e == "0":
                raise _Untranslatable
            table = _INSIDE if in_class else _OUTSIDE
            if e in table:
                out.append(table[e])
            elif in_class and e in _ASCII_ONLY_INSIDE:
                ascii_only = True
                out.append("\\" + e)
            elif in_class and e in ("S", "b", "B"):
                raise _Untranslatable
            else:
                if not in_class and e in _ASCII_ONLY:
                    ascii_only = True
                out.append("\\" + e)
            i += 2
            continue
        if in_class:
            if c == "]" and i > class_body:
                in_class = False
            elif c == "[" and i + 1 < n and pattern[i + 1] in ":=.":
                raise _Untranslatable  # (POSIX class syntax, which re reads as characters)
            out.append(c)
            i += 1
            continue
        if c == "[":
            in_class = True
            class_body = i + 1
            if pattern[class_body:class_body + 1] == "^":
                class_body += 1
            if pattern[class_body:class_body + 1] == "]":  # a "]" first is a character
                class_body += 1
            out.append(pattern[i:class_body])
            i = class_body
            continue
        if c == "{" and pattern[i + 1:i + 2] == ",":
            m = re.match(r"\{,(\d+)\}", pattern[i:])
            if m:
                out.append(f"{{0,{m.group(1)}}}")
                i += m.end()
                continue
        if c == "(" and pattern[i + 1:i + 2] == "?" and pattern[i + 2:i + 3] not in ("P", ":", "s", "m"):
            raise _Untranslatable  # lookarounds, atomic groups, comments, flags RE2 does not share
        out.append(c)
        i += 1
    return "".join(out), ascii_only


SHORT_CHARS = 512


class _Split:
    """RE2 for the texts longer than SHORT_CHARS (only the ASCII ones when the pattern says the same
    as ``re`` on ASCII text alone; only those without a newline when it holds ``$``, which ``re`` also
    matches before a last newline); ``re`` for the rest."""

    __slots__ = ("fast", "slow", "_slow", "_fast", "ascii_only", "dollar", "groupindex", "pattern")

    def __init__(self, fast, slow: re.Pattern, ascii_only: bool, dollar: bool):
        self.fast, self.slow, self.ascii_only, self.dollar = fast, slow, ascii_only, dollar
        self._slow, self._fast = slow.search, fast.search
        self.groupindex = slow.groupindex
        self.pattern = slow.pattern

    def search(self, text: str, pos: int = 0, endpos: int = 2**62):
        if len(text) <= SHORT_CHARS or endpos - pos <= SHORT_CHARS:  # (nearly every line: re, no more)
            return self._slow(text, pos, endpos)
        if (self.ascii_only and not text.isascii()) or (self.dollar and "\n" in text):
            return self._slow(text, pos, endpos)
        return self._fast(text, pos, endpos)


def compile_rule(pattern: str, regex: re.Pattern):
    """(what matches ``pattern``, its engine: "re2 past 512 characters, re otherwise", the same of ASCII
    text, or "re").
    ``regex`` is ``pattern`` compiled by ``re`` (checked already)."""
    if re2 is None:
        return regex, "re"
    try:
        text, ascii_only = translate(pattern)
        options = re2.Options()
        options.log_errors = False  # (a refusal is an answer here, not a line on stderr)
        fast = re2.compile(text, options)
    except (_Untranslatable, re2.error, ValueError, TypeError):
        return regex, "re"
    if fast.groupindex != regex.groupindex:  # (the translation must keep the groups)
        return regex, "re"
    dollar = "$" in pattern
    if ascii_only:
        return _Split(fast, regex, True, dollar), f"re2 past {SHORT_CHARS} characters of ASCII text, re otherwise"
    return _Split(fast, regex, False, dollar), f"re2 past {SHORT_CHARS} characters, re otherwise"
