"""``python -m airflow_provider_binlog quickstart``: the main job end to end in a subprocess (a
private MariaDB, the example DAGs run with dag.test() on SQLite, merges on Iceberg's Java API into an
Iceberg warehouse on disk, Iceberg compared with MariaDB)."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import _require_mariadb, _require_spark

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.slow, pytest.mark.mariadb, pytest.mark.spark]


def quickstart(*args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "airflow_provider_binlog", "quickstart", *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=timeout)


def test_quickstart_loads_the_sample_shop_into_iceberg(tmp_path):
    _require_mariadb()
    _require_spark()
    workdir = tmp_path / "quickstart"
    done = quickstart("--workdir", str(workdir), "--rows", "50", "--rounds", "1")
    output = done.stdout
    assert done.returncode == 0, output[-4000:] + done.stderr[-4000:]
    assert "OK: Iceberg tables equal the MariaDB tables" in output
    assert "sample data: shop.customers 50 rows, shop.orders 100 rows" in output
    # the snapshot, then a round of changes loaded by the incremental DAG (the wheel's test runs
    # the quickstart too)
    runs = re.findall(r"^run (\d+): .*\((binlog_\w+), \d+ s\)$", output, re.M)
    assert runs == [("1", "binlog_backfill__shop"), ("2", "binlog_cdc__shop")]
    # the embedded default merges on Iceberg's Java API in the worker: no Spark application
    assert re.findall(r"^    merge engine: (\S+)$", output, re.M) == ["iceberg-java", "iceberg-java"]
    snapshot = output.split("run 2:")[0]
    assert re.search(r"shop\.customers\s+50 inserted\s+0 updated\s+0 deleted\s+-> lake\.shop_cdc\.shop__customers",
                     snapshot)
    assert re.search(r"shop\.orders\s+100 inserted\s+0 updated\s+0 deleted", snapshot)
    changes = [tuple(map(int, m)) for m in re.findall(r"(\d+) inserted\s+(\d+) updated\s+(\d+) deleted",
                                                      output.split("run 2:")[1])]
    assert len(changes) == 2 and sum(map(sum, changes)) > 0
    assert len(re.findall(r"end checkpoint: mariadb-bin\.\d+:\d+, gtid 0-\d+-\d+", output)) == 2
    assert output.count("asset events: iceberg://lake/shop_cdc/shop__customers, "
                        "iceberg://lake/shop_cdc/shop__orders") == 2
    counts = re.findall(r"lake\.shop_cdc\.(shop__\w+)\s+(\d+) rows\s+(shop\.\w+)\s+(\d+) rows\s+equal", output)
    assert [(c[0], c[2]) for c in counts] == [("shop__customers", "shop.customers"), ("shop__orders", "shop.orders")]
    assert all(c[1] == c[3] for c in counts)
    # the same tables read by PyIceberg, without a JVM: position deletes only, rows equal
    read = re.findall(r"^\s+shop_cdc\.(shop__\w+)\s+(\d+) rows\s+equal$", output.split("read by PyIceberg")[1], re.M)
    assert read == [("shop__customers", counts[0][1]), ("shop__orders", counts[1][1])]
    # everything under the work directory; Airflow's and Spark's output in the log
    assert (workdir / "airflow" / "airflow.db").is_file()
    assert (workdir / "airflow" / "dags" / "binlog_cdc.py").read_text() == (ROOT / "dags" / "binlog_cdc.py").read_text()
    assert (workdir / "warehouse" / "shop_cdc" / "shop__orders" / "metadata").is_dir()
    # and no merge submitted a Spark application
    assert "Spark-Submit cmd" not in (workdir / "quickstart.log").read_text()


def test_quickstart_refuses_a_directory_it_did_not_make(tmp_path):
    (tmp_path / "precious.txt").write_text("keep me")
    done = quickstart("--workdir", str(tmp_path), timeout=120)
    assert done.returncode == 1
    assert "not empty and was not made by the quickstart" in done.stderr
    assert (tmp_path / "precious.txt").read_text() == "keep me"
