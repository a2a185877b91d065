"""Framing: turn one raw physical log line into a :class:`Frame`.

A vLLM line reaches us wrapped in layers that vLLM did not write (journald, ``podman logs -t``,
compose, kubectl), coloured with ANSI codes, and prefixed by vLLM's own process tag and logger
header. Framing peels those layers off in that order and keeps what they carry (timestamp, host,
unit, process, level, logger), so that parsers only ever see vLLM's message text.

Framing is pure: no I/O, no state except the timestamp converter's cache.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from exporter.framing.clock import Clock, plausible

# ESC-form colours always go; caret-notation (``^[[0;36m``) always goes too. The ESC-less form
# (``[0;36m`` left after a paste lost the ESC byte) is only stripped when a reset code shows the
# line really was coloured, so a literal ``[5m`` in a message survives.
_ANSI_ESC = re.compile(r"\x1b\[[0-9;]*[A-Za-z]|(?:\^\[|#033)\[[0-9;]*m")
_ANSI_BARE = re.compile(r"\[(?:\d{1,3};)*\d{1,3}m")
_BARE_RESET_HINTS = ("[0;0m", "[0m", "[39m")

_RFC3339 = re.compile(
    r"(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(\.\d+)?(Z|[+-]\d\d:?\d\d)? "
)
# journald "short" output: month name in the host's locale, day padded with a space.
# The host holds no ":" or "[" (so "May 01 17:03:06 systemd[1]: unit: msg", journalctl --no-hostname,
# is not read as host "systemd[1]:" and tag "unit").
_JOURNALD_P = r"([^\W\d_]{3,5})\.? {1,2}(\d{1,2}) (\d\d):(\d\d):(\d\d) ([^\s:\[\]]+) ([^\s\[:]+)(?:\[(\d+)\])?: "
_JOURNALD = re.compile(_JOURNALD_P)
# Kubernetes node logs (the CRI format kubelet has containerd / CRI-O write under /var/log/pods):
# "<RFC 3339 stamp> stdout|stderr P|F <text>"; P parts are joined with their F by exporter.framing.cri.
_CRI_TAG = re.compile(r"(?:stdout|stderr) [PF] ")
# compose: "service  | " (name padded to the longest service name).
_COMPOSE = re.compile(r"([A-Za-z0-9][\w.-]*) *\| ")
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
_JOURNALD_NOHOST = re.compile(r"([^\W\d_]{3,5})\.? {1,2}(\d{1,2}) (\d\d):(\d\d):(\d\d) ([A-Za-z][\w.@-]*)\[(\d+)\]: ")
_HOST_TAG = re.compile(r"([\w.-]+) ([A-Za-z][\w.@-]*)\[(\d+)\]: ")
_TAG = re.compile(r"([A-Za-z][\w.@-]*)\[(\d+)\]: ")
_DATED_HOST_TAG = re.compile(
    r"(\d{4})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)(\.\d+|,\d+)?(Z|[+-]\d\d:?\d\d)? ([\w.-]+) ([A-Za-z][\w.@-]*)\[(\d+)\]: ")
# A collector's "[service]: " (one bracketed name, a colon). torchrun's "[rank0]: " is a rank, not
# a service: the process-tag step reads it.
_SERVICE = re.compile(r"\[(?!rank\d+\])([A-Za-z0-9][\w.-]*)\]: ")
# kubectl logs --prefix: "[pod/name/container] ".
_KUBECTL = re.compile(r"\[pod/([^/\]]+)/([^\]]+)\] ")
# torchrun/elastic: "[rank0]: ".
_RANK = re.compile(r"\[rank(\d+)\]:? ?")
# GCP Cloud Logging export puts its own severity and an RFC 3339 stamp in front.
_GCP = re.compile(r"(?:DEFAULT|DEBUG|INFO|NOTICE|WARNING|ERROR|CRITICAL) (?=\d{4}-\d\d-\d\dT)")
_GCP_LABEL = re.compile(r"\[resource\.labels\.containerName: ([^\]]+)\] ")

# "(APIServer pid=53) ", "(VllmWorker rank=0 pid=12) ", "(RayWorkerWrapper pid=1, ip=10.0.0.2) ",
# "(VllmWorker-0 pid=10614) ". The name is whatever vLLM's decorate_logs() was given, else the
# multiprocessing process name (vllm/utils/system_utils.py:197 in 0.32): multiproc_executor names its
# workers f"VllmWorker-{rank}" and nested processes are "SpawnProcess-1:2", hence "-", ":" and ".".
# At most 64 characters: a longer "name" is no process's (it would become a worker label).
PROCESS_NAME_P = r"[A-Za-z_][\w.:-]{0,63}"
# Other fields may stand between the rank and the pid ("(VllmWorker rank=4 engine_index=0 pid=31778)",
# LMCache#889), and some builds print vLLM's own process names with no pid ("(EngineCore) ",
# vllm-project/vllm#43009): without a pid only those names are a tag, so "(Note) ..." stays text.
_PROCESS_P = (rf"\((?=[^)]* pid=\d|(?:EngineCore|APIServer|ApiServer|VllmWorker|Worker)[\w.:-]*\))"
              rf"({PROCESS_NAME_P}(?: rank=\d+)?)(?: (?!pid=)[a-z_]+=\d+)*(?: pid=(\d+))?(?:, ip=[^)]*)?\) ?")
_PROCESS = re.compile(_PROCESS_P)

_LEVELS = "DEBUG|INFO|WARNING|ERROR|CRITICAL"
# A level word and its space, commonest first: a message holding none of them has no vLLM record
# glued on (the pipeline and its fast path test this before the glue regex).
LEVEL_WORDS = ("INFO ", "WARNING ", "ERROR ", "DEBUG ", "CRITICAL ")
# What a Python traceback's first line starts with (the pipeline joins what follows).
TRACEBACK_START = "Traceback (most recent call last)"
# vLLM's logger: "LEVEL MM-DD HH:MM:SS [file.py:123] msg" (0.8+) or "... file.py:123] msg" (older).
# Pastes sometimes drop the date ("INFO [quant_config.py:75] ..."), so the date is optional.
_HEADER_P = rf"({_LEVELS}) (?:(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)(?:\.\d+)? )?\[?([^\s\]]+):(\d+)\] ?"
_VLLM_HEADER = re.compile(_HEADER_P)
# The most common whole shape, journald + optional process tag + vLLM header, in one match; built
# from the same three patterns. Anything else (other wrappers, nesting, colour) takes the loop.
JOURNALD_RECORD_P = _JOURNALD_P + f"((?:{_PROCESS_P})?{_HEADER_P})"
_JOURNALD_RECORD = re.compile(JOURNALD_RECORD_P)
# A user-supplied logging config seen in the wild: "2024-12-19 21:40:35 ERROR 56542 [file.py:64] ".
_ALT_HEADER = re.compile(
    rf"(\d{{4}})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)(?:[,.]\d+)? ({_LEVELS}) (\d+ )?\[([^\s\]]+):(\d+)\] ?"
)
# The Python logging cookbook's "%(asctime)s - %(name)s - %(levelname)s - %(message)s", which
# frameworks that embed vLLM configure (xorbitsai/inference#3787: "2025-07-08 17:24:00 -
# vllm.engine.metrics - INFO - Avg prompt throughput: ..."). The logger is the module name.
_DASH_HEADER = re.compile(
    rf"(\d{{4}})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)(?:[,.]\d+)? - ([\w.]+) - ({_LEVELS}) - "
)
# uvicorn's "INFO:     " level prefix (levelname + ':' padded to 9, then a space).
_UVICORN = re.compile(rf"({_LEVELS}):\s+")
# The connectors' own record headers, printed by their loggers inside vLLM's processes (findings 10 of
# catalogue/findings.md): LMCache's (lmcache/logging.py, every release read: "[%(asctime)s] LMCache
# %(levelname)s: %(message)s (%(filename)s:%(lineno)d:%(name)s)"; 0.2's experimental tree "%(levelname)s
# LMCache: %(message)s [%(asctime)s] -- %(pathname)s:%(lineno)d"), as pastes also show it: the stamp's "["
# or the space after the colon lost, a placeholder for the stamp, none at all; and a progress bar that
# lost its newline before it ("Adding requests: 0%|...| 0/2 [00:00<?, ?it/s](EngineCore_DP0 pid=1) [..."),
# which a terminal would have redrawn away. NIXL's (nixl/logging.py in nixl-cu12 1.x): "%(asctime)s NIXL
# %(levelname)-7s %(filename)s:%(lineno)d %(message)s".
_PROGRESS_GLUE = re.compile(r"(?:Adding requests|Processed prompts)[^\]]*\]")
_LMCACHE_HEADER = re.compile(
    rf"(?:\[?(?:(\d{{4}})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)(?:,\d+)?|[^\]\s]*(?: [^\]\s]*)?)\] ?)?LMCache ({_LEVELS}): ?"
    rf"|({_LEVELS}) LMCache: ")
_LMCACHE_TRAILER = re.compile(r" \(([\w.-]+\.py):(\d+):[\w.]+\)$| \[[^\]]*\] -- \S*?([\w.-]+\.py):(\d+)$")
_NIXL_HEADER = re.compile(rf"(\d{{4}})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)(?:[,.]\d+)? NIXL ({_LEVELS}) +([\w.-]+):(\d+) ")

# Month abbreviations as journald prints them in common locales (C/en, de, fr, es, it, pt, nl, ru, pl).
_MONTHS: dict[str, int] = {}
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
        _MONTHS[_n] = _i


@dataclass(slots=True)
class Frame:
    """One physical line, unwrapped. ``message`` is what parsers read."""

    raw: str
    message: str
    ts: float | None = None
    ts_source: str | None = None  # "rfc3339" | "journald" | "local" (a dated wrapper's zone-less stamp) | "vllm"
    host: str | None = None
    unit: str | None = None
    process: str | None = None
    pid: int | None = None
    level: str | None = None
    logger: str | None = None  # "file.py:123"
    header: str | None = None  # the exact vLLM header text, to tie continuation lines together
    uvicorn: bool = False
    clean: str = ""  # the whole line, colour and carriage returns gone
    inner_at: int = 0  # where in ``clean`` the outer wrappers end

    @property
    def inner(self) -> str:
        """The line without outer wrappers (what vLLM itself wrote); cut only when asked for."""
        return self.clean[self.inner_at:]


def pid_of(digits: str | None) -> int | None:
    """A process tag's pid; None past ten digits (no pid is that long, and Python refuses to convert
    more than 4,300)."""
    return int(digits) if digits is not None and len(digits) <= 10 else None


def strip_ansi(line: str) -> str:
    if "\x1b" in line or "^[" in line or "#033[" in line:
        line = _ANSI_ESC.sub("", line)
    # "0m"/"9m" first: every reset hint holds one, and most lines hold neither (a cheap scan).
    if ("0m" in line or "9m" in line) and "[" in line and any(h in line for h in _BARE_RESET_HINTS):
        line = _ANSI_BARE.sub("", line)
    return line


def _clean(line: str) -> str:
    if "\r" in line:
        # tqdm redraws with bare CR; only the last drawing is what a terminal shows. A process
        # prefix written before the CR belongs to the line, so keep it in front.
        head, _, tail = line.rstrip("\r\n").rpartition("\r")
        if head:
            pm = _PROCESS.match(strip_ansi(head.split("\r", 1)[0]))
            line = (pm.group(0) if pm else "") + tail
        else:
            line = tail
    return line.rstrip("\n").rstrip()


def frame_line(line: str, clock: Clock, clean: bool = False) -> Frame:
    """Peel wrappers, colour, process tag and vLLM header off one line.

    ``clean`` says the caller already knows the line holds no ESC, caret or ``#033`` colour and no
    carriage return (the pipeline checks a whole batch at once), so those checks are skipped."""
    if line[:1].isalpha() and (clean or ("\r" not in line and "\x1b" not in line and "^[" not in line
                                         and "#033[" not in line)):
        f = _frame_journald_record(line, clock)
        if f is not None:
            return f
    return frame_general(line, clock)


# A colour reset that lost its ESC: only then does the general path strip bare colour codes.
BARE_RESET = re.compile(r"\[(?:0|39|0;0)m")
_MISS = object()
NO_MONTH = object()


def _frame_journald_record(line: str, clock: Clock) -> Frame | None:
    text = line.rstrip()
    if BARE_RESET.search(text) is not None:
        return None  # colour codes that lost their ESC: the general path strips them
    m = _JOURNALD_RECORD.match(text)
    if m is None:
        return None
    when = record_time(m, text, clock)
    if when is NO_MONTH:
        return None
    host, unit, proc, pid, level = m.group(6, 7, 10, 11, 12)
    end = m.end()
    f = Frame(line, text[end:], None, None, host, unit, None, None, level, text[m.start(18):m.end(19)],
              text[m.start(12):end], False, text, m.start(9))
    if proc is not None:  # (nested tags never match: the header must follow the first tag)
        f.process, f.pid = proc, pid_of(pid)
    f.ts, f.ts_source = when
    return f


def record_time(m: re.Match, text: str, clock: Clock):
    """(time, "journald" | "vllm" | None) of a JOURNALD_RECORD_P match: the journald stamp's, else
    the vLLM header's; NO_MONTH if the month name is unknown (the general path decides then)."""
    ts = _journald_time(m, text, clock)
    if ts is NO_MONTH:
        return NO_MONTH
    if ts is not None:
        return ts, "journald"
    ts = _header_time(m, clock)
    return (ts, "vllm") if ts is not None else (None, None)


