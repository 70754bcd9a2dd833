"""Vev through its DuckDB extension: one in-memory DuckDB connection with `vev.duckdb_extension`
loaded, every call a table function over the database file at `path`."""

import time

# `settle`: the files count as settled once their sizes hold this long; waiting longer than
# SETTLE_LIMIT_S is an error.
SETTLE_QUIET_S = 3.0
SETTLE_POLL_S = 0.25
SETTLE_LIMIT_S = 300.0

import duckdb

from dataset import VEV_SCHEMA
from peers import file_bytes


class VevEngine:
    label = "Vev"

    def __init__(self, extension, path):
        self.path = path
        self.con = duckdb.connect(":memory:", config={"allow_unsigned_extensions": "true"})
        self.con.execute(f"LOAD '{extension}'")

    def load(self, dataset):
        """The schema, then every transaction of the dataset through `vev_transact`, each a
        durable transaction. Seconds, and the transaction id of each dataset transaction."""
        texts = [dataset.vev_tx(tx) for tx in dataset.txs]
        start = time.perf_counter()
        self.transact(VEV_SCHEMA)
        tx_ids = [self.transact(text) for text in texts]
        return time.perf_counter() - start, tx_ids

    def transact(self, text):
        """Transact `text`; its transaction id."""
        sql = "SELECT max(tx) FROM vev_transact(?, ?)"
        return self.con.execute(sql, [self.path, text]).fetchall()[0][0]

    def transact_one(self, k):
        """One durable transaction of one datom: a new entity's name."""
        text = f'[[:db/add "n" :person/name "Tx {k}"]]'
        self.con.execute("SELECT count(*) FROM vev_transact(?, ?)", [self.path, text]).fetchall()

    def attribute(self, ident):
        """{e: v} of one attribute (to read entity ids back as values; untimed)."""
        sql = "SELECT e, v FROM vev_attribute(?, ?)"
        return dict(self.con.execute(sql, [self.path, ident]).fetchall())

    def settle(self):
        """Wait for the checkpoint Vev starts on its own thread once a million datoms have
        been logged since the last one (it writes the index segments): until the file and
        its WAL keep their sizes for SETTLE_QUIET_S. The seconds it took the files to
        settle."""
        start = time.perf_counter()
        last, quiet_since = None, start
        while True:
            now, sizes = time.perf_counter(), self.store_bytes()
            if sizes != last:
                last, quiet_since = sizes, now
            elif now - quiet_since >= SETTLE_QUIET_S:
                return quiet_since - start
            if now - start > SETTLE_LIMIT_S:
                raise TimeoutError(f"{self.path} still changing after {SETTLE_LIMIT_S} s")
            time.sleep(SETTLE_POLL_S)

    def store_bytes(self):
        return {"file": file_bytes(self.path), "wal": file_bytes(self.path + "-wal")}
