"""Per-table planning of a batch (:func:`prepare_table`): what is already applied, the staged
files and layouts, column renames, the schema statements, the defaults; nothing is committed."""

from __future__ import annotations

import dataclasses
import json
import logging
from typing import Any, Callable, Optional

from ...schema_history.ops import AlterOp
from ...staging.contract import ENVELOPE_COLUMNS
from ...staging.storage import read_parquet_schema
from ...common.tables import iceberg_table_name
from ..column_types import sql_type
from ..contract import TableContract
from ..layout import TableLayouts
from ..batches import Batch
from ..ddl_plan import column_defaults as _column_defaults
from ..ddl_plan import column_renames as _column_renames
from ..ddl_plan import ddl_ops as _ddl_ops
from ..ddl_plan import insert_defaults as _insert_defaults
from ..errors import MergeJobError, SparkNeeded
from ..exactly_once import table_gate
from ..iceberg_contract import (
    MODE_CHANGELOG,
    MODE_MERGE,
    PROP_CONTRACT_COLUMNS,
    PROP_MODE,
    PROP_PRIMARY_KEY,
    PROP_SOURCE,
)
from ..schema_plan import (
    CHANGELOG_ENVELOPE_NAMES,
    Columns,
    SchemaPlan,
    TableCreation,
    create_table_statements,
    plain_creation,
    plan_schema,
    schema_statements,
)
from ..sql import literal as _lit
from ..sql import quote as _q
from ..direct_changes import DirectChanges
from ..staged_facts import StagedFacts, staged_facts
from .base import Lake
from .state import NOTHING, AppliedState, applied_state, committed_batch


@dataclasses.dataclass
class TableWork:
    schema: str
    table: str
    name: str                          # catalog.namespace.table
    entry: Optional[dict]              # the manifest's table entry (None: DDL only)
    files: list[str]
    layouts: list[Columns]             # per staged file: its image's columns and staged Arrow types
    mode: str
    primary_key: list[str]
    exists: bool
    properties: dict
    state: AppliedState
    since: Optional[tuple[int, int]]   # apply only changes at or after this position
    resets: list[dict]                 # TRUNCATE / DROP TABLE records to apply, in order
    plan: Optional[SchemaPlan] = None
    defaults: dict = dataclasses.field(default_factory=dict)  # columns added with a default
    fields: list = dataclasses.field(default_factory=list)    # per file: column -> its staged field name
    insert_defaults: dict = dataclasses.field(default_factory=dict)  # column -> what an INSERT leaving it out gives
    statements: list[str] = dataclasses.field(default_factory=list)
    #: statements already run (by a direct commit that then left the table to Spark)
    statements_run: list[str] = dataclasses.field(default_factory=list)
    status: str = "pending"
    #: reads what the staged files say (without Spark) on first use of :attr:`facts`
    read_facts: Optional[Callable[[], Optional[StagedFacts]]] = None
    _facts: Optional[StagedFacts] = None
    contract: TableContract = dataclasses.field(default_factory=TableContract)
    #: a change log's position already logged, inside a snapshot batch: its changes before are not appended
    logged_to: Optional[tuple[int, int]] = None
    #: the columns of the data-contract options the table has (after its statements)
    contract_columns: Columns = dataclasses.field(default_factory=list)
    #: the statements only create the table: what they say, for Iceberg's Java API
    creation: Optional[TableCreation] = None
    #: the changes folded before the batch's commits (``direct_commit.fold_ahead``), until committed
    folded: Optional[DirectChanges] = None
    #: a snapshot's rows read hold each key once (the source's primary key), unless its direct
    #: commit found one twice: then Spark collapses every row, not only the changed keys'
    reads_distinct: bool = True
    #: the staged files as the Spark engine reads them, made on its first use
    frames_read: list = dataclasses.field(default_factory=list)

    @property
    def source(self) -> str:
        return f"{self.schema}.{self.table}"

    @property
    def facts(self) -> Optional[StagedFacts]:
        """What the staged files say (None: more than is read on the driver); read when first
        asked for, so a snapshot committed directly, which needs none, does not read them."""
        if self.read_facts is not None:
            self._facts, self.read_facts = self.read_facts(), None
        return self._facts

    @property
    def staged_rows(self) -> int:
        return sum(self.entry["rows"].values()) if self.entry else 0

    @property
    def staged_bytes(self) -> int:
        """The bytes of the staged files, as the manifest records them (checked when loaded)."""
        return sum(int(f["bytes"]) for f in self.entry["files"]) if self.entry else 0