def _journald_time(m: re.Match, text: str, clock: Clock):
    # Lines of one minute share the stamp up to the seconds: that part is converted once (every
    # periodic stats line falls in a new second, but rarely in a new minute).
    minutes = clock.minutes
    key = text[:m.start(5)]
    base = minutes.get(key, _MISS)
    if base is _MISS:
        mon, day, hh, mm = m.group(1, 2, 3, 4)
        low = mon.lower()
        month = _MONTHS.get(low[:3]) or _MONTHS.get(low)
        base = clock.minute_start(month, int(day), int(hh), int(mm)) if month else NO_MONTH
        if len(minutes) > 4096:
            minutes.clear()
        minutes[key] = base
    if base is NO_MONTH:
        return base
    return clock.plus_seconds(base, int(m.group(5)))


def _header_time(m: re.Match, clock: Clock) -> float | None:
    if m.group(13) is None:
        return None
    mo, vday, vhh, vmm, vss = m.group(13, 14, 15, 16, 17)
    return clock.local(int(mo), int(vday), int(vhh), int(vmm), int(vss))


def _journald_stamp(f: Frame, m: re.Match, clock: Clock) -> bool:
    """A journald-style "Mon DD HH:MM:SS" in groups 1-5 of ``m``: its time into ``f`` (when nothing
    better is there); False when the month name is none known (then it is no journald stamp)."""
    low = m.group(1).lower()
    month = _MONTHS.get(low[:3]) or _MONTHS.get(low)
    if not month:
        return False
    if f.ts_source is None:
        ts = clock.local(month, *(int(m.group(i)) for i in range(2, 6)))
        if ts is not None:
            f.ts, f.ts_source = ts, "journald"
    return True


