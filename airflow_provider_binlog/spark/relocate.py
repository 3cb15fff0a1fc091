"""Package relocation of Java class files, in pure Python.

The Iceberg Spark runtime jar shipped by ``snowpark-connect-deps-iceberg``
refers to Jackson under ``org.apache.iceberg.shaded.com.fasterxml.jackson``
but does not contain those classes.  :func:`relocate_jars` builds them from
the unshaded Jackson jars that pyspark ships, doing what a shading plugin
does: rename the entries, and rewrite every name in each class file's
constant pool.

Every name a class file uses (its own name, super types, field and method
descriptors, generic signatures, annotation types and string literals such
as ``Class.forName`` arguments) is a ``CONSTANT_Utf8`` entry of the constant
pool; rewriting those entries and leaving everything after the pool as it is
relocates the class, since other structures refer to the pool by index.
"""
from __future__ import annotations

import os
import struct
import tempfile
import zipfile
from typing import Iterable, Sequence

from ..errors import ProviderError

# Constant pool tags (JVMS 4.4) and the size of their payloads.
_UTF8 = 1
_FIXED_SIZES = {
    3: 4,  # Integer
    4: 4,  # Float
    5: 8,  # Long (takes two slots)
    6: 8,  # Double (takes two slots)
    7: 2,  # Class
    8: 2,  # String
    9: 4,  # Fieldref
    10: 4,  # Methodref
    11: 4,  # InterfaceMethodref
    12: 4,  # NameAndType
    15: 3,  # MethodHandle
    16: 2,  # MethodType
    17: 4,  # Dynamic
    18: 4,  # InvokeDynamic
    19: 2,  # Module
    20: 2,  # Package
}
_MAGIC = b"\xca\xfe\xba\xbe"


class ClassFormatError(ProviderError, ValueError):
    """The bytes are not a class file this module can parse."""


def _pairs(src: str, dst: str) -> list[tuple[bytes, bytes]]:
    """The internal (``a/b/``) and binary (``a.b.``) forms of a prefix
    mapping; names and string literals use either."""
    src = src.strip(".").replace("/", ".")
    dst = dst.strip(".").replace("/", ".")
    return [
        ((src + ".").replace(".", "/").encode(), (dst + ".").replace(".", "/").encode()),
        ((src + ".").encode(), (dst + ".").encode()),
    ]


def _rewrite(value: bytes, pairs: Sequence[tuple[bytes, bytes]]) -> bytes:
    for old, new in pairs:
        if old in value:
            value = value.replace(old, new)
    return value


def relocate_class(data: bytes, mapping: dict[str, str]) -> bytes:
    """Return class file ``data`` with every package prefix ``src`` of
    ``mapping`` (dotted, e.g. ``com.fasterxml.jackson``) renamed to its
    value.  Names are modified UTF-8, in which ASCII bytes only ever stand
    for themselves, so a byte-level replacement is exact."""
    pairs = [p for src, dst in mapping.items() for p in _pairs(src, dst)]
    if len(data) < 10 or data[:4] != _MAGIC:
        raise ClassFormatError("not a class file (bad magic)")
    count = struct.unpack_from(">H", data, 8)[0]
    out = [data[:10]]
    pos = 10
    index = 1
    try:
        while index < count:
            tag = data[pos]
            if tag == _UTF8:
                length = struct.unpack_from(">H", data, pos + 1)[0]
                value = data[pos + 3 : pos + 3 + length]
                if len(value) != length:
                    raise ClassFormatError("truncated constant pool")
                new = _rewrite(value, pairs)
                if len(new) > 0xFFFF:
                    raise ClassFormatError("relocated constant longer than 65535 bytes")
                out.append(struct.pack(">BH", _UTF8, len(new)))
                out.append(new)
                pos += 3 + length
                index += 1
            else:
                size = _FIXED_SIZES.get(tag)
                if size is None:
                    raise ClassFormatError(f"unknown constant pool tag {tag} at offset {pos}")
                out.append(data[pos : pos + 1 + size])
                pos += 1 + size
                index += 2 if tag in (5, 6) else 1
    except (IndexError, struct.error) as exc:
        raise ClassFormatError("truncated constant pool") from exc
    if pos > len(data):
        raise ClassFormatError("truncated constant pool")
    out.append(data[pos:])
    return b"".join(out)