def float_key(work: TableWork) -> bool:
    """Whether a key column of the table is a FLOAT or a DOUBLE: its -0 and +0 are one key in
    the source but two in Arrow's hashing and sorting, so only Spark (which compares them as
    equal in joins and groupings) merges such a table."""
    import pyarrow as pa

    plan = work.plan
    return plan is not None and any(pa.types.is_floating(plan.type_of(k))
                                    for k in work.primary_key if k in dict(plan.columns))


def run_statements(lake: Lake, work: TableWork, sql: Optional[Callable[[str], Any]] = None) -> list[str]:
    """Run the table's schema statements through ``sql`` (Spark SQL); without it, a table's
    plain creation through Iceberg's Java API, and SparkNeeded for any other statement. They
    are then taken off ``work.statements``. Returns them."""
    ran = list(work.statements)
    if sql is None and ran:
        if work.creation is None:
            raise SparkNeeded(f"{work.name}: {ran[0].split('(')[0].strip()}")
        lake.create_table(work.name, work.creation.columns, work.creation.properties, work.creation.order)
    else:
        for statement in ran:
            log.info("%s", statement)
            assert sql is not None
            sql(statement)
    work.statements = []
    work.statements_run = ran
    return ran


def _altered_layout(batch: Batch, work: "TableWork") -> Optional[Columns]:
    """The table's columns after the batch's last ``alter`` op that lists them (the dump's
    schema history gives them), as staged types; None when the batch has none."""
    from airflow_provider_binlog.schema_history import ColumnDef
    from airflow_provider_binlog.schema_history.columns import codec_column
    from airflow_provider_binlog.staging.contract import arrow_type_for

    last = None
    for position, _record, op in _ddl_ops(batch):
        if isinstance(op, AlterOp) and op.table == (work.schema, work.table) and op.columns \
                and (work.since is None or position >= work.since):
            last = op.columns
    if last is None:
        return None
    return [(c["name"], arrow_type_for(codec_column(ColumnDef.from_json(c)))) for c in last]


log = logging.getLogger(__name__)

def contract_columns(contract: TableContract) -> Columns:
    """The data contract's extra columns of a table, with their Arrow types."""
    import pyarrow as pa

    types = {"string": pa.string(), "timestamp": pa.timestamp("us", tz="UTC"), "bigint": pa.int64(),
             "boolean": pa.bool_()}
    return [(n, types[t]) for n, t in contract.extra_columns()]


