"""The two SQL peers: a `datoms` table in a DuckDB file (a) and in a SQLite file (b), each
loaded through its own bulk path, each with a small `attributes` table (its schema).

(a) DuckDB: `datoms(e, a, v_int, v_str, tx, added)`; the bulk load sorts the rows by
(a, e, v, tx), so that each attribute's rows are contiguous and DuckDB's per-row-group min/max
skips the other attributes, and adds no ART index (ART indexes made these queries slower in
DuckDB 2.0: its joins do not use them; measured in `README.md`).
(b) SQLite: `datoms(e, a, v, tx, added)` WITHOUT ROWID, keyed by (e, a, v, tx) (the EAVT order:
an entity's values, and the retraction probe of `sql.Sql.current`), plus indexes on (a, v)
(AVET: lookups by value and ranges; it carries the key's e and tx) and on tx (since); WAL,
`synchronous=FULL`, a 256 MB page cache and memory-mapped reads.
"""

import csv
import os
import sqlite3
import time

import duckdb

from dataset import ATTRIBUTES, NAME, TX_INSTANT
from sql import STRING_ATTRIBUTES, DuckDbSql, SqliteSql

SQLITE_PRAGMAS = [
    "PRAGMA journal_mode=WAL",
    "PRAGMA synchronous=FULL",
    "PRAGMA cache_size=-262144",
    "PRAGMA mmap_size=268435456",
]


def file_bytes(path):
    return os.path.getsize(path) if os.path.exists(path) else 0


class Peer:
    """What the benchmark asks of a SQL peer; `label` names it in the report."""

    label = ""
    sql = None

    def __init__(self, path):
        self.path = path
        self.con = None
        # The next entity and transaction ids of single-datom transactions (kept in memory, as
        # an implementation would keep its id counters).
        self.next_e = None
        self.next_tx = None

    def store_bytes(self):
        return {"file": file_bytes(self.path), "wal": file_bytes(self.wal_path())}

    def start_transactions(self, rows):
        self.next_e = max(r[0] for r in rows) + 1
        self.next_tx = max(r[3] for r in rows) + 1

    def transact_one(self, k):
        """One durable transaction of one datom (a new entity's name) and its instant."""
        e, t = self.next_e, self.next_tx
        self.next_e, self.next_tx = e + 1, t + 1
        params = {"e": e, "name": f"Tx {k}", "t": t, "ms": 1_800_000_000_000 + k}
        self.con.execute(self.insert_one, params).fetchall()


class DuckDbPeer(Peer):
    label = "DuckDB"
    sql = DuckDbSql()
    insert_one = (
        f"INSERT INTO datoms VALUES ($e, {NAME}, NULL, $name, $t, true),"
        f" ($t, {TX_INSTANT}, $ms, NULL, $t, true)"
    )

    def wal_path(self):
        return self.path + ".wal"

    def load(self, rows, csv_path):
        """Bulk load: COPY of a CSV file written before the clock starts. Seconds."""
        with open(csv_path, "w", newline="") as f:
            w = csv.writer(f)
            for e, a, v, tx, added in rows:
                s = a in STRING_ATTRIBUTES
                w.writerow((e, a, "" if s else v, v if s else "", tx, "true" if added else "false"))
        start = time.perf_counter()
        self.con = duckdb.connect(self.path)
        self.con.execute(
            "CREATE TABLE attributes (a INTEGER PRIMARY KEY, ident VARCHAR UNIQUE,"
            " value_type VARCHAR, cardinality VARCHAR, uniqueness VARCHAR)"
        )
        self.con.executemany("INSERT INTO attributes VALUES (?, ?, ?, ?, ?)", ATTRIBUTES)
        self.con.execute(
            "CREATE TABLE datoms (e BIGINT NOT NULL, a INTEGER NOT NULL, v_int BIGINT,"
            " v_str VARCHAR, tx BIGINT NOT NULL, added BOOLEAN NOT NULL)"
        )
        self.con.execute(
            "INSERT INTO datoms SELECT * FROM read_csv($path, header = false, columns = {"
            "'e': 'BIGINT', 'a': 'INTEGER', 'v_int': 'BIGINT', 'v_str': 'VARCHAR',"
            " 'tx': 'BIGINT', 'added': 'BOOLEAN'}) ORDER BY a, e, v_int, v_str, tx",
            {"path": csv_path},
        )
        seconds = time.perf_counter() - start
        os.remove(csv_path)
        # Untimed: fold the WAL into the file before its size is measured.
        self.con.execute("CHECKPOINT")
        return seconds


class SqlitePeer(Peer):
    label = "SQLite"
    sql = SqliteSql()
    insert_one = (
        f"INSERT INTO datoms VALUES ($e, {NAME}, $name, $t, 1), ($t, {TX_INSTANT}, $ms, $t, 1)"
    )

    def wal_path(self):
        return self.path + "-wal"

    def load(self, rows, _csv_path):
        """Bulk load: one write batch of `executemany`, then the indexes. Seconds."""
        start = time.perf_counter()
        self.con = sqlite3.connect(self.path, isolation_level=None)
        for pragma in SQLITE_PRAGMAS:
            self.con.execute(pragma)
        self.con.execute("BEGIN")
        self.con.execute(
            "CREATE TABLE attributes (a INTEGER PRIMARY KEY, ident TEXT UNIQUE,"
            " value_type TEXT, cardinality TEXT, uniqueness TEXT)"
        )
        self.con.executemany("INSERT INTO attributes VALUES (?, ?, ?, ?, ?)", ATTRIBUTES)
        self.con.execute(
            "CREATE TABLE datoms (e INTEGER NOT NULL, a INTEGER NOT NULL, v NOT NULL,"
            " tx INTEGER NOT NULL, added INTEGER NOT NULL, PRIMARY KEY (e, a, v, tx))"
            " WITHOUT ROWID"
        )
        self.con.executemany("INSERT INTO datoms VALUES (?, ?, ?, ?, ?)", rows)
        self.con.execute("CREATE INDEX datoms_avet ON datoms (a, v, added)")
        self.con.execute("CREATE INDEX datoms_tx ON datoms (tx)")
        self.con.execute("COMMIT")
        self.con.execute("ANALYZE")  # statistics for the planner
        seconds = time.perf_counter() - start
        # Untimed: the WAL folded into the file before its size is measured.
        self.con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return seconds
