"""What a line came to: every line fed is accounted exactly once as one of these."""

# ``parsed``: it made (or was part of) an event; ``ignored``: recognisably vLLM/uvicorn output that carries no
# metric; ``unparsed``: nothing recognised it
PARSED, IGNORED, UNPARSED = "parsed", "ignored", "unparsed"
RESULTS = (PARSED, IGNORED, UNPARSED)
# which of a line's frames' results the line's is (the best)
_RANK = {UNPARSED: 0, IGNORED: 1, PARSED: 2}
