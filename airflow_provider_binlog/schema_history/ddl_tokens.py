"""DDL text into tokens, and the token cursor the DDL parsers read them with.

The text is split by sqlglot's MySQL tokenizer (quoting, escapes, comments and literals as the
server reads them), after the markers of executable comments are dropped."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from sqlglot.dialects.mysql import MySQL
from sqlglot.errors import TokenError
from sqlglot.tokens import TokenType

from .ddl_model import TableRef
from .errors import DdlSyntaxError

_TOKENIZER = MySQL().tokenizer

_PUNCT = {TokenType.L_PAREN: "(", TokenType.R_PAREN: ")", TokenType.COMMA: ",",
          TokenType.DOT: ".", TokenType.EQ: "=", TokenType.SEMICOLON: ";", TokenType.DASH: "-",
          TokenType.PLUS: "+"}


@dataclass(frozen=True)
class Tok:
    kind: str    # "word" (unquoted), "ident" (`quoted`), "string", "number", "bits", "hex", or a punctuation text
    text: str

    @property
    def word(self) -> str:
        return self.text.upper() if self.kind == "word" else ""

    @property
    def is_name(self) -> bool:
        return self.kind in ("word", "ident")


def unwrap_executable_comments(sql: str) -> str:
    """``/*!50100 KEY_BLOCK_SIZE=8 */`` and MariaDB's ``/*M!100100 ... */`` hold SQL the server
    runs: keep their content, drop the markers (outside quoted text only)."""
    out = []
    i, n = 0, len(sql)
    quote = None
    while i < n:
        c = sql[i]
        if quote:
            out.append(c)
            if c == "\\" and quote != "`" and i + 1 < n:
                out.append(sql[i + 1])
                i += 2
                continue
            if c == quote:
                quote = None
            i += 1
            continue
        if c in "'\"`":
            quote = c
            out.append(c)
            i += 1
            continue
        if sql.startswith("/*!", i) or sql.startswith("/*M!", i):
            j = i + (3 if sql[i + 2] == "!" else 4)
            while j < n and sql[j].isdigit():
                j += 1
            end = sql.find("*/", j)
            if end < 0:
                end = n
            out.append(" " + sql[j:end] + " ")
            i = end + 2
            continue
        out.append(c)
        i += 1
    return "".join(out)


def tokenize(sql: str) -> list[Tok]:
    text = unwrap_executable_comments(sql)
    try:
        raw = _TOKENIZER().tokenize(text)
    except TokenError as exc:
        raise DdlSyntaxError(f"cannot tokenize the statement: {exc}") from None
    out = []
    for t in raw:
        tt = t.token_type
        if tt in _PUNCT:
            out.append(Tok(_PUNCT[tt], _PUNCT[tt]))
        elif tt == TokenType.IDENTIFIER:
            out.append(Tok("ident", t.text))
        elif tt == TokenType.STRING and text[t.start:t.start + 1] not in ("'", '"'):
            # the tokenizer hands the rest of a command (REPLACE ..., RENAME ...) over as one
            # piece: split it too
            out.extend(tokenize(t.text))
        elif tt in (TokenType.STRING, TokenType.NATIONAL_STRING):
            out.append(Tok("string", t.text))
        elif tt == TokenType.NUMBER:
            out.append(Tok("number", t.text))
        elif tt == TokenType.BIT_STRING:
            out.append(Tok("bits", t.text))
        elif tt == TokenType.HEX_STRING:
            out.append(Tok("hex", t.text))
        elif t.text and (t.text[0].isalnum() or t.text[0] in "_$@"):
            # the tokenizer joins some keyword pairs ("PRIMARY KEY", "DOUBLE PRECISION")
            out.extend(Tok("word", part) for part in t.text.split())
        else:
            out.append(Tok(t.text, t.text))
    if out and out[-1].kind == ";":
        out.pop()
    return out


def tokenize_head(sql: str) -> list[str]:
    """The first word of ``sql`` (after comments), upper case."""
    i, n = 0, len(sql)
    while i < n:
        if sql[i].isspace():
            i += 1
        elif sql.startswith("/*", i) and not sql.startswith("/*!", i) and not sql.startswith("/*M!", i):
            end = sql.find("*/", i + 2)
            i = n if end < 0 else end + 2
        elif sql.startswith("--", i) or sql[i] == "#":
            end = sql.find("\n", i)
            i = n if end < 0 else end + 1
        else:
            break
    if sql.startswith("/*", i):  # an executable comment first: tokenize properly
        toks = tokenize(sql)
        return [toks[0].word] if toks and toks[0].kind == "word" else []
    j = i
    while j < n and (sql[j].isalpha()):
        j += 1
    return [sql[i:j].upper()] if j > i else []


class TokenParser:
    """A cursor over the tokens of one statement (or of a part of one)."""

    def __init__(self, tokens: list[Tok]) -> None:
        self.t = tokens
        self.i = 0

    # -- token access ------------------------------------------------------------------------
    def peek(self, k: int = 0) -> Optional[Tok]:
        j = self.i + k
        return self.t[j] if j < len(self.t) else None

    def at_end(self) -> bool:
        return self.i >= len(self.t)

    def word(self, k: int = 0) -> str:
        tok = self.peek(k)
        return tok.word if tok else ""

    def next(self) -> Tok:
        tok = self.peek()
        if tok is None:
            raise DdlSyntaxError("the statement ends too early")
        self.i += 1
        return tok

    def accept(self, *words: str) -> bool:
        """Consume the words in sequence when they all follow."""
        for k, w in enumerate(words):
            if self.word(k) != w:
                return False
        self.i += len(words)
        return True

    def accept_punct(self, text: str) -> bool:
        tok = self.peek()
        if tok is not None and tok.kind == text:
            self.i += 1
            return True
        return False

    def expect_punct(self, text: str) -> None:
        if not self.accept_punct(text):
            raise DdlSyntaxError(f"expected {text!r} {self._here()}")

    def expect(self, *words: str) -> None:
        if not self.accept(*words):
            raise DdlSyntaxError(f"expected {' '.join(words)} {self._here()}")

    def _here(self) -> str:
        tok = self.peek()
        return f"at {tok.text!r}" if tok else "at the end of the statement"

    def name(self) -> str:
        tok = self.next()
        if tok.kind in ("word", "ident", "number"):
            return tok.text
        if tok.kind == "string":  # 'name' is accepted where an identifier is expected
            return tok.text
        raise DdlSyntaxError(f"expected a name at {tok.text!r}")

    def table_ref(self) -> TableRef:
        first = self.name()
        if self.accept_punct("."):
            return TableRef(first, self.name())
        return TableRef(None, first)

    def skip_balanced(self) -> list[Tok]:
        """Consume a parenthesised group (the current token is its "(")."""
        start = self.i
        self.expect_punct("(")
        depth = 1
        while depth:
            tok = self.next()
            if tok.kind == "(":
                depth += 1
            elif tok.kind == ")":
                depth -= 1
        return self.t[start:self.i]

    def split_top_level(self, stop_words: frozenset = frozenset()) -> list[list[Tok]]:
        """The remaining tokens split at top-level commas (stop at a closing parenthesis of
        depth 0, left unconsumed, or at one of ``stop_words`` at depth 0)."""
        parts: list[list[Tok]] = [[]]
        depth = 0
        while not self.at_end():
            tok = self.peek()
            if depth == 0 and tok.kind == ")":
                break
            if depth == 0 and tok.word in stop_words and parts[-1]:
                break
            self.i += 1
            if tok.kind == "(":
                depth += 1
            elif tok.kind == ")":
                depth -= 1
            if depth == 0 and tok.kind == ",":
                parts.append([])
                continue
            parts[-1].append(tok)
        return [p for p in parts if p]


__all__ = ["Tok", "TokenParser", "tokenize", "tokenize_head", "unwrap_executable_comments"]
