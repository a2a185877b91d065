"""What a parser is: cheap substrings to test first, then a function from frame to events."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from exporter.parsers.events import Event
from exporter.framing.frame import Frame


@dataclass(frozen=True, slots=True)
class Parser:
    """``needles``: a line can only match if it contains one of them (checked before any regex).

    ``parse`` returns the events of the line, or None when the line is not of this family after all.
    """

    name: str
    needles: tuple[str, ...]
    parse: Callable[[Frame], list[Event] | None]
