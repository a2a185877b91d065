"""What stands before a vLLM record on a line: the wrappers of the tools a log passed through.

Two kinds. **Named wrappers** are read by their own grammar, each from how the tool formats a line
(docs/wrappers.md lists them with their sources): journald's outputs, RFC 3339 stamps (``podman logs -t``,
``kubectl logs --timestamps``, Kubernetes' CRI files), compose's and podman-compose's service bars,
``kubectl logs --prefix``, syslog tags, a viewer's stamp and bar, a CI runner's bracketed stamp, a
collector's ``[service]: ``, Cloud Logging's export, lemonade's header, Loki's label set. ``peel`` reads
them from the start of a line, in any order and nesting, and keeps what they carry (time, host, unit).

**Any other wrapper** is what stands before the record's start that exporter.framing.headers finds
further in (stern's ``pod container``, a box-drawing or table cell, a quoted paste's ``>``, a tool's
label nobody listed): ``wrapper_like`` says whether that text may be a wrapper at all, and
``read_time`` takes a time stamp from it. A wrapper is made of names, stamps, brackets and bars; text
that holds what vLLM's messages hold around a client's text (quotes, ``word: ``, the words of the records
that echo a client's text) is no wrapper, so a header inside such text is never taken for a record's.

Pure: patterns and functions of text; the frame is any object with Frame's fields.
"""

from __future__ import annotations

import re
from datetime import datetime

from exporter.framing.clock import Clock, plausible, zone_of

RFC3339 = re.compile(r"(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(\.\d+)?(Z|[+-]\d\d:?\d\d)? ")
# journald "short" output: month name in the host's locale, day padded with a space; "short-precise"
# adds microseconds (read to the second). The host holds no ":" or "[" (so "May 01 17:03:06 systemd[1]:
# unit: msg", journalctl --no-hostname, is not read as host "systemd[1]:" and tag "unit").
JOURNALD_P = (r"([^\W\d_]{3,5})\.? {1,2}(\d{1,2}) (\d\d):(\d\d):(\d\d)(?:\.\d{1,9})? ([^\s:\[\]]+) "
              r"([^\s\[:]+)(?:\[(\d+)\])?: ")
JOURNALD = re.compile(JOURNALD_P)
# Kubernetes node logs (the CRI format kubelet has containerd / CRI-O write under /var/log/pods):
# "<RFC 3339 stamp> stdout|stderr P|F <text>"; P parts are joined with their F by exporter.framing.cri.
_CRI_TAG = re.compile(r"(?:stdout|stderr) [PF] ")
# docker compose: "service  | " (name padded to the longest service name); podman-compose
# (podman_compose.py's log_formatter): "[service]   | ".
_COMPOSE = re.compile(r"([A-Za-z0-9][\w.-]*) *\| ")
_PODMAN_COMPOSE = re.compile(r"\[([A-Za-z0-9][\w.-]*)\] *\| ")
# A log viewer's or shipper's dated stamp and a bar: "2025-06-03 10:11:12.123 | " (Dozzle-style
# viewers, loguru-formatted relays). Only a full date-time right at the start of the line followed by
# " | " is taken, so a vLLM message's own "|" (tqdm's "Completed | 1/1") is never mistaken for one.
# Without a zone the stamp is local time (the clock's zone).
_STAMP_BAR = re.compile(
    r"(\d{4})-(\d\d)-(\d\d)[ T](\d\d):(\d\d):(\d\d)(\.\d+|,\d+)?(Z|[+-]\d\d:?\d\d)? +\| ")
# A CI runner's or shipper's bracketed stamp: "[2025-08-12T08:42:31Z] " (Buildkite).
_STAMP_BRACKET = re.compile(
    r"\[(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(\.\d+)?(Z|[+-]\d\d:?\d\d)?\] ")
# A syslog tag with a pid, "systemd[1]: ": after journald's stamp without the host (journalctl
# --no-hostname), after an RFC 3339 or "YYYY-MM-DD HH:MM:SS.fff" stamp and a host (journalctl -o
# short-iso, syslog files), or alone (a paste that lost the stamp). The pid is required: "word word: "
# is too common in messages to be taken for a tag.
_JOURNALD_NOHOST = re.compile(
    r"([^\W\d_]{3,5})\.? {1,2}(\d{1,2}) (\d\d):(\d\d):(\d\d)(?:\.\d{1,9})? ([A-Za-z][\w.@-]*)\[(\d+)\]: ")
