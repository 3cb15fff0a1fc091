"""Lock-free snapshot by key chunks and binlog watermarks (the DBLog / Flink CDC algorithm,
with watermarks read as binlog positions: no writes to the source, and for a keyed table no
lock, no RELOAD grant and no transaction longer than one chunk's read).

Each table is read in chunks of its key order (``WHERE key > last ORDER BY key LIMIT n``, one
autocommit statement each). After each chunk the server's binlog position is read: the chunk's
high watermark ``hw``. The binlog is followed up to ``hw`` (one short stream from where it was
left), and each row change read there is either

- *replayed* on the chunk in memory, when its key lies in the chunk's key range: the read may or
  may not have seen it, and replaying every change in order over a state that already holds
  some of them ends in the state at ``hw`` (each change sets the columns of its image, or
  removes the key);
- *staged* as a change at its own position, when its key lies in a chunk already read (of this
  table or of a table done): the chunk was read before the change;
- *dropped*, when its key lies in a range not read yet: that read comes later and sees it.

The chunk's rows are staged as inserts just before ``hw`` (they sort before any change at or
after ``hw``), so the merge, which applies the batch in binlog order after an implicit TRUNCATE
at the batch start, ends with each table as it was at the batch end — the last watermark —
exactly as a consistent snapshot taken there. The incremental loads continue from that end.

A schema change of a captured table during the snapshot stops it with an error (run it again).
Key ranges are compared in Python: chunked tables need keys that compare alike in Python and in
the server (numbers, dates and times, binary strings); a table whose key holds text with a
collation is read in one chunk.

The modules: the entry point :mod:`.snapshot` (``take_watermark_snapshot``); binlog positions
and the wait for a read to see what the follower read (:mod:`.positions`); the key a table is
chunked by (:mod:`.keys`); what a row change does to the open chunk, without I/O
(:mod:`.chunks`); the binlog follower (:mod:`.follower`); one chunk's read from the server
(:mod:`.reads`); a table's chunks read, followed to their watermark and staged
(:mod:`.table_reads`); the state sealed for a resume (:mod:`.resume`).
"""