# long: one table's plan in the order its checks must run (resets, schema statements, contract,
# layout)
def prepare_table(lake: Lake, batch: Batch, catalog: str, namespace: str,
                   schema: str, table: str, entry: Optional[dict], resets: list[dict],
                   layouts: TableLayouts, contract: Optional[TableContract] = None,
                   change_log_of: bool = False) -> TableWork:
    """Plan one table of the batch. ``change_log_of``: plan instead the append-only change log
    of the table (``contract.change_log`` is its name's suffix)."""
    suffix = (contract.change_log or "") if change_log_of and contract is not None else ""
    name = f"{catalog}.{namespace}.{iceberg_table_name(schema, table)}{suffix}"
    loaded = lake.load_table(name)  # once: its properties, state and columns are of one version
    exists = loaded is not None
    properties = lake.properties(name, loaded) if exists else {}
    source = json.dumps([schema, table])
    if exists and properties.get(PROP_SOURCE) not in (None, source):
        raise MergeJobError(f"{name} holds source table {properties.get(PROP_SOURCE)}, not "
                            f"{schema}.{table}; refusing to write into it")
    if exists and PROP_SOURCE not in properties:
        raise MergeJobError(f"{name} exists but was not created by the merge job (no "
                            f"{PROP_SOURCE} property); refusing to write into it")
    primary_key = list(entry["primary_key"]) if entry else json.loads(properties.get(PROP_PRIMARY_KEY, "[]"))
    mode = properties.get(PROP_MODE) or (MODE_MERGE if primary_key and not suffix else MODE_CHANGELOG)
    if suffix and mode != MODE_CHANGELOG:
        raise MergeJobError(f"{name} should be the change log of {schema}.{table} but is merged by key; "
                            f"give the change log another suffix")
    if mode == MODE_MERGE and not primary_key:
        raise MergeJobError(f"{schema}.{table} has no primary key any more, but {name} is merged "
                            f"by key; give the table a primary key again, or rename the Iceberg "
                            f"table to start a new one (it will be a change log)")
    state = applied_state(lake, name, loaded=loaded) if exists else NOTHING
    work = TableWork(schema, table, name, entry, [], [], mode, primary_key, exists, properties, state, None, [])
    if mode == MODE_MERGE and contract is not None:  # a change log has its envelope already
        work.contract = contract
    gate = table_gate(batch.start, batch.end, batch.batch_id, batch.manifest.is_snapshot, mode == MODE_CHANGELOG,
                      name, state.checkpoint, lambda: committed_batch(lake, name, batch.batch_id))
    if gate.applied:
        work.status = "already-applied"
        return work
    work.since, work.logged_to = gate.since, gate.logged_to
    work.resets = [r for r in resets if work.since is None or r["_position"] >= work.since]
    altered = _altered_layout(batch, work) if mode == MODE_MERGE else None
    if entry is None and not work.resets and not (altered and exists):
        work.status = "no-change"
        return work
    if entry is None and not exists:
        work.status = "no-change"  # a TRUNCATE of a table never loaded: nothing to empty
        return work
    renames = _column_renames(batch, work) if mode == MODE_MERGE else []
    if renames:
        renamed_to = dict(renames)
        primary_key = work.primary_key = [renamed_to.get(k, k) for k in primary_key]
    if entry is not None:
        work.files = [str(p) for p in batch.manifest.files(entry)]
        for path in work.files:
            staged = read_parquet_schema(path)  # from the file's footer
            missing = [c for c in ENVELOPE_COLUMNS if c not in staged.names]
            if missing:
                raise MergeJobError(f"{path}: not a staged file of this format (no {', '.join(missing)})")
            image = staged.field("_after").type
            work.layouts.append([(f.name, f.type) for f in image])
        for old, new in renames:
            # staged rows from before the rename name the column as it was: read them under the new name
            for k, layout in enumerate(work.layouts):
                names_here = {n for n, _ in layout}
                if old in names_here and new not in names_here:
                    while len(work.fields) < len(work.layouts):
                        work.fields.append({})
                    source_field = work.fields[k].pop(old, old)
                    work.fields[k][new] = source_field
                    work.layouts[k] = [(new if n == old else n, t) for n, t in layout]
        if mode == MODE_MERGE:
            for part, layout in zip(work.files, work.layouts):
                missing = [k for k in primary_key if k not in {n for n, _ in layout}]
                if missing:
                    raise MergeJobError(f"{part}: primary key column(s) {missing} of "
                                        f"{schema}.{table} are not staged")
    if mode == MODE_CHANGELOG:
        for layout in work.layouts:
            clash = [n for n, _ in layout if n in CHANGELOG_ENVELOPE_NAMES]
            if clash:
                raise MergeJobError(f"{schema}.{table}: column(s) {clash} clash with the envelope "
                                    f"columns of its change-log table")
    current = None
    wanted = contract_columns(work.contract)
    kept = set(json.loads(properties.get(PROP_CONTRACT_COLUMNS, "[]"))) | {n for n, _ in wanted}
    actual: Columns = []
    if exists:
        current = actual = lake.columns(name, loaded)
        if mode == MODE_CHANGELOG:
            current = [c for c in current if c[0] not in CHANGELOG_ENVELOPE_NAMES]
        else:  # the data-contract columns are not the source's
            current = [c for c in current if c[0] not in kept]
    rename_statements = []
    for old, new in renames:
        if current is not None and old in dict(current) and new not in dict(current):
            rename_statements.append(f"ALTER TABLE {name} RENAME COLUMN {_q(old)} TO {_q(new)}")
            current = [(new if n == old else n, t) for n, t in current]
    # the table's columns after the batch's last ALTER (from the schema history), so that a
    # column added with a default reaches the table in the batch of its ALTER, whether or not
    # rows follow it there
    work.plan = plan_schema(current, work.layouts + ([altered] if altered and (exists or work.layouts) else []),
                            table=f"{schema}.{table}", drop_columns=mode == MODE_MERGE)
    if mode == MODE_MERGE:
        for key in primary_key:
            if key not in dict(work.plan.columns):
                raise MergeJobError(f"{schema}.{table}: primary key column {key!r} is not a column")
            if work.plan.valid_from.get(key, 0) != 0:
                raise MergeJobError(f"{schema}.{table}: primary key column {key!r} was added or "
                                    f"re-added within batch {batch.batch_id}")
    if mode == MODE_MERGE:
        work.contract.check_columns([n for n, _ in work.plan.columns], f"{schema}.{table}")
    ops = list(work.plan.operations)
    have = {n for n, _ in actual}
    creation = None
    if ops and ops[0][0] == "create":
        statements = create_table_statements(name, (schema, table), list(ops[0][1]) + wanted, mode,
                                             primary_key, layouts.for_table(schema, table))
        if len(ops) == 1 and not wanted and not renames:
            creation = plain_creation((schema, table), list(ops[0][1]), mode, primary_key,
                                      layouts.for_table(schema, table))
        statements += schema_statements(name, ops[1:], {})
        have |= {n for n, _ in wanted}
    else:
        pre = []
        if mode == MODE_MERGE and json.loads(properties.get(PROP_PRIMARY_KEY, "[]")) != primary_key:
            pre = [("order", primary_key), ("properties", {PROP_PRIMARY_KEY: json.dumps(primary_key)})]
        statements = schema_statements(name, pre + ops, {})
    to_add = [(n, t) for n, t in wanted if n not in have]
    if to_add:  # an option turned on for a table that exists
        statements.append(f"ALTER TABLE {name} ADD COLUMNS ("
                          + ", ".join(f"{_q(n)} {sql_type(t)}" for n, t in to_add) + ")")
    if wanted and json.loads(properties.get(PROP_CONTRACT_COLUMNS, "[]")) != sorted(kept):
        statements.append(f"ALTER TABLE {name} SET TBLPROPERTIES ({_lit(PROP_CONTRACT_COLUMNS)}="
                          f"{_lit(json.dumps(sorted(kept)))})")
    work.contract_columns = wanted
    if mode == MODE_CHANGELOG:  # image columns stay after the envelope
        after_envelope = f" AFTER {_q(CHANGELOG_ENVELOPE_NAMES[-1])}"
        statements = [s[:-len(" FIRST")] + after_envelope if s.startswith("ALTER") and s.endswith(" FIRST")
                      else s for s in statements]
    work.statements = rename_statements + statements
    work.creation = creation
    if mode == MODE_MERGE:
        work.defaults = _column_defaults(batch, work)
        work.insert_defaults = _insert_defaults(batch, work)
    if mode == MODE_MERGE and work.files and not any(v > 0 for v in work.plan.valid_from.values()):
        columns = [n for n, _ in work.plan.columns]
        work.read_facts = lambda: staged_facts(work.files, primary_key, columns, work.fields,
                                               staged_bytes=work.staged_bytes)
    work.status = "ready"
    return work
