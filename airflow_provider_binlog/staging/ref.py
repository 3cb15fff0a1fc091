"""Where loads stage their data and with which credentials: one :class:`StagingRef`, made once
and handed to the dump, the snapshot and the merge, so that a location never travels without
the connection that opens it."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Optional

from ..errors import ProviderError


class StagingRefError(ProviderError, ValueError):
    """A staging location or connection id that is not one; the message says what to give."""


@dataclass(frozen=True)
class StagingRef:
    """A staging location and the Airflow connection holding its credentials.

    ``location`` is a local directory (or ``file://``), or an object store prefix (``s3://``,
    ``gs://``, ``abfs://``), shared by the workers and the Spark executors. ``conn_id`` names
    an ``aws``, ``google_cloud_platform`` or ``wasb`` connection with the credentials of a
    location on S3, GCS or Azure (default: each machine's credential chain; a local location
    needs none). Both may be Jinja templates where an operator takes the reference.
    """

    location: str
    conn_id: Optional[str] = None

    #: the members an operator renders as templates
    template_fields: ClassVar[tuple[str, ...]] = ("location", "conn_id")

    def __post_init__(self) -> None:
        if not isinstance(self.location, str) or not self.location.strip():
            raise StagingRefError(f"location must be a non-empty path or URI (a directory, s3://bucket/prefix, "
                                  f"gs://..., abfs://...), not {self.location!r}")
        if self.conn_id is not None and (not isinstance(self.conn_id, str) or not self.conn_id.strip()):
            raise StagingRefError(f"conn_id must be the id of an Airflow connection (aws, google_cloud_platform "
                                  f"or wasb) or None, not {self.conn_id!r}")

    def serialize(self) -> dict[str, Optional[str]]:
        """Its fields, as Airflow shows a rendered template field that has this method."""
        return {"location": self.location, "conn_id": self.conn_id}

    @classmethod
    def of(cls, value: Any) -> "StagingRef":
        """``value`` as a reference: a :class:`StagingRef` as it is, a location (text or a path)
        with no connection."""
        if isinstance(value, cls):
            return value
        if isinstance(value, str) or hasattr(value, "__fspath__"):
            return cls(str(value))
        raise StagingRefError(f"staging must be a StagingRef(location, conn_id) or a location, "
                              f"not {type(value).__name__}")


__all__ = ["StagingRef", "StagingRefError"]
