"""Staging: the Parquet files and manifest a bounded dump publishes for the merge job.

The contract (column layout, type mapping, manifest) is in :mod:`.contract`; the merge job
(:mod:`airflow_provider_binlog.merge`) depends on it and on nothing else of this package.
"""
from .contract import ENVELOPE_COLUMNS, MANIFEST_FORMAT, MANIFEST_VERSION, arrow_type_for
from .manifest import Manifest, ManifestError, load_manifest
from .writer import StagingWriter

__all__ = ["ENVELOPE_COLUMNS", "MANIFEST_FORMAT", "MANIFEST_VERSION", "Manifest", "ManifestError",
           "StagingWriter", "arrow_type_for", "load_manifest"]