_HOST_TAG = re.compile(r"([\w.-]+) ([A-Za-z][\w.@-]*)\[(\d+)\]: ")
_TAG = re.compile(r"([A-Za-z][\w.@-]*)\[(\d+)\]: ")
_DATED_HOST_TAG = re.compile(
    r"(\d{4})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)(\.\d+|,\d+)?(Z|[+-]\d\d:?\d\d)? ([\w.-]+) ([A-Za-z][\w.@-]*)\[(\d+)\]: ")
# journalctl -o short-full / with-unit ("Thu 2024-12-05 10:00:00 UTC gpu1 vllm[100]: "), -o short-unix
# ("1733392800.123456 gpu1 vllm[100]: "), -o short-monotonic ("[    0.000000] gpu1 vllm[100]: "; no wall
# time), as systemd 252's journalctl prints them.
_JOURNALD_FULL = re.compile(
    r"[^\W\d_]{2,4}\.? (\d{4})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)(?:\.\d{1,9})? ([A-Z]{1,5}|[+-]\d{4}) "
    r"([\w.-]+) ([A-Za-z][\w.@-]*)\[(\d+)\]: ")
_JOURNALD_UNIX = re.compile(r"(\d{9,11})(\.\d{1,9})? ([\w.-]+) ([A-Za-z][\w.@-]*)\[(\d+)\]: ")
_JOURNALD_MONOTONIC = re.compile(r"\[ *\d+\.\d+\] ([\w.-]+) ([A-Za-z][\w.@-]*)\[(\d+)\]: ")
# A collector's "[service]: " (one bracketed name, a colon). torchrun's "[rank0]: " is a rank, not
# a service: the record's start reads it.
_SERVICE = re.compile(r"\[(?!rank\d+\])([A-Za-z0-9][\w.-]*)\]: ")
# kubectl logs --prefix: "[pod/name/container] ".
_KUBECTL = re.compile(r"\[pod/([^/\]]+)/([^\]]+)\] ")
# GCP Cloud Logging export puts its own severity and an RFC 3339 stamp in front.
_GCP = re.compile(r"(?:DEFAULT|DEBUG|INFO|NOTICE|WARNING|ERROR|CRITICAL) (?=\d{4}-\d\d-\d\dT)")
_GCP_LABEL = re.compile(r"\[resource\.labels\.containerName: ([^\]]+)\] ")
# lemonade (lemonade-sdk's server, which runs vLLM as a subprocess and relays its output): "2026-05-08
# 11:47:04.370 [Info] (Process) " (lemonade-sdk/vllm-rocm#5). Its level is the stream's, not the record's.
_LEMONADE = re.compile(r"(\d{4})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)(\.\d{3}) \[(?:Info|Warn|Error|Debug|Trace)\] "
                       r"\(([\w. -]{1,40})\) ")
# A terminal UI's box (k9s: "│ ... │") and a pasted table's cell.
_BOXES = frozenset("│┃║|")
# Loki's logcli (default output mode): the stream's label set after the stamp, '{app="vllm", pod="x"} '.
_LABELS = re.compile(r'\{(?:[A-Za-z_][\w.]*=~?"(?:[^"\\]|\\.)*"(?:, ?)?)*\} ')

# Month abbreviations as journald prints them in common locales (C/en, de, fr, es, it, pt, nl, ru, pl).
MONTHS: dict[str, int] = {}
for _i, _names in enumerate(
    [
        "jan ene gen janv янв sty",
        "feb febr fév févr fev lut фев",
        "mar mär mrt mars мар",
        "apr abr avr kwi апр",
        "may mai mei mag maj май",
        "jun juin giu cze июн",
        "jul juil lug jul lip июл",
        "aug ago août sie авг",
        "sep sept set wrz сен",
        "oct okt out ott paź paz окт",
        "nov noi lis ноя",
        "dec dez déc dic dec gru дек",
    ],
    start=1,
):
    for _n in _names.split():
        MONTHS[_n] = _i


def month_of(name: str) -> int | None:
    low = name.lower()
    return MONTHS.get(low[:3]) or MONTHS.get(low)


def _journald_stamp(f, m: re.Match, clock: Clock) -> bool:
    """A journald-style "Mon DD HH:MM:SS" in groups 1-5 of ``m``: its time into ``f`` (when nothing
    better is there); False when the month name is none known (then it is no journald stamp)."""
    month = month_of(m.group(1))
    if not month:
        return False
    if f.ts_source is None:
        ts = clock.local(month, *(int(m.group(i)) for i in range(2, 6)))
        if ts is not None:
            f.ts, f.ts_source = ts, "journald"
    return True


