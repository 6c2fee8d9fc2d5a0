"""Prose prompts from the documentation Debian ships (read from the .deb archives).

Two forms. A question the documentation itself asks as a heading ("How do I share global
variables across modules?") is a prompt as it stands. A paragraph of running text becomes
the material of a request people make about text they have: summarize it, explain it to a
newcomer, rewrite it plainly, list its points, turn it into an email, write quiz
questions on it. The paragraph is the documentation's own; only the one-line ask is ours.

Readers: the reStructuredText sources of the Python documentation (python3.X-doc ships
them under html/_sources/) and HTML pages (Debian Reference).
"""

from __future__ import annotations

import io
import random
import re
import tarfile
from html.parser import HTMLParser
from pathlib import Path
from typing import Iterator

PARAGRAPH_CHARS = (250, 1200)
PARAGRAPH_ASKS = ["Summarize this in two sentences:", "Explain this to someone who is new to the topic:",
                  "Rewrite this paragraph in plain English:", "What are the main points of this text?",
                  "Turn this into a short, friendly email to a colleague:",
                  "Write three quiz questions, with answers, about this text:",
                  "Explain the following, with an example:"]
_HEADING_RULE = re.compile(r"^([=\-~^*+#\"'`])\1{2,}\s*$")


def deb_members(deb: Path, suffixes: tuple[str, ...]) -> Iterator[tuple[str, str]]:
    """(path, text) of the files in a .deb's data archive whose names end with `suffixes`."""
    for name, payload in _ar_members(deb.read_bytes()):
        if name.startswith("data.tar"):
            with tarfile.open(fileobj=io.BytesIO(payload)) as tar:
                for member in tar.getmembers():
                    if member.isfile() and member.name.endswith(suffixes):
                        data = tar.extractfile(member).read()
                        yield member.name.lstrip("./"), data.decode("utf-8", errors="replace")


def _ar_members(blob: bytes) -> Iterator[tuple[str, bytes]]:
    if not blob.startswith(b"!<arch>\n"):
        raise ValueError("not a Debian package (no ar header)")
    at = 8
    while at + 60 <= len(blob):
        header = blob[at:at + 60]
        name, size = header[:16].decode().strip().rstrip("/"), int(header[48:58].decode().strip())
        yield name, blob[at + 60:at + 60 + size]
        at += 60 + size + (size % 2)


def rst_units(text: str) -> Iterator[tuple[str, str]]:
    """("question", heading) and ("paragraph", text) from a reStructuredText file."""
    lines = text.splitlines()
    for i in range(1, len(lines)):
        title = lines[i - 1].strip()
        if _HEADING_RULE.match(lines[i]) and title and len(lines[i].strip()) >= len(title) and title.endswith("?"):
            yield "question", _clean_rst(title)
    for block in re.split(r"\n\s*\n", text):
        block_lines = block.splitlines()
        if not block_lines or any(line.startswith((" ", "\t")) for line in block_lines):
            continue  # code, quotes, directive bodies
        first = block_lines[0]
        if first.startswith(("..", "* ", "- ", "+ ", "|", "=", ">>>")) or re.match(r"^\d+\.|^#\.", first) \
                or any(_HEADING_RULE.match(line) for line in block_lines) or block.rstrip().endswith("::"):
            continue
        paragraph = _clean_rst(" ".join(line.strip() for line in block_lines))
        if _is_prose(paragraph):
            yield "paragraph", paragraph


def _clean_rst(text: str) -> str:
    text = re.sub(r":[\w:+-]+:`~?!?([^`<]*?)\s*(?:<[^>]*>)?`", r"\1", text)  # :func:`x` -> x
    text = re.sub(r"`([^`<]+?)\s*<[^>]+>`_+", r"\1", text)  # `text <url>`_ -> text
    text = re.sub(r"``([^`]+)``", r"\1", text)
    text = re.sub(r"`([^`]+)`_*", r"\1", text)
    text = re.sub(r"\[#\w*\]_", "", text)
    return " ".join(text.split())


def _is_prose(text: str) -> bool:
    low, high = PARAGRAPH_CHARS
    return (low <= len(text) <= high and text.count(". ") >= 1 and text[-1] in ".!?:"
            and sum(c.isalpha() or c == " " for c in text) / len(text) > 0.85)


class _Paragraphs(HTMLParser):
    def __init__(self):
        super().__init__()
        self.paragraphs: list[str] = []
        self._depth, self._text = 0, []

    def handle_starttag(self, tag, attrs):
        if tag == "p":
            self._depth, self._text = 1, []
        elif self._depth and tag in ("pre", "table", "ul", "ol"):
            self._depth = 0  # a paragraph holding code or a list is not running text

    def handle_endtag(self, tag):
        if tag == "p" and self._depth:
            self.paragraphs.append(" ".join("".join(self._text).split()))
            self._depth = 0

    def handle_data(self, data):
        if self._depth:
            self._text.append(data)


def html_units(text: str) -> Iterator[tuple[str, str]]:
    parser = _Paragraphs()
    parser.feed(text)
    for paragraph in parser.paragraphs:
        if _is_prose(paragraph):
            yield "paragraph", paragraph


def prompt_for(form: str, text: str, item: str, seed: int) -> str:
    if form == "question":
        return text
    r = random.Random(f"{seed}:{item}")
    return f"{r.choice(PARAGRAPH_ASKS)}\n\n{text}"
