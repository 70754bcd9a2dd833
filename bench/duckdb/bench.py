"""The DuckDB benchmark's driver: Vev through its DuckDB extension against a `datoms` table in
DuckDB (a) and in SQLite (b), on one dataset per size, one client, everything timed from Python.

`vev-bench duckdb` runs it in a virtual environment with the pinned `duckdb` wheel and renders
the JSON this prints on stdout (progress goes to stderr). Run alone:

    python bench.py --extension PATH/vev.duckdb_extension --work DIR [--sizes 100000]

Every timed call is `con.execute(sql, params).fetchall()`, the same for the three engines. Per
size: the three bulk loads (Vev's background checkpoint let finish before the peers load), the
store sizes, the check that every scenario gives the same answer in all three (the run stops
on the first difference), the query scenarios (each engine in turn, `--rounds` times),
`vev_attribute`'s scan rate, the floor of a call, and single-datom transactions.
"""

import argparse
import json
import os
import platform
import sqlite3
import sys
import time

import duckdb

import scenarios
from dataset import AGE, EMAIL, FRIENDS, NAME, UPDATE_TXS, Dataset
from peers import DuckDbPeer, SqlitePeer
from vev import VevEngine

# Warm-up before each engine's timed calls: at least this many calls and this long.
WARMUP_CALLS = 3
# Timed calls stop at --reps, or once they add up to --budget-ms (but never before MIN_REPS).
MIN_REPS = 5
# as_of reads the database after this many of the age-change transactions; since reads what
# the transactions after SINCE_AFTER of them changed.
AS_OF_AFTER = UPDATE_TXS // 2
SINCE_AFTER = UPDATE_TXS - 2
SCANNED = [":person/age", ":person/friends"]
FLOOR_DUCKDB = "SELECT * FROM range(1)"
FLOOR_SQLITE = "SELECT 1"


class Mismatch(Exception):
    pass


def log(message):
    print(message, file=sys.stderr, flush=True)


def call_ms(con, call):
    sql, params = call
    start = time.perf_counter_ns()
    con.execute(sql, params).fetchall()
    return (time.perf_counter_ns() - start) / 1e6


def measure(con, calls, args):
    """Timed milliseconds of `calls` taken in turn, after a warm-up."""
    start, i = time.perf_counter(), 0
    while i < WARMUP_CALLS or (time.perf_counter() - start) * 1e3 < args.warmup_ms:
        call_ms(con, calls[i % len(calls)])
        i += 1
    samples = []
    for j in range(args.reps):
        samples.append(call_ms(con, calls[j % len(calls)]))
        if j + 1 >= MIN_REPS and sum(samples) >= args.budget_ms:
            break
    return samples


def engine_calls(scenario, vev, peers):
    """(label, connection, calls, canonical answer of rows) of each engine."""
    out = [(vev.label, vev.con, scenario.vev_calls, scenario.vev_answer)]
    for peer in peers:
        sql = scenario.peer_sql(peer.sql)
        calls = [(sql, p) for p in scenario.peer_params]
        out.append((peer.label, peer.con, calls, scenario.peer_answer))
    return out


def check(scenario, engines):
    """Every engine's answer to every call of `scenario` is the same, and not all of them
    are empty. Mean rows per call."""
    answers = {}
    for label, con, calls, answer in engines:
        answers[label] = [answer(con.execute(sql, p).fetchall()) for sql, p in calls]
    (first, expected), *others = answers.items()
    for label, got in others:
        for k, (want, have) in enumerate(zip(expected, got)):
            if want != have:
                raise Mismatch(
                    f"{scenario.name}, call {k}: {first} answered {len(want)} rows"
                    f" (first {want[:3]}), {label} {len(have)} (first {have[:3]})"
                )
    if not any(expected):
        raise Mismatch(f"{scenario.name}: no call answered any row in any engine")
    return sum(len(a) for a in expected) / len(expected)


def check_counts(vev, peers):
    """The current datoms of each attribute number the same in every engine."""
    for ident, a in [(":person/email", EMAIL), (":person/name", NAME), (":person/age", AGE),
                     (":person/friends", FRIENDS)]:
        want = vev.con.execute("SELECT count(*) FROM vev_attribute(?, ?)",
                               [vev.path, ident]).fetchall()[0][0]
        for peer in peers:
            sql = f"SELECT count(*) FROM {peer.sql.current(a)} d"
            have = peer.con.execute(sql).fetchall()[0][0]
            if have != want:
                raise Mismatch(f"{ident}: Vev has {want} values, {peer.label} {have}")


def remove_files(path):
    """A database file and the files its engine keeps beside it."""
    for suffix in ["", "-wal", "-shm", ".wal"]:
        if os.path.exists(path + suffix):
            os.remove(path + suffix)


def load(dataset, args, size):
    """The three engines, each loaded through its bulk path into new files (Vev first, its
    background checkpoint let finish before the peers load); seconds per engine, Vev's
    transaction ids of the dataset's transactions and its files' sizes before the checkpoint
    with the time they took to settle."""
    base = os.path.join(args.work, str(size))
    for suffix in [".vev", ".duckdb", ".sqlite"]:
        remove_files(base + suffix)
    rows = dataset.peer_rows()
    log(f"{size}: Vev bulk load ({len(dataset.txs)} transactions)")
    vev = VevEngine(args.extension, base + ".vev")
    vev_s, tx_ids = vev.load(dataset)
    checkpoint = {"before": vev.store_bytes(), "seconds": vev.settle()}
    log(f"{size}: Vev's files settled after {checkpoint['seconds']:.1f} s")
    peers, seconds = [], {vev.label: vev_s}
    for peer, path in [(DuckDbPeer, base + ".duckdb"), (SqlitePeer, base + ".sqlite")]:
        log(f"{size}: {peer.label} bulk load ({len(rows)} rows)")
        p = peer(path)
        seconds[p.label] = p.load(rows, base + ".csv")
        p.start_transactions(rows)
        peers.append(p)
    return vev, peers, seconds, tx_ids, checkpoint