def _stamp_time(m: re.Match, clock: Clock):
    """(time, source) of a _STAMP_BAR match: with a zone it is an RFC 3339 stamp; without, local time."""
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


def frame_general(line: str, clock: Clock) -> Frame:
    """Every wrapper, in any order and nesting: the reference that the fast shape must agree with."""
    text = strip_ansi(_clean(line))
    f = Frame(raw=line, message=text, clean=text)

    # Outer wrappers, any order, each at most a few times (journald of a container that was started
    # with `podman logs -t` piped in, and so on).
    for _ in range(4):
        c0 = text[:1]
        if c0.isdigit():
            m = _STAMP_BAR.match(text) or _DATED_HOST_TAG.match(text)
            if m:
                if f.ts_source != "rfc3339":
                    ts = _stamp_time(m, clock)
                    if ts is not None:
                        f.ts, f.ts_source = ts
                if m.re is _DATED_HOST_TAG:
                    f.host, f.unit = m.group(9), m.group(10)
                text = text[m.end():]
                continue
            m = _RFC3339.match(text)
            if m:
                ts = Clock.rfc3339(m)
                if ts is not None and f.ts_source != "rfc3339":
                    f.ts, f.ts_source = ts, "rfc3339"
                text = text[m.end():]
                t = _CRI_TAG.match(text)
                if t:
                    text = text[t.end():]
                else:
                    t = _HOST_TAG.match(text)  # journalctl -o short-iso: the stamp, the host, the tag
                    if t:
                        f.host, f.unit = t.group(1), t.group(2)
                        text = text[t.end():]
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
            m = _SERVICE.match(text)
            if m:
                f.unit = f.unit or m.group(1)
                text = text[m.end():]
                continue
            m = _GCP_LABEL.match(text)
            if m:
                f.unit = f.unit or m.group(1)
                text = text[m.end():]
                continue
        elif c0.isalpha():
            m = _JOURNALD.match(text)
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
            if "|" in text[:64]:
                m = _COMPOSE.match(text)
                if m:
                    f.unit = f.unit or m.group(1)
                    text = text[m.end():]
                    continue
        break
    f.inner_at = len(f.clean) - len(text)

    # Process tag(s); when nested, the innermost one is the process that wrote the line.
    if text[:1] == "(":
        m = _PROCESS.match(text)
        while m:
            proc, pid = m.groups()
            f.process, f.pid = proc, pid_of(pid)
            text = text[m.end():]
            m = _PROCESS.match(text) if text[:1] == "(" else None
    if text[:1] == "[":
        m = _RANK.match(text)
        if m:
            text = text[m.end():]

    c0 = text[:1]
    if "LMCache" in text[:240]:
        rest = _lmcache_header(f, text, clock)
        if rest is not None:
            f.message = rest
            return f
    if c0 in "DIWEC" and c0:
        m = _VLLM_HEADER.match(text)
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
            text = text[end:]
        else:
            m = _UVICORN.match(text)
            if m:
                f.level = m.group(1)
                f.uvicorn = True
                text = text[m.end():]
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
                m = _NIXL_HEADER.match(text)
                if m:
                    f.level = m.group(7)
                    f.logger = f"{m.group(8)}:{m.group(9)}"
        if m:
            f.header = m.group(0)
            if f.ts_source is None:
                try:
                    ts = plausible(datetime(*(int(m.group(i)) for i in range(1, 7)), tzinfo=clock.tz).timestamp())
                except (ValueError, OverflowError, OSError):
                    ts = None
                if ts is not None:
                    f.ts, f.ts_source = ts, "vllm"
            text = text[m.end():]
    f.message = text
    return f


def _lmcache_header(f: Frame, text: str, clock: Clock) -> str | None:
    """LMCache's record header at the start of ``text`` (after vLLM's process tag, where framing reads a
    vLLM header): its level, its file and line from the record's end, its stamp; the message without
    them. None when ``text`` does not start with one."""
    start = 0
    m = _PROGRESS_GLUE.match(text)
    if m is not None:  # the bar's redraw was lost: what follows it is the line
        start = m.end()
        p = _PROCESS.match(text, start)
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
            f.ts = datetime(*(int(m.group(i)) for i in range(1, 7)), tzinfo=clock.tz).timestamp()
            f.ts_source = "vllm"
        except ValueError:
            pass
    text = text[m.end():]
    t = _LMCACHE_TRAILER.search(text)
    if t is not None:
        f.logger = f"{t.group(1)}:{t.group(2)}" if t.group(1) else f"{t.group(3)}:{t.group(4)}"
        text = text[:t.start()]
    return text
