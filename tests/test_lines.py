"""exporter.framing.lines: however the bytes arrive, the same lines come out."""

from hypothesis import given, settings, strategies as st

from exporter.framing.lines import CR_EVIDENCE, LineSplitter, Lines, _no_line_over, cut_line, joined

PIECES = st.sampled_from([b"\n", b"a", b"bc", b"x" * 7, b"\xc3\xa9", b"\xe2\x96\x88", b"\xff", b"\xc3", b" - \"", b"\r",
                          b"\\", b"\\u00e9", b"\\\"", b"\xf0\x9f\x98\x80", b"\0", b"\0" * 5, b"\xef\xbb\xbf", b"\xef"])


def reference(data: bytes, limit: int) -> list[str]:
    """The whole input's lines, each longer than ``limit`` cut as cut_line cuts it (head and tail),
    by exporter.framing.text's policy: CR ends the lines before the first LF when the first
    min(CR_EVIDENCE, limit) bytes hold no LF and two CRs (or the input, shorter, has no LF and a CR;
    a CR right before that LF is CRLF's), NULs dropped, a BOM at a line's start dropped."""
    evidence = min(CR_EVIDENCE, limit)
    nl = data.find(b"\n")
    window = data[:evidence]
    if (b"\n" not in window and len(window) == evidence and window.count(b"\r") >= 2) or (nl < 0 and b"\r" in data and len(data) < evidence):
        head = data if nl < 0 else data[:nl]
        head = head[:-1].replace(b"\r", b"\n") + b"\r" if nl >= 0 and head.endswith(b"\r") else head.replace(b"\r", b"\n")
        data = head + (data[nl:] if nl >= 0 else b"")
    data = data.replace(b"\0", b"")
    segments = data.split(b"\n")
    last = segments.pop()
    out = [s.decode("utf-8", "replace") if len(s) <= limit else cut_line(s, limit) for s in segments]
    if last:
        out.append(last.decode("utf-8", "replace") if len(last) <= limit else cut_line(last, limit))
    return [line[1:] if line.startswith("\ufeff") else line for line in out]


@settings(max_examples=400, deadline=None)
@given(st.lists(PIECES, max_size=80).map(b"".join), st.lists(st.integers(1, 40), min_size=1, max_size=20),
       st.integers(3, 24))
def test_any_chunking_gives_the_lines_of_the_whole(data, cuts, limit):
    split = LineSplitter("t", max_line=limit)
    out, pos, i = [], 0, 0
    while pos < len(data):
        n = cuts[i % len(cuts)]
        got = split.feed(data[pos:pos + n])
        assert joined(got) == "\n".join(got)  # the text a Lines keeps is its lines, joined
        out += got
        pos += n
        i += 1
    out += split.flush(final=True)
    assert out == reference(data, limit)


@given(st.lists(PIECES, max_size=120).map(b"".join), st.integers(2, 30))
def test_the_long_line_check_never_clears_a_long_line(data, limit):
    if _no_line_over(data, len(data), limit):
        assert all(len(line) <= limit for line in data.split(b"\n"))


def test_a_batch_changed_after_the_split_is_joined_again():
    split = LineSplitter("t")
    got = split.feed(b"a\nb\nc\n")
    assert type(got) is Lines and joined(got) is got.text
    got.append("\x1b[0m")
    assert joined(got) == "a\nb\nc\n\x1b[0m"
    assert joined(["x", "y"]) == "x\ny"


def test_a_cr_ended_over_long_line_read_byte_by_byte_keeps_the_line_after_it():
    """CR-ended lines (no LF in the first bytes, two CRs): an over-long line whose ending CR came at the end of
    one read took that CR, and the next line with it, into the line being cut (found by the test above)."""
    data = b"\r\rxxxxxxx\ra"
    split = LineSplitter("t", max_line=3)
    out = []
    for i in range(len(data)):
        out += split.feed(data[i:i + 1])
        if i == 9:  # (the CR held back is a byte read that no line has passed on)
            assert split.held == 8
    assert out + split.flush(final=True) == ["", "", "xxx", "a"] == reference(data, 3)
