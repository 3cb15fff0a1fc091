"""Collation ids, character sets and Python codecs for string columns.

A TABLE_MAP event's optional metadata gives each character column a
collation id (``DEFAULT_CHARSET`` / ``COLUMN_CHARSET``, and the
``ENUM_AND_SET_*`` variants).  The character set of that collation decides
how the column's bytes become a Python ``str``:

* :data:`COLLATIONS` maps every collation id of MySQL 5.7-9.x and MariaDB
  10.x-11.x to ``(collation name, character set name)``;
  :data:`MYSQL_COLLATIONS` and :data:`MARIADB_COLLATIONS` hold each flavor's
  own ids.
* :func:`python_codec` maps a character set name to a Python codec name, or
  to ``None`` for "keep the bytes".
* :func:`charset_for_collation` / :func:`codec_for_collation` chain the two
  and raise :class:`UnknownCollationError` for an id no flavor defines.
* :func:`decode_text` decodes a value and never raises.

Flavors
-------
MySQL and MariaDB share ids 1-247.  MySQL alone has 76 (``utf8mb3_tolower_ci``),
248-250 (``gb18030``) and 255-323 (``utf8mb4_*_0900_*``); MariaDB 11.4.5+
reuses most of the 0900 ids, with the same names, as aliases of its UCA 14.0.0
collations.  MariaDB alone has 576-738 (croatian, myanmar, thai_520_w2),
1024 + id for the ``_nopad_`` twin of a PAD SPACE collation (10.2+), and
2048-3271 for the UCA 14.0.0 (``uca1400``) collations of 10.10+, laid out as
``2048 + 256 * charset + 8 * tailoring + 4 * nopad + 2 * accent-sensitive +
case-sensitive``.  No id names two different character sets across the
flavors, so the character set (all that decoding needs) never depends on the
flavor; ``flavor`` only picks which name :func:`collation_name` reports and
which table is consulted first.  Names are the current ones: servers before
MySQL 8.0.30 / MariaDB 10.6.1 call the ``utf8mb3`` collations ``utf8_*``.

Decoding policy
---------------
:func:`decode_text` decodes strictly and, if the bytes are not valid in the
column's character set (or the set has no Python codec), returns them
unchanged as ``bytes``: nothing is ever lost or replaced, and the caller can
tell the two cases apart by type.  Where the server's own tables differ from
Python's codec of the same name, the server wins, so a decoded value equals
what ``SELECT`` returns:

* ``latin1`` is Windows-1252, and its five bytes that Windows-1252 leaves
  undefined (0x81, 0x8D, 0x8F, 0x90, 0x9D) decode to the C1 controls
  U+0081, U+008D, U+008F, U+0090, U+009D, so latin1 data always decodes;
* ``cp866`` 0xFC/0xFD are U+207F/U+00B2, ``koi8u`` 0x95 is U+2022,
  ``greek`` 0xA1/0xA2 are U+02BD/U+02BC, ``hebrew`` 0xAF is U+203E;
* ``sjis`` 0x815F and ``ujis`` 0xA1C0 are U+005C (REVERSE SOLIDUS);
* ``euckr`` is decoded as cp949 (the server accepts the whole UHC range),
  ``tis620`` as TIS-620 proper (cp874 would turn 0x80-0x9F into Windows
  punctuation), ``hp8`` as HP Roman-8;
* ``eucjpms`` (eucJP-ms) has no Python codec: this module registers the
  decode-only codec ``mysql_eucjpms`` for it (JIS X 0208 with the Microsoft
  mappings, NEC row 13, IBM extensions, user-defined area to the
  Private Use Area).

``armscii8``, ``dec8``, ``geostd8``, ``keybcs2`` and ``swe7`` have no Python
codec: their values stay ``bytes``.  ``binary`` columns stay ``bytes`` by
definition.
"""
from __future__ import annotations

import codecs
from collections.abc import Callable
from typing import Any

from .errors import BinlogError
from .gtid import Flavor

__all__ = [
    "COLLATIONS",
    "MARIADB_COLLATIONS",
    "MYSQL_COLLATIONS",
    "FLAVORS",
    "UnknownCollationError",
    "charset_for_collation",
    "codec_for_collation",
    "collation_name",
    "decode_text",
    "python_codec",
]

FLAVORS = (Flavor.MYSQL.value, Flavor.MARIADB.value)

