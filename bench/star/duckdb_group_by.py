"""Issue 24's aggregate in DuckDB, the peer the star aggregate is measured against.

Loads two attribute tables `city(e, v)` and `age(e, v)` from the CSV files that
`cargo run --release -p vev --example time_query -- DB --export DIR :person/city :person/age`
writes, and times the same group-by over their join on the entity (best of N, warm), plus
the one-table form for reference.

    python bench/star/duckdb_group_by.py DIR [RUNS]

The last line printed is JSON for `vev-bench scale`: the version, both best times in ms and
the joined query's rows as [city, count, avg].
"""

import json
import sys
import time

import duckdb

QUERY = """
SELECT c.v AS city, count(*) AS n, avg(a.v) AS avg_age
FROM city c JOIN age a ON c.e = a.e
GROUP BY c.v
"""

ONE_TABLE = "SELECT city, count(*), avg(age) FROM person GROUP BY city"


def best(con, sql, runs):
    times = []
    rows = None
    for _ in range(runs):
        t = time.perf_counter()
        rows = con.execute(sql).fetchall()
        times.append(time.perf_counter() - t)
    return min(times), rows


def main():
    folder = sys.argv[1]
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    con = duckdb.connect()
    con.execute(f"CREATE TABLE city AS SELECT * FROM read_csv('{folder}/city.csv', header=true)")
    con.execute(f"CREATE TABLE age AS SELECT * FROM read_csv('{folder}/age.csv', header=true)")
    con.execute(
        "CREATE TABLE person AS SELECT c.e, c.v AS city, a.v AS age "
        "FROM city c JOIN age a ON c.e = a.e"
    )
    threads = con.execute("SELECT current_setting('threads')").fetchone()[0]
    joined, rows = best(con, QUERY, runs)
    one, _ = best(con, ONE_TABLE, runs)
    print(f"duckdb {duckdb.__version__}, threads {threads}")
    print(f"two attribute tables joined on e: best of {runs}: {joined * 1000:.1f} ms")
    print(f"one table: best of {runs}: {one * 1000:.1f} ms")
    for r in sorted(rows):
        print(f"  {r[0]}: {r[1]} {r[2]:.4f}")
    print(
        json.dumps(
            {
                "version": duckdb.__version__,
                "threads": threads,
                "joined_ms": joined * 1000,
                "one_table_ms": one * 1000,
                "rows": [[r[0], r[1], r[2]] for r in rows],
            }
        )
    )


if __name__ == "__main__":
    main()