def _relocate_path(name: str, mapping: dict[str, str]) -> str:
    for src, dst in mapping.items():
        src_path = src.replace(".", "/") + "/"
        if name.startswith(src_path):
            return dst.replace(".", "/") + "/" + name[len(src_path) :]
    return name


def _skip(name: str) -> bool:
    # Directories are implied by the entries; module descriptors and the
    # multi-release variants would describe the unrelocated packages (the
    # base classes run on any Java), and each input's manifest and Maven
    # metadata are replaced by ours.
    return (
        name.endswith("/")
        or name.endswith("module-info.class")
        or name.startswith("META-INF/versions/")
        or name.startswith("META-INF/maven/")
        or name == "META-INF/MANIFEST.MF"
        or name == "META-INF/INDEX.LIST"
        or name.upper().endswith((".SF", ".RSA", ".DSA", ".EC"))
    )


def relocate_jars(
    sources: Iterable[str],
    dest: str,
    mapping: dict[str, str],
    *,
    manifest_lines: Sequence[str] = (),
) -> int:
    """Write one jar ``dest`` holding the entries of the jars ``sources``
    with the packages of ``mapping`` relocated (class files, resource paths,
    ``META-INF/services`` file names and contents).  Other ``META-INF``
    files (licences, notices) are kept, named after their source jar.  The
    jar is written to a temporary file and renamed into place, so readers
    never see a partial one.  Returns the number of classes written."""
    dest_dir = os.path.dirname(os.path.abspath(dest)) or "."
    os.makedirs(dest_dir, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".relocate-", suffix=".jar", dir=dest_dir)
    os.close(fd)
    classes = 0
    seen: set[str] = set()
    services: dict[str, list[str]] = {}
    try:
        with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as out:
            manifest = ["Manifest-Version: 1.0", *manifest_lines, "", ""]
            out.writestr("META-INF/MANIFEST.MF", "\r\n".join(manifest))
            seen.add("META-INF/MANIFEST.MF")
            for source in sources:
                stem = os.path.basename(source)
                if stem.endswith(".jar"):
                    stem = stem[:-4]
                with zipfile.ZipFile(source) as jar:
                    for info in jar.infolist():
                        name = info.filename
                        if _skip(name):
                            continue
                        data = jar.read(info)
                        if name.startswith("META-INF/services/"):
                            service = name[len("META-INF/services/") :]
                            name = "META-INF/services/" + _relocate_path(
                                service.replace(".", "/"), mapping
                            ).replace("/", ".")
                            text = data.decode("utf-8")
                            for src, dst in mapping.items():
                                text = text.replace(src + ".", dst + ".")
                            services.setdefault(name, []).append(text.rstrip("\n") + "\n")
                            continue
                        elif name.startswith("META-INF/"):
                            base = name[len("META-INF/") :]
                            name = f"META-INF/{stem}/{base}"
                        else:
                            name = _relocate_path(name, mapping)
                            if name.endswith(".class"):
                                data = relocate_class(data, mapping)
                                classes += 1
                        if name in seen:
                            continue
                        seen.add(name)
                        out.writestr(zipfile.ZipInfo(name, date_time=info.date_time), data,
                                     compress_type=zipfile.ZIP_DEFLATED)
            for name, parts in services.items():
                out.writestr(name, "".join(parts))
        # mkstemp makes it private; the jar is no secret and other users'
        # Spark processes may read it.
        os.chmod(tmp, 0o644)
        os.replace(tmp, dest)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    return classes
