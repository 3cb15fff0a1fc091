"""Location of the shared binlog corpus (real MySQL/MariaDB binlogs used as test data).

It sits beside the repository (``../shared/binlog-corpus``); ``BINLOG_CORPUS`` overrides it.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

CORPUS = Path(os.environ.get("BINLOG_CORPUS")
              or Path(__file__).resolve().parents[2] / "shared" / "binlog-corpus")


def corpus_file(relative: str) -> Path:
    return CORPUS / relative


def manifest() -> list[dict]:
    return json.loads((CORPUS / "manifest.json").read_text())
