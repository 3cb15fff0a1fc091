"""The provider's asset URIs as Airflow sees them: registered schemes that check their form, a
factory, and the OpenLineage name of an Iceberg table's asset."""
from __future__ import annotations

from urllib.parse import urlsplit

import pytest

from airflow_provider_binlog.utils.assets import (
    convert_asset_to_openlineage,
    create_asset,
    sanitize_source_uri,
    sanitize_uri,
)


def test_an_iceberg_uri_names_catalog_namespace_and_table_or_is_refused_with_the_form():
    assert sanitize_uri(urlsplit("iceberg://lake/shop_cdc/shop__orders")).geturl() == \
        "iceberg://lake/shop_cdc/shop__orders"
    for bad in ("iceberg://lake", "iceberg://lake/shop_cdc", "iceberg:///shop_cdc/t", "iceberg://lake/a/b/c",
                "iceberg://lake/a/b?x=1"):
        with pytest.raises(ValueError, match=r"iceberg://<catalog>/<namespace>/<table>"):
            sanitize_uri(urlsplit(bad))
    assert sanitize_source_uri(urlsplit("binlog://shop")).netloc == "shop"
    with pytest.raises(ValueError, match="binlog://<source_id>"):
        sanitize_source_uri(urlsplit("binlog://shop/orders"))
    assert sanitize_source_uri(urlsplit("binlog://shop/changes")).path == "/changes"


def test_airflow_checks_the_schemes_through_the_provider_and_names_the_openlineage_dataset():
    from airflow.providers_manager import ProvidersManager
    from airflow.sdk import Asset

    manager = ProvidersManager()
    assert manager.asset_uri_handlers["iceberg"] is sanitize_uri
    assert manager.asset_uri_handlers["binlog"] is sanitize_source_uri
    assert manager.asset_to_openlineage_converters["iceberg"] is convert_asset_to_openlineage
    with pytest.raises(ValueError, match="not an Iceberg table's asset URI"):
        Asset("iceberg://lake/only_a_namespace")
    asset = create_asset(catalog="lake", namespace="shop_cdc", table="shop__orders", extra={"k": 1})
    assert isinstance(asset, Asset) and asset.uri == "iceberg://lake/shop_cdc/shop__orders"
    dataset = convert_asset_to_openlineage(asset, None)
    assert (dataset.namespace, dataset.name) == ("iceberg://lake", "shop_cdc.shop__orders")
