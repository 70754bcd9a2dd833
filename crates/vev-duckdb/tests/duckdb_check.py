"""The DuckDB side of tests/duckdb.rs: load Vev's extension into the PyPI duckdb wheel and
check it.

    python duckdb_check.py EXTENSION DATABASE CASES WRITTEN

CASES is a JSON list of {name, sql, rows} whose rows the Rust side computed through Vev's own
API; each SQL must give the same rows (as a multiset). Then the checks only DuckDB can show:
column types, errors as DuckDB errors, calls from several threads at once, panics inside the
extension, and vev_transact writing a new database at WRITTEN (which the Rust side reopens).
Prints "N checks passed" and exits 0, or the failures and exits 1.
"""

import concurrent.futures
import datetime
import decimal
import json
import os
import sys
import uuid

import duckdb

EPOCH = datetime.datetime(1970, 1, 1)
failures = []
passed = 0


def check(ok, what):
    global passed
    if ok:
        passed += 1
    else:
        failures.append(what)


def normalize(value, expected):
    """A DuckDB value in the form the Rust side writes its expectations in."""
    if isinstance(value, datetime.datetime):
        return {"inst": (value.replace(tzinfo=None) - EPOCH) // datetime.timedelta(milliseconds=1)}
    if isinstance(value, uuid.UUID):
        return {"uuid": str(value)}
    if isinstance(value, decimal.Decimal):
        return {"dec": str(value)}
    if isinstance(value, (bytes, bytearray)):
        return {"bytes": bytes(value).hex()}
    if isinstance(value, str) and isinstance(expected, (dict, list)):
        # A JSON column (a pull): compare the documents, not their spelling.
        return json.loads(value)
    return value


def key(row):
    return json.dumps(row, sort_keys=True)


def run_cases(con, cases):
    for case in cases:
        try:
            got = con.execute(case["sql"]).fetchall()
        except duckdb.Error as e:
            failures.append(f"{case['name']}: {e}")
            continue
        expected = case["rows"]
        width = len(expected[0]) if expected else 0
        rows = []
        for row in got:
            templates = expected[0] if expected else [None] * len(row)
            rows.append([normalize(v, templates[i] if i < width else None) for i, v in enumerate(row)])
        same = sorted(rows, key=key) == sorted(expected, key=key)
        check(same, f"{case['name']}: {len(rows)} rows differ from Vev's {len(expected)}\n"
                    f"  sql: {case['sql']}\n  first got: {rows[:3]}\n  first expected: {expected[:3]}")
        check(len(expected) > 0 or "since" in case["name"], f"{case['name']}: the case has no rows")


def types(con, sql):
    return [r[1] for r in con.execute(f"DESCRIBE {sql}").fetchall()]


def check_types(con, db):
    typed = types(con, f"""SELECT * FROM vev_query('{db}', '[:find ?e ?age ?score ?name ?active ?born ?id ?photo ?status ?friend
        :where [?e :person/age ?age] [?e :person/score ?score] [?e :person/name ?name] [?e :person/active ?active]
        [?e :person/born ?born] [?e :person/id ?id] [?e :person/photo ?photo] [?e :person/status ?status]
        [?e :person/friends ?friend]]')""")
    want = ["BIGINT", "BIGINT", "DOUBLE", "VARCHAR", "BOOLEAN", "TIMESTAMP", "UUID", "BLOB", "VARCHAR", "BIGINT"]
    check(typed == want, f"typed query columns: {typed}, want {want}")
    aggs = types(con, f"SELECT * FROM vev_query('{db}', '[:find (count ?e) (avg ?a) (max ?a) :where [?e :person/age ?a]]')")
    check(aggs == ["BIGINT", "DOUBLE", "BIGINT"], f"aggregate columns: {aggs}")
    names = [r[0] for r in con.execute(
        f"DESCRIBE SELECT * FROM vev_query('{db}', '[:find (count ?e) ?a :where [?e :person/age ?a]]')").fetchall()]
    check(names == ["count_e", "a"], f"column names: {names}")
    balance = types(con, f"SELECT * FROM vev_attribute('{db}', ':person/balance')")
    check(balance == ["BIGINT", "DECIMAL(38,2)"], f"bigdec attribute columns: {balance}")
    value = con.execute(f"SELECT v FROM vev_attribute('{db}', ':person/balance') ORDER BY e LIMIT 1 OFFSET 5").fetchone()[0]
    check(value == decimal.Decimal("5.05"), f"a bigdec value: {value!r}")
    pull = types(con, f"SELECT * FROM vev_pull('{db}', '[*]', 1)")
    check(pull == ["BIGINT", "JSON"], f"pull columns: {pull}")
    hist = types(con, f"SELECT * FROM vev_attribute('{db}', ':person/age', history := true)")
    check(hist == ["BIGINT", "BIGINT", "BIGINT", "BOOLEAN"], f"history attribute columns: {hist}")


def check_scans(con, db):
    total = con.execute(f"SELECT count(*), sum(v) FROM vev_attribute('{db}', ':person/age')").fetchone()
    expected = con.execute(f"SELECT count(*), sum(age) FROM vev_query('{db}', '[:find ?e ?age :where [?e :person/age ?age]]')").fetchone()
    check(total == expected, f"count and sum over vev_attribute {total} vs vev_query {expected}")
    only_e = con.execute(f"SELECT e FROM vev_attribute('{db}', ':person/age') ORDER BY e LIMIT 3").fetchall()
    both = con.execute(f"SELECT e FROM (SELECT e, v FROM vev_attribute('{db}', ':person/age')) ORDER BY e LIMIT 3").fetchall()
    check(only_e == both and len(only_e) == 3, f"projection of e alone: {only_e} vs {both}")
    joined = con.execute(f"""SELECT count(*) FROM vev_attribute('{db}', ':person/age') a
        JOIN vev_attribute('{db}', ':person/name') n USING (e)""").fetchone()[0]
    check(joined == total[0], f"a join of two attributes: {joined}")


def expect_error(con, sql, code, params=None):
    try:
        con.execute(sql, params or []).fetchall()
    except duckdb.Error as e:
        check(code in str(e), f"{sql}: error {e!s} lacks {code}")
        return
    failures.append(f"{sql}: no error, want {code}")


def check_errors(con, db, missing):
    expect_error(con, f"SELECT * FROM vev_query('{db}', '[:find ?x :where [?x :no/such 1]]')", "query/unknown-attribute")
    expect_error(con, f"SELECT * FROM vev_query('{db}', '[:find ?x :where')", "edn/")
    expect_error(con, f"SELECT * FROM vev_query('{db}', '[:find ?e :in $ ?a :where [?e :person/age ?a]]')", "takes 1 input")
    expect_error(con, f"SELECT * FROM vev_query('{missing}', '[:find ?e :where [?e :db/ident]]')", "duckdb/no-database")
    expect_error(con, f"SELECT * FROM vev_datoms('{db}', 'xyz', NULL)", "duckdb/bad-argument")
    expect_error(con, f"SELECT * FROM vev_attribute('{db}', ':no/such')", "duckdb/unknown-attribute")
    expect_error(con, f"SELECT * FROM vev_attribute('{db}', ':person/age', as_of := -5)", "time/not-a-time")
    expect_error(con, f"SELECT * FROM vev_pull('{db}', '[:person/name', 1)", "edn/")
    expect_error(con, f"SELECT * FROM vev_pull('{db}', '[:person/name]', '[:person/age 3]')", "duckdb/not-unique")


def check_panics(con):
    expect_error(con, "SELECT * FROM vev_query('!panic-in-bind', 'x')", "duckdb/panic")
    expect_error(con, "SELECT * FROM vev_attribute('!panic-in-scan', 'x')", "duckdb/panic")
    check(con.execute("SELECT 42").fetchone() == (42,), "the connection works after a panic")


def check_threads(con, db):
    """Several DuckDB connections of one database call the extension at once."""
    queries = [
        f"SELECT count(*), sum(age) FROM vev_query('{db}', '[:find ?e ?age :where [?e :person/age ?age]]')",
        f"SELECT count(*), sum(v) FROM vev_attribute('{db}', ':person/age')",
        f"SELECT count(*) FROM vev_datoms('{db}', 'aevt', ':person/name')",
    ]
    expected = [con.execute(q).fetchall() for q in queries]

    def work(i):
        cur = con.cursor()
        return [cur.execute(queries[(i + j) % 3]).fetchall() == expected[(i + j) % 3] for j in range(12)]

    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        results = [ok for batch in pool.map(work, range(8)) for ok in batch]
    check(all(results), f"concurrent calls: {results.count(False)} of {len(results)} differ")


def check_transact(con, written):
    schema = """[{:db/ident :city/name :db/valueType :db.type/string :db/cardinality :db.cardinality/one
                   :db/unique :db.unique/identity}
                  {:db/ident :city/population :db/valueType :db.type/long :db/cardinality :db.cardinality/one}]"""
    rows = con.execute("SELECT * FROM vev_transact(?, ?)", [written, schema]).fetchall()
    check(any(r[1] == ":db/ident" and r[2] == ":city/name" for r in rows), f"schema transaction's rows: {rows}")
    rows = con.execute("SELECT a, v, added FROM vev_transact(?, ?) WHERE a <> ':db/txInstant'",
                       [written, '[{:city/name "Oslo" :city/population 700000} {:city/name "Bergen" :city/population 290000}]']).fetchall()
    check(sorted(rows) == sorted([(":city/name", '"Oslo"', True), (":city/population", "700000", True),
                                  (":city/name", '"Bergen"', True), (":city/population", "290000", True)]),
          f"data transaction's rows: {rows}")
    # An upsert: the report holds the retraction of the old value and the new one.
    rows = con.execute("SELECT v, added FROM vev_transact(?, ?) WHERE a = ':city/population'",
                       [written, '[{:city/name "Oslo" :city/population 720000}]']).fetchall()
    check(sorted(rows) == [("700000", False), ("720000", True)], f"upsert's rows: {rows}")
    got = con.execute(f"SELECT * FROM vev_query('{written}', '[:find ?n ?p :where [?e :city/name ?n] [?e :city/population ?p]]')").fetchall()
    check(sorted(got) == [("Bergen", 290000), ("Oslo", 720000)], f"read after transact: {got}")
    expect_error(con, f"SELECT * FROM vev_transact('{written}', '[{{:city/population \"many\"}}]')", "tx/")
    # A failed transaction changed nothing.
    count = con.execute(f"SELECT count(*) FROM vev_attribute('{written}', ':city/population')").fetchone()[0]
    check(count == 2, f"populations after a failed transaction: {count}")
    # Released, the writer closes: the file holds everything, its WAL emptied into it.
    released = con.execute("SELECT * FROM vev_release(?)", [written]).fetchall()
    check(released == [(True,)], f"vev_release of an open file: {released}")
    wal = written + "-wal"
    check(not os.path.exists(wal) or os.path.getsize(wal) == 0, f"{wal} is not empty after vev_release")
    again = con.execute("SELECT * FROM vev_release(?)", [written]).fetchall()
    check(again == [(False,)], f"vev_release of a closed file: {again}")
    got = con.execute(f"SELECT count(*) FROM vev_attribute('{written}', ':city/name')").fetchone()[0]
    check(got == 2, f"a read after vev_release opens the file again: {got}")


def main():
    extension, db, cases_file, written = sys.argv[1:5]
    con = duckdb.connect(config={"allow_unsigned_extensions": "true"})
    con.execute(f"LOAD '{extension}'")
    con.execute("SET threads = 4")
    with open(cases_file) as f:
        cases = json.load(f)
    run_cases(con, cases)
    check_types(con, db)
    check_scans(con, db)
    check_errors(con, db, written + ".missing")
    check_panics(con)
    check_threads(con, db)
    check_transact(con, written)
    if failures:
        print(f"{len(failures)} of {passed + len(failures)} checks failed:")
        for f in failures:
            print(" -", f)
        sys.exit(1)
    print(f"{passed} checks passed")


if __name__ == "__main__":
    main()
