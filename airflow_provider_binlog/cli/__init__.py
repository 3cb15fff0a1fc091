"""The command line: ``airflow-provider-binlog decode`` (a binlog file as text, JSON lines or
SQL, :mod:`.decode`), its renderers (:mod:`.render`), the decode of one file by several
processes (:mod:`.parallel_decode`), and ``quickstart``."""
from .decode import main

__all__ = ["main"]