def run_queries(all_scenarios, vev, peers, args, size):
    results = []
    for scenario in all_scenarios:
        engines = engine_calls(scenario, vev, peers)
        mean_rows = check(scenario, engines)
        samples = {label: [] for label, *_ in engines}
        for _ in range(args.rounds):
            for label, con, calls, _ in engines:
                samples[label] += measure(con, calls, args)
        log(f"{size}: {scenario.name}: " + ", ".join(
            f"{label} {sorted(s)[len(s) // 2]:.3f} ms" for label, s in samples.items()))
        results.append({"name": scenario.name, "shown": scenario.shown, "rows": mean_rows,
                        "calls": len(scenario.vev_calls), "samples_ms": samples})
    return results


def run_floor(vev, peers, args):
    """The cost of one trivial call on each engine's connection: DuckDB's for a table
    function (`range`, built in), SQLite's for a one-value SELECT. No engine's call is cheaper."""
    calls = {vev.label: (vev.con, FLOOR_DUCKDB)}
    for peer in peers:
        calls[peer.label] = (peer.con, FLOOR_DUCKDB if peer.label == "DuckDB" else FLOOR_SQLITE)
    samples = {label: [] for label in calls}
    for _ in range(args.rounds):
        for label, (con, sql) in calls.items():
            samples[label] += measure(con, [(sql, [])], args)
    return {"samples_ms": samples, "sql": {"DuckDB": FLOOR_DUCKDB, "SQLite": FLOOR_SQLITE}}


def run_transactions(engines, args):
    """`--txs` single-datom transactions per engine, in `--rounds` interleaved blocks."""
    samples = {e.label: [] for e in engines}
    per_round = max(1, args.txs // args.rounds)
    for r in range(args.rounds):
        for e in engines:
            for k in range(r * per_round, (r + 1) * per_round):
                start = time.perf_counter_ns()
                e.transact_one(k)
                samples[e.label].append((time.perf_counter_ns() - start) / 1e6)
    return samples


def run_scans(vev, args):
    """`vev_attribute` read whole by sum(v) and by count(*)."""
    out = []
    for ident in SCANNED:
        values = vev.con.execute("SELECT count(*) FROM vev_attribute(?, ?)",
                                 [vev.path, ident]).fetchall()[0][0]
        for aggregate in ["sum(v)", "count(*)"]:
            call = (f"SELECT {aggregate} FROM vev_attribute(?, ?)", [vev.path, ident])
            samples = []
            for _ in range(args.rounds):
                samples += measure(vev.con, [call], args)
            out.append({"attribute": ident, "aggregate": aggregate,
                        "sql": call[0].replace("?, ?", f"path, '{ident}'"),
                        "values": values, "samples_ms": samples})
    return out


def run_size(size, args):
    dataset = Dataset(size, args.seed, args.people_per_tx)
    vev, peers, load_s, tx_ids, checkpoint = load(dataset, args, size)
    engines = [vev] + peers
    store = {e.label: e.store_bytes() for e in engines}
    check_counts(vev, peers)
    k_as_of, k_since = dataset.load_txs + AS_OF_AFTER, dataset.load_txs + SINCE_AFTER
    all_scenarios = scenarios.build(
        dataset, args.seed, vev.path, vev.attribute(":person/email"),
        {"as_of": tx_ids[k_as_of - 1], "since": tx_ids[k_since - 1]},
        {"as_of": dataset.peer_tx(k_as_of), "since": dataset.peer_tx(k_since)},
    )
    queries = run_queries(all_scenarios, vev, peers, args, size)
    scans = run_scans(vev, args)
    floor = run_floor(vev, peers, args)
    log(f"{size}: single-datom transactions")
    txs = run_transactions(engines, args)
    for e in engines:
        e.con.close()
    for path in [vev.path, *(p.path for p in peers)]:
        remove_files(path)
    return {
        "target_datoms": size, "datoms": dataset.datoms(), "people": len(dataset.people),
        "transactions": len(dataset.txs), "load_transactions": dataset.load_txs,
        "people_per_tx": args.people_per_tx, "bulk_load_s": load_s, "store_bytes": store,
        "vev_checkpoint": checkpoint,
        "queries": queries, "floor": floor, "transactions_ms": txs, "scans": scans,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--extension", required=True)
    parser.add_argument("--work", required=True, help="directory for the database files")
    parser.add_argument("--sizes", default="100000,1000000")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--reps", type=int, default=50)
    parser.add_argument("--warmup-ms", type=float, default=100)
    parser.add_argument("--budget-ms", type=float, default=1000)
    parser.add_argument("--txs", type=int, default=500)
    parser.add_argument("--people-per-tx", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=21)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    try:
        results = [run_size(size, args) for size in sizes]
    except Mismatch as e:
        log(f"answers differ: {e}")
        sys.exit(3)
    json.dump({
        "duckdb_version": duckdb.__version__, "sqlite_version": sqlite3.sqlite_version,
        "python_version": platform.python_version(), "seed": args.seed, "rounds": args.rounds,
        "reps": args.reps, "warmup_ms": args.warmup_ms, "budget_ms": args.budget_ms,
        "txs": args.txs, "sizes": results,
    }, sys.stdout)
    print()


if __name__ == "__main__":
    main()
