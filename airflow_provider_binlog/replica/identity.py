"""Which server a checkpoint was taken on, and where a load resumes on the server it talks to now.

Binlog coordinates (file and position) belong to one server: a promoted replica writes the same
transactions at other offsets, often in files of the same name. A checkpoint records the
identity of its server (``server_uuid`` on MySQL, ``server_id`` on MariaDB); on another server
its coordinates mean nothing, and its GTID state is where the load goes on.
"""
from __future__ import annotations

import logging
from typing import Optional

from ..checkpoints import Checkpoint
from .errors import ReplicaError

log = logging.getLogger(__name__)


class ServerChangedError(ReplicaError):
    """The checkpoint was taken on another server and holds no GTIDs to resume by there."""


def describe_server(server_uuid: Optional[str], server_id: Optional[int]) -> str:
    if server_uuid:
        return f"server_uuid {server_uuid}"
    return f"server_id {server_id}" if server_id is not None else "an unrecorded server"


def same_server(checkpoint: Checkpoint, server_id: Optional[int], server_uuid: Optional[str]) -> Optional[bool]:
    """Whether ``checkpoint`` was taken on the server of this identity (see
    :meth:`Checkpoint.same_server`); ``None`` when that cannot be told."""
    return checkpoint.same_server(server_id, server_uuid)


def resume_point(checkpoint: Checkpoint, server_id: Optional[int], server_uuid: Optional[str]) -> Checkpoint:
    """Where a load that stopped at ``checkpoint`` resumes on the server of this identity: the
    checkpoint itself on its own server, its GTID state alone on another one. Raises
    :class:`ServerChangedError` for a checkpoint of another server that has no GTIDs."""
    if same_server(checkpoint, server_id, server_uuid) is not False or not checkpoint.has_coordinates:
        return checkpoint
    was = describe_server(checkpoint.server_uuid, checkpoint.server_id)
    now = describe_server(server_uuid, server_id)
    if checkpoint.gtid is None or checkpoint.gtid.is_empty():
        raise ServerChangedError(
            f"the checkpoint [{checkpoint}] was taken on {was}, but the server is now {now}: its binlog "
            "coordinates mean nothing here and it holds no GTIDs to resume by",
            "point the connection back at the server of the checkpoint, or take a new snapshot "
            "(backfill mode 'snapshot'); with GTIDs on (gtid_mode=ON on MySQL) a failover resumes by "
            "itself")
    log.warning("the checkpoint [%s] was taken on %s, the server is now %s: resuming by GTID %s",
                checkpoint, was, now, checkpoint.gtid)
    return Checkpoint(gtid=checkpoint.gtid, flavor=checkpoint.flavor, server_id=checkpoint.server_id,
                      server_uuid=checkpoint.server_uuid)


def require_not_behind(resume: Checkpoint, server_gtid) -> None:
    """For a load resuming by GTID on another server: refuse a server whose GTID state
    (``server_gtid``) lacks transactions the checkpoint has loaded (a replica promoted before it
    had them: they are not on this server, and the load cannot go on from there)."""
    if resume.has_coordinates or resume.gtid is None:
        return
    if server_gtid is None or type(server_gtid) is not type(resume.gtid) or not server_gtid.contains(resume.gtid):
        raise ReplicaError(
            f"the server is behind the checkpoint: its GTID state {server_gtid or '(empty)'} lacks "
            f"transactions of the checkpoint's {resume.gtid}, loaded from the server it was taken on "
            "(a replica promoted before it had them)",
            "point the connection at a server that has them, or take a new snapshot (backfill mode "
            "'snapshot') to load this server's data as it is")


__all__ = ["ServerChangedError", "describe_server", "require_not_behind", "resume_point", "same_server"]