def stamp_time(m: re.Match, clock: Clock):
    """(time, source) of a dated stamp in groups 1-8 (year .. fraction, zone): with a zone it is an RFC
    3339 stamp; without, local time. None when it is no time."""
    if m.group(8) is not None:
        ts = Clock.rfc3339(m)
        return None if ts is None else (ts, "rfc3339")
    try:
        dt = datetime(*(int(m.group(i)) for i in range(1, 6)), min(int(m.group(6)), 59), tzinfo=clock.tz)
        ts = plausible(dt.timestamp())
    except (ValueError, OverflowError, OSError):  # (year 1 in a zone west of UTC: year 0)
        return None
    frac = m.group(7)
    return (None if ts is None else (ts + (float("0." + frac[1:]) if frac else 0.0), "local"))


def _set_time(f, when) -> None:
    """A wrapper's time into ``f``: a zoned one beats any other, a local one only what is not there."""
    if when is not None and (when[1] == "rfc3339" and f.ts_source != "rfc3339" or f.ts_source is None):
        f.ts, f.ts_source = when


def peel(f, text: str, clock: Clock) -> tuple[str, bool]:
    """``text`` without the named wrappers at its start (any order, each at most a few times: journald
    of a container started with ``podman logs -t`` piped in, and so on; at most eight), their facts set on ``f``; and
    whether the last one was a bare RFC 3339 stamp (where Dynamo's header may follow)."""
    bare_stamp = False
    for _ in range(8):
        c0 = text[:1]
        last, bare_stamp = bare_stamp, False
        if c0.isdigit():
            # (an RFC 3339 stamp, the commonest, has a "T": of these only the viewer's bar, which holds a "|", may match)
            bar = "|" in text[16:48]
            if text[10:11] == "T":
                m = _STAMP_BAR.match(text) if bar else None
            else:
                m = (_STAMP_BAR.match(text) if bar else None) or _DATED_HOST_TAG.match(text) or _LEMONADE.match(text)
            if m:
                if m.re is _LEMONADE:
                    try:  # (local time, milliseconds)
                        when = plausible(datetime(*(int(m.group(i)) for i in range(1, 7)), tzinfo=clock.tz).timestamp())
                    except (ValueError, OverflowError, OSError):
                        when = None
                    if when is not None and f.ts_source is None:
                        f.ts, f.ts_source = when + float("0" + m.group(7)), "local"
                    f.unit = f.unit or m.group(8)
                else:
                    _set_time(f, stamp_time(m, clock))
                    if m.re is _DATED_HOST_TAG:
                        f.host, f.unit = m.group(9), m.group(10)
                text = text[m.end():]
                continue
            m = RFC3339.match(text)
            if m:
                ts = Clock.rfc3339(m)
                if ts is not None and f.ts_source != "rfc3339":
                    f.ts, f.ts_source = ts, "rfc3339"
                text = text[m.end():]
                t = _CRI_TAG.match(text)
                if t:
                    text = text[t.end():]
                else:
                    t = _HOST_TAG.match(text) or _LABELS.match(text)  # journalctl -o short-iso; logcli
                    if t is not None and t.re is _HOST_TAG:
                        f.host, f.unit = t.group(1), t.group(2)
                    if t is not None:
                        text = text[t.end():]
                    else:
                        bare_stamp = True
                continue
            m = _JOURNALD_UNIX.match(text)
            if m:
                ts = plausible(int(m.group(1)) + (float("0" + m.group(2)) if m.group(2) else 0.0))
                if ts is not None and f.ts_source != "rfc3339":
                    f.ts, f.ts_source = ts, "rfc3339"
                f.host, f.unit = m.group(3), m.group(4)
                text = text[m.end():]
                continue
        elif c0 == "[":
            m = _KUBECTL.match(text)
            if m:
                f.unit = f.unit or m.group(2)
                text = text[m.end():]
                continue
            m = _STAMP_BRACKET.match(text)
            if m:
                ts = Clock.rfc3339(m)
                if ts is not None and f.ts_source != "rfc3339":
                    f.ts, f.ts_source = ts, "rfc3339"
                text = text[m.end():]
                continue
            m = _SERVICE.match(text) or _PODMAN_COMPOSE.match(text) or _GCP_LABEL.match(text)
            if m:
                f.unit = f.unit or m.group(1)
                text = text[m.end():]
                continue
            m = _JOURNALD_MONOTONIC.match(text)
            if m:
                f.host, f.unit = m.group(1), m.group(2)
                text = text[m.end():]
                continue
        elif c0 in _BOXES and text[1:2] == " ":
            # a terminal UI's box or a pasted table's cell ("│ ... │", "| ... |"): both bars go
            text = text[2:]
            if text[-1:] == c0:
                text = text[:-1].rstrip()
            continue
        elif c0.isalpha():
            m = JOURNALD.match(text)
            if m and _journald_stamp(f, m, clock):
                f.host, f.unit = m.group(6), m.group(7)
                text = text[m.end():]
                continue
            m = _JOURNALD_NOHOST.match(text)
            if m and _journald_stamp(f, m, clock):
                f.unit = m.group(6)
                text = text[m.end():]
                continue
            m = _TAG.match(text)
            if m:
                f.unit = f.unit or m.group(1)
                text = text[m.end():]
                continue
            m = _GCP.match(text)
            if m:
                text = text[m.end():]
                continue
            m = _JOURNALD_FULL.match(text)
            if m:
                _set_time(f, _full_time(m, clock))
                f.host, f.unit = m.group(8), m.group(9)
                text = text[m.end():]
                continue
            if "|" in text[:64]:
                m = _COMPOSE.match(text)
                if m:
                    f.unit = f.unit or m.group(1)
                    text = text[m.end():]
                    continue
        return text, last
    return text, bare_stamp


