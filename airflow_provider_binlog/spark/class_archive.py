"""A class-data-sharing archive of the Spark driver's JVM (Java 17's dynamic AppCDS), so a merge
task's ``spark-submit`` starts in about half the time after its first run.

The first ``spark-submit`` with a given Java and driver class path runs with
``-XX:ArchiveClassesAtExit`` into a file of its own; when that process has ended well, the file
is checked by a JVM that maps it (a truncated archive crashes the JVM that maps it, so nothing
unchecked is ever used) and renamed into place. Later runs map it with ``-XX:SharedArchiveFile``:
Spark's, Scala's and Hadoop's classes come parsed and verified instead of read from the jars.
A JVM that finds the archive does not fit (another Java build, another class path) runs without
it, silently. The archive's name carries a digest of the Java installation and of the class
path settings, so a new Java or new jars get a new archive.

Only a driver that runs on this host (client deploy mode) is given one; a driver whose options
already name a shared archive or ``-Xshare`` is left alone, and ``[binlog]
spark_class_archive = False`` turns it off.
"""
from __future__ import annotations

import glob
import hashlib
import logging
import os
import subprocess
import tempfile
import time
import uuid
from dataclasses import dataclass
from typing import Mapping, Optional

log = logging.getLogger(__name__)

#: The driver's Java options this adds to.
DRIVER_OPTIONS = "spark.driver.extraJavaOptions"
#: Settings of the driver's class path; a change of any gives another archive.
_CLASS_PATH_SETTINGS = ("spark.driver.extraClassPath", "spark.jars", "spark.jars.packages")
#: The JVM's notes about an archive that does not fit are not for the task's log.
QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"
#: Archives being written that are older than this belong to a process that died.
_STALE_SECONDS = 3600
_PREFIX = "spark-driver-"


def _java_identity(java_home: str) -> str:
    """What tells one Java installation from another: its release file and its JVM library."""
    parts = [os.path.realpath(java_home)]
    try:
        with open(os.path.join(java_home, "release"), "rb") as f:
            parts.append(hashlib.sha256(f.read()).hexdigest())
    except OSError:
        pass
    lib = os.path.join(java_home, "lib", "server", "libjvm.so")
    if os.path.isfile(lib):
        st = os.stat(lib)
        parts.append(f"{st.st_size}:{int(st.st_mtime)}")
    return "|".join(parts)


def archive_name(java_home: str, conf: Mapping[str, str], spark_home: str = "", prefix: str = _PREFIX) -> str:
    """The archive's file name for this Java, Spark installation and driver class path
    (``prefix``: which JVM it is for)."""
    text = "\n".join([_java_identity(java_home), os.path.realpath(spark_home) if spark_home else ""]
                     + [f"{k}={conf.get(k, '')}" for k in _CLASS_PATH_SETTINGS])
    return f"{prefix}{hashlib.sha256(text.encode()).hexdigest()[:16]}.jsa"


def _mentions_sharing(options: str) -> bool:
    return any(flag in options for flag in ("SharedArchiveFile", "ArchiveClassesAtExit", "-Xshare"))


@dataclass
class ClassArchive:
    """The archive one ``spark-submit`` uses or writes: ``options`` go into the driver's Java
    options; :meth:`finish` is called once the process has ended."""

    java_home: str
    path: str
    writing: Optional[str] = None  # the file this run writes; None: it maps ``path``

    @property
    def options(self) -> str:
        if self.writing is None:
            return f"-XX:SharedArchiveFile={self.path} {QUIET}"
        return f"-XX:ArchiveClassesAtExit={self.writing} {QUIET}"

    def finish(self, succeeded: bool) -> bool:
        """After the process: keep the archive it wrote when it ended well and a JVM maps the
        archive; otherwise delete it. Whether an archive was put in place."""
        if self.writing is None:
            return False
        try:
            if succeeded and os.path.getsize(self.writing) > 0 and _maps(self.java_home, self.writing):
                os.replace(self.writing, self.path)
                log.info("the Spark driver's class archive is in place: %s", self.path)
                return True
            log.info("the Spark driver's class archive %s was not kept", self.writing)
        except OSError:
            pass
        _remove(self.writing)
        return False


def _maps(java_home: str, path: str) -> bool:
    """Whether a JVM starts with the archive ``path`` (a truncated archive crashes it; its
    crash report goes to a directory of its own, removed after)."""
    java = os.path.join(java_home, "bin", "java")
    try:
        with tempfile.TemporaryDirectory(prefix="binlog-cds-check-") as scratch:
            done = subprocess.run([java, f"-XX:SharedArchiveFile={path}", *QUIET.split(),
                                   f"-XX:ErrorFile={scratch}/hs_err_pid%p.log", "-version"],
                                  capture_output=True, timeout=60, check=False, cwd=scratch)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0 and b"fatal error" not in done.stderr


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def _sweep(directory: str) -> None:
    """Delete archives being written by processes that died."""
    now = time.time()
    for path in glob.glob(os.path.join(directory, "*.jsa.*.tmp")):
        try:
            if now - os.stat(path).st_mtime > _STALE_SECONDS:
                os.unlink(path)
        except OSError:
            pass


def prepare_archive(conf: Mapping[str, str], java_home: Optional[str], directory: str,
                    spark_home: str = "", prefix: str = _PREFIX) -> Optional[ClassArchive]:
    """The archive for a driver started with ``conf`` on ``java_home``, kept in ``directory``
    (``prefix``: of its name, which JVM it is for); None when the driver's options already
    decide about class sharing, there is no Java or ``directory`` cannot be created."""
    if not java_home or not os.path.isfile(os.path.join(java_home, "bin", "java")):
        return None
    if _mentions_sharing(str(conf.get(DRIVER_OPTIONS, ""))):
        return None
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError:  # no place to keep one: the driver starts as it did without
        log.info("no class archive for the Spark driver: %s cannot be created", directory)
        return None
    path = os.path.join(directory, archive_name(java_home, conf, spark_home, prefix))
    if os.path.isfile(path):
        return ClassArchive(java_home, path)
    _sweep(directory)
    return ClassArchive(java_home, path, writing=f"{path}.{uuid.uuid4().hex}.tmp")


def with_archive(conf: Mapping[str, str], archive: Optional[ClassArchive]) -> dict:
    """``conf`` with the archive's options added to the driver's Java options."""
    out = dict(conf)
    if archive is not None:
        out[DRIVER_OPTIONS] = " ".join(p for p in (str(out.get(DRIVER_OPTIONS, "")).strip(), archive.options) if p)
    return out
