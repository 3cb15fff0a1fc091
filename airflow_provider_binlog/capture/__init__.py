"""Capture: reading the source into staged batches. The bounded dump of the binlog
(:mod:`.dump`), the consistent snapshot in one transaction (:mod:`.snapshot`), the lock-free
watermark snapshot in key chunks (:mod:`.watermark`) and its Arrow chunk reader
(:mod:`.arrow_reader`)."""
