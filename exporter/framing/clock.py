"""Log time: year-less, zone-less stamps (journald's, vLLM's header) and RFC 3339 stamps to unix seconds."""

from __future__ import annotations

import re
import time
from datetime import datetime, timedelta, timezone, tzinfo


class Clock:
    """Turns year-less local timestamps into unix seconds.

    journald and vLLM print neither year nor zone. The year comes from ``year`` (default: the
    current one, stepping back a year when the date would lie in the future, so a December log read
    in January lands in the right year). The zone is ``tz`` (default: this machine's local zone).
    """

    def __init__(self, year: int | None = None, tz: tzinfo | None = None, now: float | None = None):
        self.fixed_year = year
        self.tz = tz
        self._now = now
        self._cache: dict[tuple[int, int, int], float | None] = {}
        self.minutes: dict[str, object] = {}  # framing's cache: journald stamp up to the minute -> time

    def _now_ts(self) -> float:
        return self._now if self._now is not None else time.time()

    def _hour_epoch(self, year: int, month: int, day: int, hour: int) -> float | None:
        try:
            if self.tz is None:
                return time.mktime((year, month, day, hour, 0, 0, 0, 0, -1))
            return datetime(year, month, day, hour, tzinfo=self.tz).timestamp()
        except (ValueError, OverflowError):
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
                if self.fixed_year is not None:
                    base = self._hour_epoch(self.fixed_year, month, day, hour)
                else:
                    now = self._now_ts()
                    year = time.localtime(now).tm_year
                    base = self._hour_epoch(year, month, day, hour)
                    if base is not None and base > now + 86400:
                        base = self._hour_epoch(year - 1, month, day, hour)
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
            if zone is None or zone == "Z":
                tzi = timezone.utc
            else:
                sign = 1 if zone[0] == "+" else -1
                z = zone[1:].replace(":", "")
                tzi = timezone(sign * timedelta(hours=int(z[:2]), minutes=int(z[2:])))
            dt = datetime(int(y), int(mo), int(d), int(h), int(mi), min(int(s), 59), tzinfo=tzi)
        except ValueError:
            return None
        return dt.timestamp() + (float("0." + frac[1:]) if frac else 0.0)  # ".123" or ",123"
