"""The project's Markdown pages as GitHub shows them: their headings' anchors, links, code blocks
and inline code, parsed with markdown-it (CommonMark with GitHub's tables), and the reference
page's generator (docs/make_reference.py) for what the code declares."""
from __future__ import annotations

import importlib.util
import re
import sys
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from types import ModuleType

from markdown_it import MarkdownIt

ROOT = Path(__file__).resolve().parents[3]


def manual() -> list[Path]:
    """The pages that describe the code as it is: the README, CONTRIBUTING.md and docs/ with its
    subdirectories (the how-to guides)."""
    return [p for p in (ROOT / "README.md", ROOT / "CONTRIBUTING.md") if p.exists()] \
        + sorted((ROOT / "docs").rglob("*.md"))


def pages() -> list[Path]:
    """Every page whose links must resolve: the manual and the changelog."""
    return manual() + [ROOT / "CHANGELOG.md"]


def name(path: Path) -> str:
    return str(path.relative_to(ROOT))


def slug(text: str) -> str:
    """GitHub's anchor of a heading with this text (github-slugger): lower case, every
    character but letters, digits, ``_``, ``-`` and spaces dropped, each space a ``-``."""
    kept = (c for c in text.lower() if c in " -_" or unicodedata.category(c)[0] in "LMN")
    return "".join(kept).replace(" ", "-")


@dataclass(frozen=True)
class Link:
    target: str
    line: int


@dataclass(frozen=True)
class Block:
    info: str    # a fence's language ("python"), "" for an indented block
    code: str
    line: int    # of the block's first line in the page, from 1
    fenced: bool

    @property
    def language(self) -> str:
        return self.info.split()[0].lower() if self.info.strip() else ""


@dataclass(frozen=True)
class Inline:
    code: str
    line: int


@dataclass(frozen=True)
class Page:
    path: Path
    text: str
    anchors: frozenset[str]
    links: tuple[Link, ...]
    blocks: tuple[Block, ...]
    inline: tuple[Inline, ...]


_PARSER = MarkdownIt("commonmark").enable("table")
_HTML_ANCHOR = re.compile(r"<a\s[^>]*\b(?:name|id)=\"([^\"]+)\"", re.I)


def _heading_text(inline) -> str:
    return "".join(" " if child.type == "softbreak" else child.content for child in inline.children or ()
                   if child.type in ("text", "code_inline", "softbreak"))


def _unique(anchor: str, seen: dict[str, int]) -> str:
    """A repeated heading's anchor gets ``-1``, ``-2``, ... as on GitHub."""
    if anchor not in seen:
        seen[anchor] = 0
        return anchor
    while True:
        seen[anchor] += 1
        candidate = f"{anchor}-{seen[anchor]}"
        if candidate not in seen:
            seen[candidate] = 0
            return candidate


@lru_cache(maxsize=None)
def parse(path: Path) -> Page:
    text = path.read_text()
    tokens = _PARSER.parse(text)
    anchors: set[str] = set()
    seen: dict[str, int] = {}
    links: list[Link] = []
    blocks: list[Block] = []
    inline: list[Inline] = []
    for i, token in enumerate(tokens):
        line = token.map[0] + 1 if token.map else 0
        if token.type == "heading_open":
            anchors.add(_unique(slug(_heading_text(tokens[i + 1])), seen))
        elif token.type in ("fence", "code_block"):
            blocks.append(Block(token.info if token.type == "fence" else "", token.content, line,
                                token.type == "fence"))
        elif token.type == "html_block":
            anchors.update(_HTML_ANCHOR.findall(token.content))
        elif token.type == "inline":
            for child in token.children or ():
                if child.type == "link_open":
                    links.append(Link(str(child.attrs.get("href", "")), line))
                elif child.type == "image":
                    links.append(Link(str(child.attrs.get("src", "")), line))
                elif child.type == "code_inline":
                    inline.append(Inline(child.content, line))
                elif child.type == "html_inline":
                    anchors.update(_HTML_ANCHOR.findall(child.content))
    return Page(path, text, frozenset(anchors), tuple(links), tuple(blocks), tuple(inline))


@lru_cache(maxsize=None)
def generator() -> ModuleType:
    """docs/make_reference.py, imported."""
    spec = importlib.util.spec_from_file_location("make_reference", ROOT / "docs" / "make_reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("make_reference", module)
    spec.loader.exec_module(module)
    return module


def table(text: str, header: str) -> list[list[str]]:
    """The rows (cells stripped) of the Markdown table whose first header cell is ``header``."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and cells[0] == header and i + 1 < len(lines) and set(lines[i + 1]) <= set("|-: "):
            rows = []
            for row in lines[i + 2:]:
                if not row.startswith("|"):
                    break
                rows.append([c.strip() for c in re.split(r"(?<!\\)\|", row.strip().strip("|"))])
            return rows
    raise AssertionError(f"no table with the header {header!r}")
