"""How long each stats window was, read from the log instead of assumed.

vLLM's ``LoggingStatLogger`` (``v1/metrics/loggers.py``, read in 0.29-0.34: unchanged in this) prints each window's
throughput as the tokens it counted since its last ``log()`` call over the time since that call.
The API server calls ``log()`` every ``VLLM_LOG_STATS_INTERVAL`` seconds (an ``asyncio.sleep``
loop in the app's lifespan), so a window is one interval, except:

- the first call's window runs from the logger's creation, when the API server got its engine
  client (7 ms before its ``Supported tasks: [...]`` line on a sub-second-stamped 0.32 run here;
  0.4 s after the engine core's ``init engine (...) took N s`` line), to one interval after the
  HTTP server came up (0.45-0.6 s after ``Supported tasks`` on the JSON captures here): longer than
  the interval by the API server's own start-up. But that first call is seen only when it had
  tokens to report: the logger's ``last_log_time`` is reset at every call, hidden ones included,
  so a first visible line 1.5 intervals or more after the ready line (clients came later) follows
  hidden calls, and its window is one interval, whatever the gap to the ready line (a 0.32 run
  here: ready at :15, first line at :20, interval 2 s: 2 s, not 5);
- a window whose throughputs and the previous window's are all 0 is logged at DEBUG: hidden. So
  after a line with non-zero throughput the next line always comes one interval later (only these
  gaps measure the interval), and a line after an all-zero line may follow hidden windows: its own
  window is still one interval.

Tokens are throughput x window, the window being: after a busy line, the gap to it when the stamps
carry sub-second time (journald, CRI, JSON records), else the interval the log shows (the mean of
the gaps after busy lines: whole-second stamps' rounding averages out; the configured interval while
their sum is within a second of it, as a run of truncated stamps allows) unless the gap is more than
a second off it (the loop held up: the gap), and not past two intervals (lines lost, a hang: the
interval); after an all-zero line, the interval; for the first line after a start, the time since
the engine's ready line when that is under 1.5 intervals and half a second (a second more for
whole-second stamps: the logger's first call; 1.5 intervals from uvicorn's ``Application startup
complete.`` when its record carries a stamp of its own: the loop starts there, however long the API
server's start-up took), else the interval (hidden calls came before it). With whole-second stamps
that time is the difference of two truncated stamps: the true one lies within a second of it (a
triangle: both fractions unknown), and it is never shorter than the interval (the logger exists
before the loop that calls it starts): the first window is the mean of that triangle above the
interval (``first_window``): 1/3 s more when the stamps' difference is the interval itself (0.30-0.32
runs here, where the window was 0.46-0.72 s longer), nothing when it is a second more. The interval
the log shows replaces the configured one (``--stats-interval``) once ``MIN_GAPS`` gaps agree; when
they differ by more than ``DISAGREE`` the exporter warns once per server.

The first window is decided late. Both the choice (first call or hidden calls before it) and the
length depend on vLLM's interval, which the configured one may not be: vLLM at 2 s, the exporter at
its default 10 s, a first line 11 s after the ready line fits a first call of a 10 s logger (11 s)
where vLLM's window was 2 s (+7 % generated tokens on the run captured). Sub-second stamps do not
decide it at once either: the line comes k intervals after the loop's start, k and the interval both
unknown. So ``window`` gives the first line 0 s and keeps what it needs (``first_pending``); the
window is decided when the log shows the interval (after a busy line the next always comes one
interval later: on a busy start, the third line) and handed over once (``take_first``: the caller
holds the line's throughputs until then). When no line will show it (``settle``: the input ended, the
server stopped or starts again, its engine went quiet), it is decided with the best interval known:
as the log shows it, else as another engine of the server shows it (one loop logs them all), else the
shortest gap after a busy line (a held-up loop or lost lines make gaps longer, never shorter) unless
past two configured intervals, else the configured one (a first call then counts the stamps'
difference as it stands).

The windows after it, until the log shows the interval (on a busy start, the second), are counted by the
configured one: a gap over two of them is capped at one (lines lost?), a gap within a second of it rounded to
it. When the next gap shows vLLM's interval and the last gap fits it, that window was vLLM's longer interval,
not lines lost: the seconds it was counted short of are owed once (``take_owed``: the caller counts its last
line's throughputs over them). Told 1 s, a 5 s vLLM's capture counted 32 % fewer generated tokens without this.
Seconds counted too long (a shorter vLLM interval) cannot be taken back from a counter, and need none: a gap is
its own window unless it is over two intervals or within a second of one. Pure bookkeeping: events' log times
in, seconds out.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from collections import deque
from typing import Callable

MIN_GAPS = 2  # gaps after busy lines before the log's interval replaces the configured one
MAX_GAPS = 32  # the recent gaps the estimate is made of (vLLM's interval can change at a restart only)
DISAGREE = 0.1  # relative difference between the log's interval and the configured one worth a warning
# A first line this many intervals (plus half a second of the API server's start-up, a second for
# whole-second stamps) after the ready line or later is not the logger's first call: its first calls
# were all-zero windows that vLLM logged at DEBUG, and its own window is one interval.
FIRST_CALL = 1.5

Key = tuple  # (server, engine)


class StatsClock:
    def __init__(self, configured: float, warn: Callable[[str, float, float], None] | None = None):
        self.configured = configured
        self.warn = warn  # (server, the log's interval, the configured one), once per server
        self._last: dict[Key, tuple[float, bool]] = {}  # log time of the key's last line, was it busy
        self._gaps: dict[Key, deque] = {}
        self._ordered: dict[Key, list[float]] = {}  # the same gaps, sorted (kept so by _observe: no sort a line)
        self._judged: dict[Key, bool] = {}  # the precision the key's gaps were last judged with (_observe)
        self._interval: dict[Key, float] = {}
        self._ready: dict[str, float] = {}  # log time of the server's last engine-ready line since its start
        self._loop: dict[str, float] = {}  # log time its HTTP server came up (the logging loop's start), when stamped
        self._precise: set[str] = set()  # servers whose stamps carry sub-second time
        self._warned: set[str] = set()
        # a first window not yet decided: (time since the ready line or -1, since the loop's start or None)
        self._pending: dict[Key, tuple[float, float | None]] = {}
        self._decided: dict[Key, float] = {}  # seconds of first windows decided, not yet taken (take_first)
        # the key's last window, counted before the log showed the interval (so by the configured one: capped at
        # it past two of them, or rounded to it): (its gap, the seconds counted), until the next line (window)
        self._unsure: dict[Key, tuple[float, float]] = {}
        # seconds that window gained once the interval showed, by key (take_owed; empty on nearly every line, so
        # callers test it before they ask)
        self.owed: dict[Key, float] = {}

    def forget(self, server: str) -> None:
        """A new start: its windows begin again; what it showed is kept for the warning. A first window
        still undecided is decided first, with the best interval known (its seconds are owed: take_first)."""
        self.settle(server)
        for d in (self._last, self._gaps, self._ordered, self._interval, self._judged, self._unsure, self.owed):
            for key in [k for k in d if k[0] == server]:
                del d[key]
        self._ready.pop(server, None)
        self._loop.pop(server, None)

    def drop(self, server: str) -> None:
        """A server gone for good: nothing of it is kept, undecided first windows included (its series go too)."""
        for d in (self._pending, self._decided):
            for key in [k for k in d if k[0] == server]:
                del d[key]
        self.forget(server)
        self._precise.discard(server)
        self._warned.discard(server)

    def ready(self, server: str, ts: float | None) -> None:
        """The engine core reported ready: the first window starts about now."""
        if ts is not None:
            self._ready[server] = ts
            if ts % 1:
                self._precise.add(server)

    def serving(self, server: str, ts: float | None) -> None:
        """uvicorn's ``Application startup complete.`` with a stamp of its own (JSON records): the
        lifespan that runs vLLM's logging loop has just started, so its calls come an interval apart
        from here, whatever the API server's start-up took."""
        if ts is not None:
            self._loop[server] = ts

    def interval(self, key: Key) -> float:
        """The key's stats interval: as the log shows it, else the configured one."""
        return self._interval.get(key, self.configured)

    def shown(self, key: Key) -> float | None:
        """The key's interval as the log shows it, None until it does."""
        return self._interval.get(key)

    def window(self, key: Key, ts: float | None, busy: bool) -> float:
        """The length (s) of the window of the stats line of ``key`` logged at ``ts``; ``busy``:
        the line's prompt or generation throughput is not 0."""
        server = key[0]
        if ts is None:
            return self.interval(key)
        if ts % 1:
            self._precise.add(server)
        precise = server in self._precise
        last = self._last.get(key)
        self._last[key] = (ts, busy)
        if last is None:
            # Whether this is the logger's first call (its window: since the ready line) or hidden all-zero
            # calls came before it (one interval) depends on the interval, which the configured one may not
            # be (a 10 s setting read a 2 s vLLM's first line, 11 s after the ready line, as a first call):
            # decided once the log shows the interval, or settled (settle) when no more can be learnt.
            ready = self._ready.get(server)
            loop = self._loop.get(server)
            self._pending[key] = (ts - ready if ready is not None else -1.0,
                                  ts - loop if loop is not None and ready is not None and loop >= ready else None)
            return 0.0
        gap = ts - last[0]
        unsure = self._unsure.pop(key, None) if self._unsure else None
        if last[1] and gap > 0:
            shown = key in self._interval
            self._observe(key, gap, precise)
            est = self.interval(key)
            length = self._length(gap, est, precise)
            if not shown:
                if key in self._interval:
                    if unsure is not None:
                        # this gap showed the interval; the last window was counted by the configured one (vLLM's
                        # own setting may differ): the seconds it was short of, by the interval shown, are owed
                        # (take_owed). (Seconds it was counted too long cannot be taken back from a counter.)
                        owed = self._length(unsure[0], est, precise) - unsure[1]
                        if owed > 0:
                            self.owed[key] = owed
                else:
                    self._unsure[key] = (gap, length)
            return length
        return self.interval(key)

    @staticmethod
    def _length(gap: float, est: float, precise: bool) -> float:
        """The window a gap after a busy line stands for, the interval being ``est``."""
        if gap > 2 * est + (0 if precise else 1):
            return est  # lines lost, or the server silent (hung): the window is still one interval
        # whole seconds: a gap within the rounding of the interval is the interval
        return gap if precise or abs(gap - est) > 1.0 else est

    def take_owed(self, key: Key) -> float:
        """Seconds the key's previous window was counted short of (once: 0.0 after): it was counted by the
        configured interval (capped at it, or its gap rounded to it), and this line's gap showed vLLM's."""
        return self.owed.pop(key, 0.0) if self.owed else 0.0

    def first_pending(self, key: Key) -> bool:
        """The key's first window is not decided yet (its line's figures are worth keeping)."""
        return key in self._pending

    def pending(self) -> list[Key]:
        """The keys whose first window is not decided yet."""
        return list(self._pending)

    def take_first(self, key: Key) -> float:
        """The length (s) of the key's first window, once decided (once: 0.0 after, and before)."""
        return self._decided.pop(key, 0.0)

    def settle(self, server: str, key: Key | None = None) -> None:
        """Decide the server's first windows still pending (or ``key``'s) with the best interval known now:
        no more will be learnt (the input ended, the server stopped or starts again, the engine went quiet)."""
        for k in [k for k in self._pending if k[0] == server and (key is None or k == key)]:
            est, from_log = self._best(k)
            self._decide(k, est, from_log)

    def _best(self, key: Key) -> tuple[float, bool]:
        """The key's interval as well as the log tells it so far (and whether the log told it): as shown;
        else as another engine of the server shows it (one logging loop calls them all); else the
        shortest gap after a busy line (a held-up loop or lost lines make gaps longer, never shorter)
        unless, as in ``window``, it is past two configured intervals (lines lost); else the configured one."""
        shown = self._interval.get(key)
        if shown is not None:
            return shown, True
        for k, v in self._interval.items():
            if k[0] == key[0]:
                return v, True
        gap = min(self._gaps.get(key) or (float("inf"),))
        if gap <= 2 * self.configured + (0 if key[0] in self._precise else 1):
            return gap, True
        return self.configured, False

    def _decide(self, key: Key, est: float, from_log: bool) -> None:
        """The pending first window's length, the interval being ``est``: the logger's first call's
        (from its creation, about the ready line) or, after hidden all-zero calls, one interval."""
        since, after_loop = self._pending.pop(key)
        precise = key[0] in self._precise
        if after_loop is not None:
            first_call = after_loop < FIRST_CALL * est  # the loop's calls come at loop + k intervals
        else:
            first_call = since < FIRST_CALL * est + (0.5 if precise else 1.0)
        if 0 < since and first_call:
            # whole seconds: the mean of what the stamps allow above the interval, when the log told it
            seconds = since if precise or not from_log else first_window(since, est)
        else:
            seconds = est
        self._decided[key] = self._decided.get(key, 0.0) + seconds

    def _observe(self, key: Key, gap: float, precise: bool) -> None:
        gaps = self._gaps.get(key)
        if gaps is None:
            gaps = self._gaps[key] = deque(maxlen=MAX_GAPS)
            self._ordered[key] = []
        ordered = self._ordered[key]
        # A full window of gaps that gives up the very gap it takes holds the same gaps: the estimate made of
        # them, and what followed from it, stand (a steady log's every line: whole-second stamps repeat the gap).
        # So the estimate is spared, unless the stamps' precision changed since (it is in the slack).
        full = len(gaps) == MAX_GAPS
        same = full and gaps[0] == gap and self._judged.get(key) == precise and key not in self._pending
        if full and gaps[0] != gap:
            del ordered[bisect_left(ordered, gaps[0])]  # (the gap the deque gives up)
            insort(ordered, gap)
        elif not full:
            insort(ordered, gap)
        gaps.append(gap)
        if same:
            return
        self._judged[key] = precise
        if len(gaps) < MIN_GAPS:
            return
        median = ordered[len(ordered) // 2]
        # a gap far from the others is the event loop held up, or lines lost: not the interval
        slack = 0.5 * median + (0 if precise else 1.0)
        if precise:
            near = [g for g in gaps if abs(g - median) <= slack]
            n, total = len(near), sum(near)
        else:
            # whole-second stamps: every gap, the median and the slack are whole or half numbers, so the bounds,
            # the count and the sum (in any order) are exact: what the scan above gives, read off the sorted gaps
            lo, hi = bisect_left(ordered, median - slack), bisect_right(ordered, median + slack)
            n, total = hi - lo, sum(ordered[lo:hi])
        if n < MIN_GAPS:
            return
        est = total / n
        if not precise and abs(total - n * self.configured) <= 1.0:
            # whole-second stamps: a gap is the true one give or take a second, and a run of them the sum of its
            # gaps give or take one (a 2 s loop held up by a few ms shows a 3 s gap once its fraction wraps): while
            # the configured interval fits the gaps so, it is vLLM's (their mean, [3, 2] -> 2.5 s, counted the
            # windows after them long: +13 % generated tokens on a 2 s run here)
            est = self.configured
        self._interval[key] = est
        if key in self._pending:
            self._decide(key, est, True)
        server = key[0]
        if server not in self._warned and abs(est - self.configured) > DISAGREE * self.configured \
                and (precise or abs(est - self.configured) > 0.5):
            self._warned.add(server)
            if self.warn is not None:
                self.warn(server, est, self.configured)


def first_window(since: float, interval: float) -> float:
    """The expected length of a first window whose whole-second stamps are ``since`` apart: the true
    difference is ``since`` + (the later stamp's fraction - the earlier one's), a triangle on
    (since - 1, since + 1), and the window is at least ``interval``: the triangle's mean above it."""
    low = interval - since  # where the triangle is cut, relative to its peak
    if low <= -1.0:
        return since
    if low >= 1.0:
        return interval  # the stamps say less than the interval: take the interval
    if low >= 0.0:
        mass = (1.0 - low) ** 2 / 2
        moment = 1 / 6 - low ** 2 / 2 + low ** 3 / 3
    else:
        mass = 0.5 - low - low ** 2 / 2
        moment = 1 / 6 - low ** 2 / 2 - low ** 3 / 3
    return since + moment / mass
