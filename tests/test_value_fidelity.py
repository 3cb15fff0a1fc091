"""Every value the staging files can hold lands in Iceberg unchanged: DATE/DATETIME over
MySQL's whole range, also next to zero dates."""
from __future__ import annotations

import datetime as dt

from airflow_provider_binlog.codec import constants as C
from airflow_provider_binlog.codec.events import Column
from airflow_provider_binlog.staging.convert import ColumnStager, Counters


def test_valid_dates_next_to_a_zero_date_keep_their_values():
    """The column decoders give days/microseconds for valid dates and MySQL's text for zero
    dates: a column holding both stages the numbers, not nulls."""
    counters = Counters()
    days = ColumnStager(Column(1, "d", C.MYSQL_TYPE_DATE, 0), counters).array(
        [-354285, "0000-00-00", 2932896])
    micros = ColumnStager(Column(2, "dtm", C.MYSQL_TYPE_DATETIME2, 6), counters).array(
        [-30610224000000000, "0000-00-00 00:00:00.000000", 253402300799999999])
    assert days.to_pylist() == [dt.date(1000, 1, 1), None, dt.date(9999, 12, 31)]
    assert micros.to_pylist() == [dt.datetime(1000, 1, 1), None,
                                  dt.datetime(9999, 12, 31, 23, 59, 59, 999999)]
    assert counters.invalid_temporals == 2