# --------------------------------------------------------------------------
# Collation tables.  Every collation name starts with "<charset>_" (or is
# "binary"), so a table only needs "id name" pairs.  In _SHARED a trailing
# "+" means MariaDB 10.2+ also has the NO PAD twin at id + 1024
# ("x_general_ci" -> "x_general_nopad_ci", "x_bin" -> "x_nopad_bin").

_SHARED = """
1 big5_chinese_ci+ 2 latin2_czech_cs 3 dec8_swedish_ci+ 4 cp850_general_ci+
5 latin1_german1_ci 6 hp8_english_ci+ 7 koi8r_general_ci+ 8 latin1_swedish_ci+
9 latin2_general_ci+ 10 swe7_swedish_ci+ 11 ascii_general_ci+
12 ujis_japanese_ci+ 13 sjis_japanese_ci+ 14 cp1251_bulgarian_ci
15 latin1_danish_ci 16 hebrew_general_ci+ 18 tis620_thai_ci+
19 euckr_korean_ci+ 20 latin7_estonian_cs 21 latin2_hungarian_ci
22 koi8u_general_ci+ 23 cp1251_ukrainian_ci 24 gb2312_chinese_ci+
25 greek_general_ci+ 26 cp1250_general_ci+ 27 latin2_croatian_ci
28 gbk_chinese_ci+ 29 cp1257_lithuanian_ci 30 latin5_turkish_ci+
31 latin1_german2_ci 32 armscii8_general_ci+ 33 utf8mb3_general_ci+
34 cp1250_czech_cs 35 ucs2_general_ci+ 36 cp866_general_ci+
37 keybcs2_general_ci+ 38 macce_general_ci+ 39 macroman_general_ci+
40 cp852_general_ci+ 41 latin7_general_ci+ 42 latin7_general_cs 43 macce_bin+
44 cp1250_croatian_ci 45 utf8mb4_general_ci+ 46 utf8mb4_bin+ 47 latin1_bin+
48 latin1_general_ci 49 latin1_general_cs 50 cp1251_bin+ 51 cp1251_general_ci+
52 cp1251_general_cs 53 macroman_bin+ 54 utf16_general_ci+ 55 utf16_bin+
56 utf16le_general_ci+ 57 cp1256_general_ci+ 58 cp1257_bin+
59 cp1257_general_ci+ 60 utf32_general_ci+ 61 utf32_bin+ 62 utf16le_bin+
63 binary 64 armscii8_bin+ 65 ascii_bin+ 66 cp1250_bin+ 67 cp1256_bin+
68 cp866_bin+ 69 dec8_bin+ 70 greek_bin+ 71 hebrew_bin+ 72 hp8_bin+
73 keybcs2_bin+ 74 koi8r_bin+ 75 koi8u_bin+ 77 latin2_bin+ 78 latin5_bin+
79 latin7_bin+ 80 cp850_bin+ 81 cp852_bin+ 82 swe7_bin+ 83 utf8mb3_bin+
84 big5_bin+ 85 euckr_bin+ 86 gb2312_bin+ 87 gbk_bin+ 88 sjis_bin+
89 tis620_bin+ 90 ucs2_bin+ 91 ujis_bin+ 92 geostd8_general_ci+
93 geostd8_bin+ 94 latin1_spanish_ci 95 cp932_japanese_ci+ 96 cp932_bin+
97 eucjpms_japanese_ci+ 98 eucjpms_bin+ 99 cp1250_polish_ci
159 ucs2_general_mysql500_ci 223 utf8mb3_general_mysql500_ci
"""

_MYSQL_ONLY = """
76 utf8mb3_tolower_ci 248 gb18030_chinese_ci 249 gb18030_bin
250 gb18030_unicode_520_ci
"""

# UCA 4.0.0 collations (5.2.0 for unicode_520): id = base + index.
_UCA_BASES = {"utf16": 101, "ucs2": 128, "utf32": 160, "utf8mb3": 192, "utf8mb4": 224}
_UCA_TAILORINGS = (
    "unicode icelandic latvian romanian slovenian polish estonian spanish swedish "
    "turkish czech danish lithuanian slovak spanish2 roman persian esperanto "
    "hungarian sinhala german2 croatian_mysql561 unicode_520 vietnamese"
).split()
_UCA_NOPAD = ("unicode", "unicode_520")  # MariaDB NO PAD twins at id + 1024

# MariaDB 10.0+ / 10.1.15+: id = base + index.
_MARIADB_EXTRA_BASES = {"utf8mb3": 576, "utf8mb4": 608, "ucs2": 640, "utf16": 672, "utf32": 736}
_MARIADB_EXTRA = ("croatian_ci", "myanmar_ci", "thai_520_w2")

