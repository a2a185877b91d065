"""A request vLLM refused because of the client: the model it named is not served.

A client's mistake, not the server's, though vLLM logs it at ERROR: kept apart so that it is not
counted with the server's own error messages. vLLM logs ``"Error with model %s"`` with the
``ErrorResponse`` it sends back, which prints as pydantic's ``str()`` of it:

- 0.32 (``entrypoints/openai/chat_completion/serving.py:274``, ``responses/serving.py:334``,
  ``chat_completion/batch_serving.py:67``, ``scale_out/token_in_token_out/serving.py:184``,
  ``scale_out/render/serving.py:91``): ``Error with model error=ErrorInfo(message='The model
  `no-such-model` does not exist. Valid aliases: tiny-llama.', type='NotFoundError', param='model',
  code=404)`` (the nested ``ErrorInfo`` since about 0.10.2; checked against 0.32's own classes).
- before: ``Error with model object='error' message='The model `x` does not exist.'
  type='NotFoundError' param=None code=404`` (a flat ``ErrorResponse``).

0.32's ``/v1/completions`` refuses an unknown model without this line (``completion/serving.py:101``
returns the error silently): only its access-log 404 shows it. The message and the model name are
the client's text: fields to read, never labels.
"""

from __future__ import annotations

from exporter.parsers.events import Event
from exporter.framing.frame import Frame
from exporter.parsers._values import literal_eval
from exporter.parsers.base import NO_LEVEL, Parser, lazy_compile, where

# A Python repr of a str: single quotes unless the text holds one and no double quote; \-escapes.
_STR = r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\""
_SEP = r"(?:, | )"
_ERROR = lazy_compile(
    rf"^Error with model (?:error=ErrorInfo\(|object='error' )message=({_STR}){_SEP}type=({_STR}){_SEP}"
    rf"param=(None|{_STR}){_SEP}code=(\d+)")
_MODEL = lazy_compile(r"^The model `([^`]*)` does not exist")


def _text(literal: str) -> str:
    """The text of a str repr the pattern matched (a long one unescaped only as far as kept)."""
    if len(literal) > 2000:
        return literal[1:2000]
    try:
        v = literal_eval(literal)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return literal[1:-1]
    return v if isinstance(v, str) else literal[1:-1]


def _parse(frame: Frame) -> list[Event] | None:
    m = _ERROR.match(frame.message)
    if not m:
        return None
    message = _text(m.group(1))
    fields: dict = {"status": int(m.group(4)[:6]), "error_type": _text(m.group(2))[:100], "message": message[:300]}
    if m.group(3) != "None":
        fields["param"] = _text(m.group(3))[:100]
    mm = _MODEL.match(message)
    if mm:
        fields["model"] = mm.group(1)[:200]
    return [Event("request_error", fields)]


PARSER = Parser("request_error", ("Error with model ",), _parse, where(("ERROR", NO_LEVEL), start="Error with model "))
