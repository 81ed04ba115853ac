"""Mutations of scenario files: what a hurried person, an editor or a broken pipe does to them.

Each mutation takes a file's bytes and a hypothesis ``draw`` and returns new bytes. They
work on lines, so a mutated file still looks like the library file it came from and the
error it provokes is worth reading.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from hypothesis import strategies as st

Mutation = Callable[[bytes, st.DrawFn], bytes]

KEY_LINE = re.compile(rb"^(\s*(?:-\s+)?)([A-Za-z_][A-Za-z0-9_]*)(:)(.*)$")
NUMBER = re.compile(rb"(?<![\w.])-?\d+(?:\.\d+)?(?![\w.])")

SWAPPED_VALUES = [
    b"[]", b"{}", b"[1, 2]", b"{a: 1}", b"42", b"-1", b"0", b"3.5", b'"text"', b"null",
    b"true", b"~", b"''", b"2024-01-01", b"2024-01-01T10:00:00Z", b"!!binary /w==",
    b"!!set {a, b}", b"!!omap [a: 1]", b"!!python/object:os.system", b"*undefined",
    b"&anchor 1", b"!custom tag", b"|\n  block text", b">-", b"- a\n- b",
]
HUGE_NUMBERS = [
    b"1e400", b"-1e400", b".inf", b"-.inf", b".nan", b"1e308", b"99999999999999999999999999",
    b"-99999999999999999999", b"0x7fffffffffffffff", b"1_000_000_000_000", b"4.9e-324",
    b"0.0000000000001",
]
CONTROL = [chr(c) for c in range(32) if chr(c) not in "\n"] + [
    "\x7f", "\x85", "\u2028", "\u2029", "\ufeff", "\u200b", "\ud7ff", "\U0010ffff",
]
BAD_UTF8 = [b"\xff", b"\xfe", b"\xc3", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xc0\xaf", b"\x80"]


def _lines(data: bytes) -> list[bytes]:
    return data.split(b"\n")


def _pick(draw: st.DrawFn, n: int) -> int:
    return draw(st.integers(0, max(0, n - 1)))


def delete_line(data: bytes, draw: st.DrawFn) -> bytes:
    """Drop one line."""
    lines = _lines(data)
    del lines[_pick(draw, len(lines))]
    return b"\n".join(lines)


def duplicate_line(data: bytes, draw: st.DrawFn) -> bytes:
    """Write one line twice (a repeated key, usually)."""
    lines = _lines(data)
    i = _pick(draw, len(lines))
    lines.insert(i, lines[i])
    return b"\n".join(lines)


def swap_lines(data: bytes, draw: st.DrawFn) -> bytes:
    """Exchange two neighbouring lines."""
    lines = _lines(data)
    i = _pick(draw, len(lines) - 1)
    if i + 1 < len(lines):
        lines[i], lines[i + 1] = lines[i + 1], lines[i]
    return b"\n".join(lines)


def reindent(data: bytes, draw: st.DrawFn) -> bytes:
    """Shift one line's indentation, or indent it with a tab."""
    lines = _lines(data)
    i = _pick(draw, len(lines))
    delta = draw(st.sampled_from([-4, -2, -1, 1, 2, 4, 0]))
    body = lines[i].lstrip(b" ")
    indent = len(lines[i]) - len(body)
    lines[i] = b"\t" + body if delta == 0 else b" " * max(0, indent + delta) + body
    return b"\n".join(lines)


def _key_lines(lines: list[bytes]) -> list[int]:
    return [i for i, line in enumerate(lines) if KEY_LINE.match(line)]


def misspell_key(data: bytes, draw: st.DrawFn) -> bytes:
    """Misspell one key: a letter dropped, doubled, swapped or changed."""
    lines = _lines(data)
    candidates = _key_lines(lines)
    if not candidates:
        return data
    i = draw(st.sampled_from(candidates))
    match = KEY_LINE.match(lines[i])
    assert match is not None
    key = match[2]
    j = _pick(draw, len(key))
    how = draw(st.sampled_from(["drop", "double", "swap", "change", "case"]))
    if how == "drop" and len(key) > 1:
        key = key[:j] + key[j + 1:]
    elif how == "double":
        key = key[: j + 1] + key[j:]
    elif how == "swap" and j + 1 < len(key):
        key = key[:j] + key[j + 1 : j + 2] + key[j : j + 1] + key[j + 2 :]
    elif how == "case":
        key = key.upper()
    else:
        key = key[:j] + b"x" + key[j + 1 :]
    lines[i] = match[1] + key + match[3] + match[4]
    return b"\n".join(lines)