# MySQL 8.0 UCA 9.0.0 collations (all utf8mb4).  The locale list gives
# 255 + i (ai_ci) and 278 + i (as_cs); "-" marks an unused id, "." the root.
_UCA0900_LOCALES = (
    ". de_pb is lv ro sl pl et es sv tr cs da lt sk es_trad la - eo hu hr - vi"
).split()
_UCA0900_MORE = """
303 ja_0900_as_cs 304 ja_0900_as_cs_ks 305 0900_as_ci 306 ru_0900_ai_ci
307 ru_0900_as_cs 308 zh_0900_as_cs 309 0900_bin 310 nb_0900_ai_ci
311 nb_0900_as_cs 312 nn_0900_ai_ci 313 nn_0900_as_cs 314 sr_latn_0900_ai_ci
315 sr_latn_0900_as_cs 316 bs_0900_ai_ci 317 bs_0900_as_cs 318 bg_0900_ai_ci
319 bg_0900_as_cs 320 gl_0900_ai_ci 321 gl_0900_as_cs 322 mn_cyrl_0900_ai_ci
323 mn_cyrl_0900_as_cs
"""
# The 0900 ids MariaDB 11.4.5+ does not alias (beyond the locale blocks).
_UCA0900_MYSQL_ONLY = frozenset({303, 304, 306, 307, 308, *range(310, 324)})

# MariaDB 10.10+ UCA 14.0.0 collations: id = base + 8 * index + flags
# (4 = nopad, 2 = accent sensitive, 1 = case sensitive); "." is the root,
# "-" an unused slot.
_UCA1400_BASES = {"utf8mb3": 2048, "utf8mb4": 2304, "ucs2": 2560, "utf16": 2816, "utf32": 3072}
_UCA1400_TAILORINGS = (
    ". icelandic latvian romanian slovenian polish estonian spanish swedish "
    "turkish czech danish lithuanian slovak spanish2 roman persian esperanto "
    "hungarian sinhala german2 - - vietnamese croatian"
).split()


def _pairs(table: str) -> list[tuple[int, str]]:
    tokens = table.split()
    return [(int(tokens[i]), tokens[i + 1]) for i in range(0, len(tokens), 2)]


def _charset_of(name: str) -> str:
    return name.split("_", 1)[0]


def _nopad_name(name: str) -> str:
    if name.endswith("_bin"):
        return name[:-4] + "_nopad_bin"
    return name[:-3] + "_nopad_ci"


def _build() -> tuple[dict[int, tuple[str, str]], dict[int, tuple[str, str]]]:
    shared: dict[int, str] = {}
    mariadb: dict[int, str] = {}
    mysql: dict[int, str] = {}
    for cid, name in _pairs(_SHARED):
        if name.endswith("+"):
            name = name[:-1]
            mariadb[cid + 1024] = _nopad_name(name)
        shared[cid] = name
    for cs, base in _UCA_BASES.items():
        for i, tailoring in enumerate(_UCA_TAILORINGS):
            shared[base + i] = name = f"{cs}_{tailoring}_ci"
            if tailoring in _UCA_NOPAD:
                mariadb[base + i + 1024] = _nopad_name(name)
    for cs, base in _MARIADB_EXTRA_BASES.items():
        for i, suffix in enumerate(_MARIADB_EXTRA):
            mariadb[base + i] = f"{cs}_{suffix}"
    for cs, base in _UCA1400_BASES.items():
        for i, tailoring in enumerate(_UCA1400_TAILORINGS):
            if tailoring == "-":
                continue
            stem = f"{cs}_uca1400" + ("" if tailoring == "." else f"_{tailoring}")
            for flags in range(8):
                mariadb[base + 8 * i + flags] = (
                    stem + ("_nopad" if flags & 4 else "")
                    + ("_as" if flags & 2 else "_ai") + ("_cs" if flags & 1 else "_ci")
                )
    mysql.update(_pairs(_MYSQL_ONLY))
    uca0900: dict[int, str] = {}
    for i, loc in enumerate(_UCA0900_LOCALES):
        if loc == "-":
            continue
        prefix = "utf8mb4_" if loc == "." else f"utf8mb4_{loc}_"
        uca0900[255 + i] = prefix + "0900_ai_ci"
        uca0900[278 + i] = prefix + "0900_as_cs"
    uca0900.update((cid, "utf8mb4_" + rest) for cid, rest in _pairs(_UCA0900_MORE))
    for cid, name in uca0900.items():
        mysql[cid] = name
        if cid not in _UCA0900_MYSQL_ONLY:
            mariadb[cid] = name

    def finish(own: dict[int, str]) -> dict[int, tuple[str, str]]:
        merged = {**shared, **own}
        return {cid: (name, _charset_of(name)) for cid, name in sorted(merged.items())}

    return finish(mysql), finish(mariadb)


