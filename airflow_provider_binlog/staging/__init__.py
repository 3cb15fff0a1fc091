"""Staging: the Parquet files and manifest a bounded dump publishes for the merge job.

The contract (column layout, type mapping, manifest) is in :mod:`.contract`; the merge job
(:mod:`airflow_provider_binlog.merge`) depends on it and on nothing else of this package.
"""
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .contract import ENVELOPE_COLUMNS, MANIFEST_FORMAT, MANIFEST_VERSION, arrow_type_for
    from .manifest import Manifest, ManifestError, load_manifest
    from .writer import StagingWriter

#: where each name of the package is defined: imported when first asked for, so that a module
#: importing one light module of the package (the masking rules, the storage locations) does not
#: import pyarrow with the writer (a DAG file parsed imports the operators, which import those)
_DEFINED_IN = {"ENVELOPE_COLUMNS": "contract", "MANIFEST_FORMAT": "contract", "MANIFEST_VERSION": "contract",
               "arrow_type_for": "contract", "Manifest": "manifest", "ManifestError": "manifest",
               "load_manifest": "manifest", "StagingWriter": "writer"}


def __getattr__(name: str) -> Any:
    module = _DEFINED_IN.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


__all__ = ["ENVELOPE_COLUMNS", "MANIFEST_FORMAT", "MANIFEST_VERSION", "Manifest", "ManifestError",
           "StagingWriter", "arrow_type_for", "load_manifest"]
