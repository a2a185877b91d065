"""Log time: year-less, zone-less stamps (journald's, vLLM's header) and RFC 3339 stamps to unix seconds."""

from __future__ import annotations

import math
import re
import time
from datetime import datetime, timedelta, timezone, tzinfo

# No vLLM log was written before 2000 or will be after 2100: a stamp outside (year 1, year 58560,
# epoch milliseconds read as seconds, 1e308) is no time at all. Framing drops such a stamp (the line
# keeps its other facts, its time is unknown), so nothing downstream (a "time since" series, a
# report's dates, backfill's steps) ever sees one.
EARLIEST = 946684800.0  # 2000-01-01T00:00:00Z
LATEST = 4102444800.0  # 2100-01-01T00:00:00Z


def zone_of(zone: str | None) -> timezone:
    """An RFC 3339 stamp's zone ("Z", "+02:00", "-0800"; None: UTC); ValueError for one Python refuses."""
    if zone is None or zone == "Z":
        return timezone.utc
    z = zone[1:].replace(":", "")
    return timezone((1 if zone[0] == "+" else -1) * timedelta(hours=int(z[:2]), minutes=int(z[2:])))


def plausible(ts: float | None) -> float | None:
    """``ts`` when it is a finite time between EARLIEST and LATEST, else None."""
    return ts if ts is not None and EARLIEST <= ts <= LATEST else None  # (NaN fails both tests)


def epoch_seconds(value: float) -> float | None:
    """A number loggers write for a time (epoch seconds, milliseconds, microseconds or nanoseconds,
    told apart by size) as seconds; None when it is none of them in EARLIEST..LATEST."""
    if not math.isfinite(value):
        return None
    for scale in (1.0, 1e3, 1e6, 1e9):
        if value < LATEST * scale:
            return plausible(value / scale)
    return None


class Clock:
    """Turns year-less local timestamps into unix seconds.

    journald and vLLM print neither year nor zone. The zone is ``tz`` (default: this machine's local
    zone). The year:

    - without ``year`` (the daemon; the offline commands by default), the latest year that puts the
      stamp no more than a day after now: a December log read in January lands in December, and a
      writer's clock half a second ahead at New Year's midnight puts the new year's first lines in
      the new year. A running daemon decides each hour again (its caches are dropped every day), so
      a quiet log a year on is not dated a year back;
    - with ``year``, the log's first stamp is in that year, and each later one in the year that
      puts it nearest the stamp before it: a log that runs over New Year's midnight goes on into
      the next year (the log's own order, monotonic within a source).

    One Clock per source (``fresh()``): the stamp before is that source's.
    """

    def __init__(self, year: int | None = None, tz: tzinfo | None = None, now: float | None = None):
        self.fixed_year = year
        self.tz = tz
        self._now = now
        self._cache: dict[tuple[int, int, int], float | None] = {}
        self.minutes: dict[str, object] = {}  # framing's cache: journald stamp up to the minute -> time
        self.days: dict[str, float | None] = {}  # ... and an RFC 3339 stamp's day and zone -> its start
        self._last: float | None = None  # the last hour decided (with ``year``: the log's order)
        self._expires = 0.0  # (wall clock) when the caches are dropped, so that years are decided again

    def fresh(self) -> "Clock":
        """A Clock alike, with none of this one's memory: one per source."""
        return Clock(self.fixed_year, self.tz, self._now)

    def tick(self, now: float | None = None) -> None:
        """Called now and then by a long-running reader: once a day the caches go, and each hour's year
        is decided again against the time then."""
        now = time.time() if now is None else now
        if now >= self._expires:
            if self._expires:
                self._cache.clear()
                self.minutes.clear()
            self._expires = now + 86400.0

    def _now_ts(self) -> float:
        return self._now if self._now is not None else time.time()

    def _year_of(self, ts: float) -> int:
        if self.tz is None:
            return time.localtime(ts).tm_year
        return datetime.fromtimestamp(ts, tz=self.tz).year

    def _hour_epoch(self, year: int, month: int, day: int, hour: int) -> float | None:
        try:
            if self.tz is None:
                return plausible(time.mktime((year, month, day, hour, 0, 0, 0, 0, -1)))
            return plausible(datetime(year, month, day, hour, tzinfo=self.tz).timestamp())
        except (ValueError, OverflowError, OSError):
            return None

    def _decide(self, month: int, day: int, hour: int) -> float | None:
        """The hour's start, its year decided as the class says."""
        if self.fixed_year is not None:
            if self._last is None:
                return self._hour_epoch(self.fixed_year, month, day, hour)
            last, y = self._last, self._year_of(self._last)
            found = [b for b in (self._hour_epoch(yy, month, day, hour) for yy in (y, y + 1, y - 1)) if b is not None]
            return min(found, key=lambda b: abs(b - last)) if found else None
        now = self._now_ts()
        y = self._year_of(now)
        for year in (y + 1, y, y - 1, y - 2):  # (y - 2: a 29 February four years back)
            base = self._hour_epoch(year, month, day, hour)
            if base is not None and base <= now + 86400:
                return base
        return None

    def local(self, month: int, day: int, hour: int, minute: int, second: int) -> float | None:
        return self.plus_seconds(self.minute_start(month, day, hour, minute), second)

    @staticmethod
    def plus_seconds(start: float | None, second: int) -> float | None:
        """``second`` seconds into a minute that began at ``start`` (None: no such time)."""
        return None if start is None or second > 60 else start + second

    def minute_start(self, month: int, day: int, hour: int, minute: int) -> float | None:
        # Cached per hour: DST changes happen on hour boundaries, so minutes and seconds add linearly.
        key = (month, day, hour)
        base = self._cache.get(key, False)
        if base is False:
            base = None
            if 1 <= month <= 12 and 1 <= day <= 31 and hour < 24:
                base = self._decide(month, day, hour)
                if base is not None:
                    self._last = base
            if len(self._cache) > 4096:
                self._cache.clear()
            self._cache[key] = base
        if base is None or minute > 59:
            return None
        return base + minute * 60

    @staticmethod
    def rfc3339(m: re.Match) -> float | None:
        y, mo, d, h, mi, s, frac, zone = m.groups()
        try:
            dt = datetime(int(y), int(mo), int(d), int(h), int(mi), min(int(s), 59), tzinfo=zone_of(zone))
            ts = dt.timestamp()
        except (ValueError, OverflowError):
            return None
        return plausible(ts + (float("0." + frac[1:]) if frac else 0.0))  # ".123" or ",123"