MYSQL_COLLATIONS: dict[int, tuple[str, str]]
MARIADB_COLLATIONS: dict[int, tuple[str, str]]
MYSQL_COLLATIONS, MARIADB_COLLATIONS = _build()

#: Every known collation id -> (collation name, character set name).  Where
#: both flavors know an id they agree on both.
COLLATIONS: dict[int, tuple[str, str]] = dict(
    sorted({**MARIADB_COLLATIONS, **MYSQL_COLLATIONS}.items())
)


# --------------------------------------------------------------------------
# Lookups

class UnknownCollationError(BinlogError, KeyError):
    """A collation id that neither MySQL nor MariaDB defines (as far as
    this version knows).  A ``KeyError`` too, so ``except KeyError`` works."""

    default_hint = ("the server uses a collation this version does not know; report the "
                    "collation id and the server version, or upgrade airflow-provider-binlog")

    def __init__(self, collation_id: int, flavor: str | None = None, **kw: Any) -> None:
        self.collation_id = collation_id
        self.flavor = flavor
        super().__init__(f"unknown collation id {collation_id!r}", **kw)

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else ""


def _check_flavor(flavor: str | None) -> str | None:
    if flavor is None:
        return None
    f = flavor.lower()
    if f not in FLAVORS:
        raise ValueError(f"flavor must be one of {FLAVORS} or None, not {flavor!r}")
    return f


def _lookup(collation_id: int, flavor: str | None) -> tuple[str, str]:
    f = _check_flavor(flavor)
    if f is not None:
        own = MYSQL_COLLATIONS if f == Flavor.MYSQL else MARIADB_COLLATIONS
        entry = own.get(collation_id)
        if entry is not None:
            return entry
    entry = COLLATIONS.get(collation_id)
    if entry is None:
        raise UnknownCollationError(collation_id, f)
    return entry


def collation_name(collation_id: int, flavor: str | None = None) -> str:
    """The collation's name, as ``flavor`` ("mysql", "mariadb" or None for
    either) names it."""
    return _lookup(collation_id, flavor)[0]


def charset_for_collation(collation_id: int, flavor: str | None = None) -> str:
    """The MySQL character set name of a collation id, e.g. 45 -> "utf8mb4".

    Raises :class:`UnknownCollationError` for an unknown id and
    ``ValueError`` for an unknown flavor.  An id only the other flavor
    defines is still resolved (no id means different character sets in the
    two flavors)."""
    return _lookup(collation_id, flavor)[1]


def codec_for_collation(collation_id: int, flavor: str | None = None) -> str | None:
    """``python_codec(charset_for_collation(collation_id, flavor))``."""
    return python_codec(_lookup(collation_id, flavor)[1])


_PYTHON_CODECS: dict[str, str | None] = {
    "utf8mb4": "utf-8", "utf8mb3": "utf-8", "utf8": "utf-8",
    "ucs2": "utf-16-be", "utf16": "utf-16-be", "utf16le": "utf-16-le", "utf32": "utf-32-be",
    "latin1": "cp1252", "ascii": "ascii", "binary": None,
    "latin2": "iso8859_2", "latin5": "iso8859_9", "latin7": "iso8859_13",
    "greek": "iso8859_7", "hebrew": "iso8859_8",
    "cp1250": "cp1250", "cp1251": "cp1251", "cp1256": "cp1256", "cp1257": "cp1257",
    "cp850": "cp850", "cp852": "cp852", "cp866": "cp866",
    "koi8r": "koi8_r", "koi8u": "koi8_u", "macroman": "mac_roman", "macce": "mac_latin2",
    "tis620": "tis_620", "hp8": "hp_roman8",
    "big5": "big5", "gbk": "gbk", "gb2312": "gb2312", "gb18030": "gb18030",
    "sjis": "shift_jis", "cp932": "cp932", "ujis": "euc_jp", "eucjpms": "mysql_eucjpms",
    "euckr": "cp949",
    # No Python codec: values stay bytes.
    "armscii8": None, "dec8": None, "geostd8": None, "keybcs2": None, "swe7": None,
    "filename": None,
}


