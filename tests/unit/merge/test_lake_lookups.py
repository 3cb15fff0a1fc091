"""The Lake (merge/lake/base.py) looks up each Java class once and makes each table's
identifier once: through py4j every step of a lookup is a round trip, and every package step a
search of the JVM's class path."""
from __future__ import annotations

import pytest

from airflow_provider_binlog.merge.errors import MergeJobError
from airflow_provider_binlog.merge.lake.base import Lake


class Step:
    """A py4j view of a package or class: each attribute asked for is counted."""

    def __init__(self, path: str, asked: list) -> None:
        self._path, self._asked = path, asked

    def __getattr__(self, part: str) -> "Step":
        path = f"{self._path}.{part}" if self._path else part
        self._asked.append(path)
        return Step(path, self._asked)

    def __call__(self, *args):
        return (self._path, args)


class Gateway:
    def __init__(self) -> None:
        self.asked: list[str] = []
        self.jvm = Step("", self.asked)


def test_a_table_identifier_is_parsed_once_from_the_levels_and_kept():
    gateway = Gateway()
    lake = Lake("lake", catalog=None, gateway=gateway)
    first = lake.identifier("lake.shop_cdc.shop__orders")
    assert first == ("org.apache.iceberg.catalog.TableIdentifier.parse", ("shop_cdc.shop__orders",))
    asked = len(gateway.asked)
    assert lake.identifier("lake.shop_cdc.shop__orders") is first
    assert len(gateway.asked) == asked  # no lookup at all the second time
    assert lake.identifier("lake.a.b.t") == ("org.apache.iceberg.catalog.TableIdentifier.parse", ("a.b.t",))
    assert gateway.asked.count("org.apache.iceberg.catalog.TableIdentifier") == 1


@pytest.mark.parametrize("table", ["other.ns.t", "lake.t"])
def test_a_table_of_another_catalog_or_without_namespace_is_refused(table):
    with pytest.raises(MergeJobError, match="is not a table of catalog lake"):
        Lake("lake", catalog=None, gateway=Gateway()).identifier(table)


def test_a_java_class_is_looked_up_once():
    gateway = Gateway()
    lake = Lake("lake", catalog=None, gateway=gateway)
    assert lake.java_class("org.apache.iceberg.SchemaParser") is lake.java_class("org.apache.iceberg.SchemaParser")
    assert gateway.asked == ["org", "org.apache", "org.apache.iceberg", "org.apache.iceberg.SchemaParser"]
