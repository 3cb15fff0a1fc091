"""docs/reference.md is generated from the code (docs/make_reference.py): the committed page is
the one the code makes now, and every argument it lists has a meaning in its docstring."""
from __future__ import annotations

import difflib

from tests.unit.docs.pages import ROOT, generator

#: Arguments whose docstring says nothing of them (the reference shows an empty meaning). Each
#: one listed must still exist and still lack a meaning: document it, then take it off.
UNDESCRIBED = {("make_cdc_dags", "start_date"), ("make_cdc_dags", "tags")}


def test_the_reference_page_is_the_one_the_code_generates():
    make = generator()
    committed = (ROOT / "docs" / "reference.md").read_text()
    generated = make.render()
    if committed != generated:
        diff = "".join(list(difflib.unified_diff(committed.splitlines(True), generated.splitlines(True),
                                                 "docs/reference.md (committed)", "generated"))[:60])
        raise AssertionError(f"docs/reference.md is out of date; regenerate it with `{make.COMMAND}` "
                             f"(from the repository's root) and commit it:\n{diff}")


def test_the_reference_covers_the_factory_and_every_operator_sensor_trigger_and_hook_the_provider_registers():
    names = {entry.name for entry in generator().entries()}
    assert names == {"make_cdc_dags", "OnNewBinlogData", "StagingRef", "LakeSettings", "SparkSettings", "MergeSettings",
                     "SnapshotSettings", "BatchLimits", "WaitSettings", "BinlogDumpOperator", "BinlogSnapshotOperator",
                     "BinlogStagingRetentionOperator",
                     "BinlogMergeOperator", "BinlogPositionSensor", "BinlogPositionTrigger", "BinlogNewDataTrigger",
                     "BinlogHook", "IcebergCatalogHook"}


def test_every_argument_in_the_reference_has_a_meaning():
    empty = {(entry.name, argument.name) for entry in generator().entries() for argument in entry.arguments
             if not argument.meaning}
    assert empty - UNDESCRIBED == set(), "give these arguments a :param line in their docstring"
    assert UNDESCRIBED - empty == set(), "these are described now: take them off UNDESCRIBED"


def test_every_param_line_of_a_docstring_names_an_argument():
    stale = {(entry.name, param) for entry in generator().entries() for param in entry.params
             if param not in {argument.name for argument in entry.arguments}}
    assert stale == set()


def test_an_argument_without_its_own_param_line_points_at_the_one_that_describes_it():
    factory = next(e for e in generator().entries() if e.name == "make_cdc_dags")
    arguments = {a.name: a for a in factory.arguments}
    assert arguments["masking_secret_conn_id"].meaning == "see `masking`"
    assert arguments["masking_secret_conn_id"].described_by == "param:masking"
    assert arguments["tables"].described_by == "param" and arguments["tables"].default == "required"
    assert arguments["schedule"].default == "`'*/15 * * * *'`"


def test_a_default_computed_at_import_is_shown_as_written():
    sensor = next(e for e in generator().entries() if e.name == "BinlogPositionSensor")
    deferrable = next(a for a in sensor.arguments if a.name == "deferrable")
    assert deferrable.default == "`conf.getboolean('operators', 'default_deferrable', fallback=False)`"
    assert sensor.kwargs_to.startswith("Airflow's `BaseSensorOperator`")