def python_codec(charset: str) -> str | None:
    """The Python codec for a MySQL/MariaDB character set name, or None when
    the value should stay ``bytes`` (``binary``, and the few sets Python has
    no codec for).  Raises ``KeyError`` for a name that is not a character set.
    Pass the result to :func:`decode_text`, which applies the server's own
    mapping where it differs from Python's codec (see the module doc)."""
    try:
        return _PYTHON_CODECS[charset.lower()]
    except KeyError:
        raise KeyError(f"unknown character set {charset!r}") from None


# --------------------------------------------------------------------------
# Decoding

# Single-byte sets whose server table differs from Python's codec on a few
# bytes: decoded through a full 256-entry table.
_BYTE_OVERRIDES: dict[str, dict[int, str]] = {
    "cp1252": {0x81: "\x81", 0x8D: "\x8d", 0x8F: "\x8f", 0x90: "\x90", 0x9D: "\x9d"},
    "cp866": {0xFC: "\u207f", 0xFD: "\u00b2"},
    "koi8_u": {0x95: "\u2022"},
    "iso8859_7": {0xA1: "\u02bd", 0xA2: "\u02bc"},
    "iso8859_8": {0xAF: "\u203e"},
}
# Multi-byte sets: characters to replace after decoding (each comes from a
# single byte sequence of that codec).
_CHAR_OVERRIDES: dict[str, dict[int, str]] = {
    "shift_jis": {0xFF3C: "\\"},
    "euc_jp": {0xFF3C: "\\"},
}

_decoders: dict[str, Callable[[bytes], str]] = {}


def _charmap_decoder(codec: str, overrides: dict[int, str]) -> Callable[[bytes], str]:
    chars = []
    for b in range(256):
        try:
            chars.append(bytes((b,)).decode(codec))
        except UnicodeDecodeError:
            chars.append("\ufffe")  # undefined: charmap_decode raises
    for b, ch in overrides.items():
        chars[b] = ch
    table = "".join(chars)
    decode = codecs.charmap_decode
    return lambda data: decode(data, "strict", table)[0]


def _decoder(codec: str) -> Callable[[bytes], str]:
    dec = _decoders.get(codec)
    if dec is None:
        name = codecs.lookup(codec).name.replace("-", "_")
        if name in _BYTE_OVERRIDES:
            dec = _charmap_decoder(codec, _BYTE_OVERRIDES[name])
        elif name in _CHAR_OVERRIDES:
            table = _CHAR_OVERRIDES[name]
            dec = lambda data, c=codec, t=table: str(data, c).translate(t)  # noqa: E731
        else:
            dec = lambda data, c=codec: str(data, c)  # noqa: E731
        _decoders[codec] = dec
    return dec


def decode_text(data: bytes | bytearray | memoryview, codec: str | None) -> str | bytes:
    """Decode a column value; never raises on the value's content.

    ``codec`` is what :func:`python_codec` / :func:`codec_for_collation`
    returned.  Returns ``str`` when the bytes are valid in that character
    set, otherwise (and when ``codec`` is None) the bytes themselves, as
    ``bytes``: lossless, and distinguishable by type.  An unknown codec name
    raises ``LookupError`` (a programming error, not a data error)."""
    if codec is None:
        return bytes(data)
    if codec == "utf-8":
        try:
            return str(data, "utf-8")
        except UnicodeDecodeError:
            return bytes(data)
    try:
        return _decoder(codec)(data)
    except UnicodeDecodeError:
        return bytes(data)


# --------------------------------------------------------------------------
# eucJP-ms ("eucjpms"): EUC-JP with the Windows code page 932 repertoire.
# Two-byte JIS X 0208 codes (and NEC row 13) are decoded through their
# Shift_JIS form with cp932, which gives the Microsoft mappings (U+FF5E for
# 0xA1C1 and so on); JIS X 0212 codes through euc_jp, except two that take
# the Microsoft mapping too; the IBM extensions at 0x8FF3F3-0x8FF4FE and the
# user-defined rows (0xF5-0xFE, 0x8FF5-0x8FFE) as in the eucJP-ms layout.

_EUCJPMS_0212 = {b"\x8f\xa2\xb7": "\uff5e", b"\x8f\xa2\xc3": "\uffe4"}
_eucjpms_ibm: dict[bytes, str] | None = None