def _full_time(m: re.Match, clock: Clock) -> tuple[float, str] | None:
    """journalctl -o short-full's time: its zone an offset, UTC, or an abbreviation (which names no offset
    for sure: the clock's zone then)."""
    zone = m.group(7)
    try:
        if zone in ("UTC", "GMT", "Z") or zone[0] in "+-":
            tz, source = zone_of(zone if zone[0] in "+-" else None), "rfc3339"  # (an offset Python refuses: none)
        else:
            tz, source = clock.tz, "local"
        ts = plausible(datetime(*(int(m.group(i)) for i in range(1, 6)), min(int(m.group(6)), 59), tzinfo=tz).timestamp())
    except (ValueError, OverflowError, OSError):
        return None
    return None if ts is None else (ts, source)


# ---- any other wrapper ---------------------------------------------------------------------------------

# What a wrapper is made of: names (a pod, a container, a host, a service, a namespace), stamps, brackets,
# parentheses, bars and box-drawing characters, a quoted paste's ">", Loki's label set (checked apart).
_WRAPPER_CHARS = re.compile(r"[\w\s.:/@,+#=*>|│┃║─•\[\]()-]*")
# Where vLLM's messages hold a client's text (exporter.parsers.echo), and what no tool's prefix holds: a
# word and a colon before a space ("prompt: ", "ValueError: "), and the words that begin the records that
# echo a client's text.
_MESSAGE_WORD = re.compile(r"[A-Za-z_][\w.]*: ")
# ... but for a label a tool brackets with its name ("[resource.labels.containerName: vllm]", Cloud Logging's)
_KEY_LABEL = re.compile(r"\[[\w.]+: [\w.-]+\]")
_ECHO_WORDS = ("request", "Request", "response", "LoRA", "response_body", "prompt", "params")
# A stamp in a wrapper: RFC 3339 or a dated local time ("2026-01-02 03:04:05.678"), or journald's.
_WRAPPER_STAMP = re.compile(r"(?<!\d)(\d{4})-(\d\d)-(\d\d)[ T](\d\d):(\d\d):(\d\d)(\.\d+|,\d+)?(Z|[+-]\d\d:?\d\d)?(?!\d)")
_PROGRESS_END = re.compile(r"(?:Adding requests|Processed prompts)[^\]]*\]$")
_WRAPPER_JOURNALD = re.compile(r"(?<!\w)([^\W\d_]{3,5})\.? {1,2}(\d{1,2}) (\d\d):(\d\d):(\d\d)(?!\d)")


def wrapper_like(text: str) -> bool:
    """Whether ``text``, found before a record's start, may be a tool's wrapper (see the module's docstring).
    A progress bar that lost its newline before the record ("Processed prompts: ...| 0/2 [00:00<?, ?it/s]")
    is what a terminal would have redrawn away: the wrapper is what stands before it."""
    if text[-1:] == "]" and ("Processed prompts" in text or "Adding requests" in text):
        m = _PROGRESS_END.search(text)
        if m is not None:
            text = text[:m.start()]
    if "{" in text:
        text = _LABELS.sub(" ", text)
    if ": " in text and "[" in text:
        text = _KEY_LABEL.sub(" ", text)
    if _WRAPPER_CHARS.fullmatch(text) is None:
        return False
    if ": " in text and _MESSAGE_WORD.search(text) is not None:
        return False
    return not any(w in text for w in _ECHO_WORDS)


def read_time(f, text: str, clock: Clock) -> None:
    """The time stamp an unnamed wrapper holds, if any, into ``f`` (as a named wrapper's would be)."""
    if not any(c.isdigit() for c in text):
        return
    m = _WRAPPER_STAMP.search(text)
    if m is not None:
        _set_time(f, stamp_time(m, clock))
        return
    m = _WRAPPER_JOURNALD.search(text)
    if m is not None:
        _journald_stamp(f, m, clock)