def swap_type(data: bytes, draw: st.DrawFn) -> bytes:
    """Give one key a value of another type (or a YAML tag, an alias, a block)."""
    lines = _lines(data)
    candidates = _key_lines(lines)
    if not candidates:
        return data
    i = draw(st.sampled_from(candidates))
    match = KEY_LINE.match(lines[i])
    assert match is not None
    value = draw(st.sampled_from(SWAPPED_VALUES))
    lines[i] = match[1] + match[2] + match[3] + b" " + value
    return b"\n".join(lines)


def huge_number(data: bytes, draw: st.DrawFn) -> bytes:
    """Replace one number with a huge, tiny, infinite or not-a-number one."""
    spots = list(NUMBER.finditer(data))
    if not spots:
        return data
    spot = draw(st.sampled_from(spots))
    return data[: spot.start()] + draw(st.sampled_from(HUGE_NUMBERS)) + data[spot.end() :]


def control_character(data: bytes, draw: st.DrawFn) -> bytes:
    """Insert a control or unusual Unicode character somewhere (NUL included)."""
    text = data.decode("utf-8", "surrogateescape")
    i = _pick(draw, len(text) + 1)
    char = draw(st.sampled_from(CONTROL))
    return (text[:i] + char + text[i:]).encode("utf-8", "surrogateescape")


def invalid_utf8(data: bytes, draw: st.DrawFn) -> bytes:
    """Insert bytes that are not UTF-8."""
    i = _pick(draw, len(data) + 1)
    return data[:i] + draw(st.sampled_from(BAD_UTF8)) + data[i:]


def truncate(data: bytes, draw: st.DrawFn) -> bytes:
    """Cut the file short (a partial write)."""
    return data[: _pick(draw, len(data))]


def deep_nesting(data: bytes, draw: st.DrawFn) -> bytes:
    """Replace one value with lists or mappings nested very deep."""
    lines = _lines(data)
    candidates = _key_lines(lines)
    if not candidates:
        return data
    i = draw(st.sampled_from(candidates))
    match = KEY_LINE.match(lines[i])
    assert match is not None
    depth = draw(st.sampled_from([50, 120, 400, 3000]))
    value = b"[" * depth + b"1" + b"]" * depth
    if draw(st.booleans()):
        value = b"{a: " * depth + b"1" + b"}" * depth
    lines[i] = match[1] + match[2] + match[3] + b" " + value
    return b"\n".join(lines)


def alias_bomb(data: bytes, draw: st.DrawFn) -> bytes:
    """Replace one value with anchors and aliases that expand exponentially (on one line)."""
    lines = _lines(data)
    candidates = _key_lines(lines)
    if not candidates:
        return data
    i = draw(st.sampled_from(candidates))
    match = KEY_LINE.match(lines[i])
    assert match is not None
    lines[i] = match[1] + match[2] + match[3] + b" " + laughs(draw(st.integers(3, 7)))
    return b"\n".join(lines)


def laughs(levels: int, width: int = 9) -> bytes:
    """A flow sequence whose last item expands to ``width ** levels`` strings."""
    parts = [b"&l0 [" + b", ".join([b"lol"] * width) + b"]"]
    for level in range(1, levels):
        parts.append(b"&l%d [" % level + b", ".join([b"*l%d" % (level - 1)] * width) + b"]")
    return b"[" + b", ".join(parts) + b"]"


MUTATIONS: dict[str, Mutation] = {
    "delete_line": delete_line,
    "duplicate_line": duplicate_line,
    "swap_lines": swap_lines,
    "reindent": reindent,
    "misspell_key": misspell_key,
    "swap_type": swap_type,
    "huge_number": huge_number,
    "control_character": control_character,
    "invalid_utf8": invalid_utf8,
    "truncate": truncate,
    "deep_nesting": deep_nesting,
    "alias_bomb": alias_bomb,
}