def _eucjpms_ibm_table() -> dict[bytes, str]:
    """The IBM extensions cp932 has at 0xFA40-0xFC4B that eucJP-ms cannot
    reach through JIS X 0208/0212, in cp932 order from 0x8FF3F3 on."""
    global _eucjpms_ibm
    if _eucjpms_ibm is None:
        chars = []
        for lead in (0xFA, 0xFB, 0xFC):
            for trail in (*range(0x40, 0x7F), *range(0x80, 0xFD)):
                if lead == 0xFC and trail > 0x4B:
                    break
                ch = bytes((lead, trail)).decode("cp932")
                canonical = ch.encode("cp932")[0]
                if canonical == 0x87:  # also in NEC row 13
                    chars.append(ch)
                elif canonical in (0xED, 0xEE):  # NEC-selected IBM extension
                    try:
                        in_0212 = len(ch.encode("euc_jp")) == 3
                    except UnicodeEncodeError:
                        in_0212 = ch in _EUCJPMS_0212.values()
                    if not in_0212:
                        chars.append(ch)
        first = (0xF3 - 0xA1) * 94 + (0xF3 - 0xA1)
        table = {}
        for i, ch in enumerate(chars):
            row, cell = divmod(first + i, 94)
            table[bytes((0x8F, 0xA1 + row, 0xA1 + cell))] = ch
        _eucjpms_ibm = table
    return _eucjpms_ibm


def _eucjpms_decode(data: bytes, errors: str = "strict") -> tuple[str, int]:
    data = bytes(data)
    if data.isascii():
        return data.decode("ascii"), len(data)
    out: list[str] = []
    i, n = 0, len(data)
    while i < n:
        b = data[i]
        if b < 0x80:
            j = i + 1
            while j < n and data[j] < 0x80:
                j += 1
            out.append(data[i:j].decode("ascii"))
            i = j
            continue
        ch = None
        size = 3 if b == 0x8F else 2
        seq = data[i:i + size]
        if len(seq) == size and all(0xA1 <= x <= 0xFE for x in seq[size - 2:]):
            if b == 0x8F:
                row, cell = seq[1] - 0xA1, seq[2] - 0xA1
                if seq[1] >= 0xF5:  # user-defined, after the two-byte ones
                    ch = chr(0xE000 + 940 + (row - 0x54) * 94 + cell)
                elif seq in _EUCJPMS_0212:
                    ch = _EUCJPMS_0212[seq]
                elif seq[1] >= 0xF3:
                    ch = _eucjpms_ibm_table().get(seq)
                else:
                    try:
                        ch = seq.decode("euc_jp")
                    except UnicodeDecodeError:
                        ch = None
            elif b >= 0xF5:  # user-defined rows 85-94
                ch = chr(0xE000 + (b - 0xF5) * 94 + seq[1] - 0xA1)
            elif b >= 0xA1:
                row, cell = b - 0xA0, seq[1] - 0xA0
                s1 = (row + 1) // 2 + (0x80 if row <= 62 else 0xC0)
                if row & 1:
                    s2 = cell + 0x3F + (cell >= 64)
                else:
                    s2 = cell + 0x9E
                try:
                    ch = bytes((s1, s2)).decode("cp932")
                except UnicodeDecodeError:
                    ch = None
        elif b == 0x8E and len(seq) == 2 and 0xA1 <= seq[1] <= 0xDF:  # half-width katakana
            ch = chr(0xFF61 + seq[1] - 0xA1)
        if ch is None:
            end = min(i + size, n) if b in (0x8E, 0x8F) or b >= 0xA1 else i + 1
            exc = UnicodeDecodeError("mysql_eucjpms", data, i, end, "invalid eucjpms sequence")
            if errors == "strict":
                raise exc
            rep, i = codecs.lookup_error(errors)(exc)
            out.append(rep)
            continue
        out.append(ch)
        i += size
    return "".join(out), n


def _eucjpms_encode(text: str, errors: str = "strict") -> tuple[bytes, int]:
    raise UnicodeEncodeError("mysql_eucjpms", text, 0, len(text),
                             "mysql_eucjpms is a decode-only codec")


_EUCJPMS_INFO = codecs.CodecInfo(_eucjpms_encode, _eucjpms_decode, name="mysql_eucjpms")


def _search(name: str) -> codecs.CodecInfo | None:
    return _EUCJPMS_INFO if name.replace("-", "_") == "mysql_eucjpms" else None


codecs.register(_search)
