"""What every layer may use and that imports nothing of the provider but :mod:`..errors`: the
table filter and Iceberg table names (:mod:`.tables`), atomic file writes (:mod:`.atomic_file`)
and the process's memory for log lines (:mod:`.process_memory`)."""
