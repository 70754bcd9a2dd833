"""psycopg 3 against `vev serve`: the statements a Python application sends, each result
printed as one JSON line for the Rust test (tests/drivers.rs) to check.

Usage: python3 psycopg_client.py PORT
"""
import datetime
import json
import sys

import psycopg


def out(name, value):
    print(json.dumps({"name": name, "value": value}), flush=True)


def main():
    port = int(sys.argv[1])
    with psycopg.connect(host="127.0.0.1", port=port, user="vev", dbname="app", autocommit=True) as conn:
        conn.execute("CREATE TABLE reading (id bigint PRIMARY KEY, place varchar(20) NOT NULL, "
                     "value double precision, ok boolean, at timestamptz)")
        at = datetime.datetime(2024, 1, 31, 12, 0, 0, 500000, tzinfo=datetime.timezone.utc)
        with conn.cursor() as cur:
            # Server-side binding: the extended protocol, parameters typed by the server.
            cur.executemany("INSERT INTO reading VALUES (%s, %s, %s, %s, %s)",
                            [(1, "north", 1.5, True, at), (2, "south", None, False, at),
                             (3, "north", 2.5, None, at)])
            cur.execute("SELECT place, count(*), avg(value) FROM reading GROUP BY place ORDER BY place")
            out("group", [[p, n, v] for (p, n, v) in cur.fetchall()])
            cur.execute("SELECT id, ok, at FROM reading WHERE id = %s", (1,))
            (i, ok, t) = cur.fetchone()
            out("typed", [i, ok, t.isoformat()])
            cur.execute("SELECT id FROM reading WHERE value > %s ORDER BY id", (2.0,))
            out("filter", [r[0] for r in cur.fetchall()])
        # A transaction through psycopg's own BEGIN/COMMIT.
        with conn.transaction():
            conn.execute("UPDATE reading SET value = 10 WHERE id = %s", (2,))
        out("committed", conn.execute("SELECT value FROM reading WHERE id = 2").fetchone()[0])
        try:
            with conn.transaction():
                conn.execute("UPDATE reading SET value = 99 WHERE id = 2")
                conn.execute("SELECT * FROM nowhere")
        except psycopg.errors.UndefinedTable as e:
            out("undefined-table", e.sqlstate)
        out("rolled-back", conn.execute("SELECT value FROM reading WHERE id = 2").fetchone()[0])
        try:
            conn.execute("INSERT INTO reading (id, place) VALUES (%s, %s)", (1, "x"))
        except psycopg.errors.UniqueViolation as e:
            out("duplicate", e.sqlstate)
        try:
            conn.execute("INSERT INTO reading (id, place) VALUES (%s, %s)", (9, "x" * 30))
        except psycopg.errors.StringDataRightTruncation as e:
            out("too-long", e.sqlstate)
        with conn.cursor() as cur:
            with cur.copy("COPY reading (id, place) FROM STDIN") as copy:
                for i in range(100, 110):
                    copy.write_row((i, "copied"))
        out("copied", conn.execute("SELECT count(*) FROM reading WHERE place = 'copied'").fetchone()[0])


if __name__ == "__main__":
    main()
