"""The SQL the two peers run: each scenario's query over one `datoms` table that holds every
assertion and retraction of the log (e, a, v, tx, added), as the reference extension's designs
do.

A datom is part of the database at t when the latest datom of its (e, a, v) up to t is an
assertion. Datomic never records an assertion of a datom that is already true, so that is the
same as: an assertion up to t with no retraction of the same (e, a, v) after it, up to t. Each
query reads every attribute through `current(attribute)`, a derived table `(e, v)` of that
attribute's datoms in the database, which each peer writes the way its engine runs fastest
(tried against the other forms on this dataset; see `bench/duckdb/README.md`):

- SQLite: `NOT EXISTS` of a later retraction, one probe of the (e, a, v, tx) key per candidate.
- DuckDB: an `ANTI JOIN` against the attribute's retractions (as a correlated `NOT EXISTS`,
  DuckDB joined whole attributes before filtering, 10-25x slower here).

Attribute ids are inlined as literals (an extension translating Datalog to SQL resolves idents
against its cached schema when it writes the SQL); the values a user supplies are bound
parameters (`$name`, which both SQLite and DuckDB accept).
"""

from dataset import AGE, EMAIL, FRIENDS, NAME

# Attribute -> is its value a string (else an integer: long, ref, instant).
STRING_ATTRIBUTES = {EMAIL, NAME}


class Sql:
    """The scenarios' queries, over `current`, which each peer defines."""

    def current(self, attribute, at=None):
        """A derived table (e, v) of `attribute` in the database now; `at="as_of"`: at `$t`;
        `at="since"`: those asserted after `$t` (the database now, filtered, as Datomic's
        `since`)."""
        raise NotImplementedError

    def point_lookup(self):
        c = self.current
        return f"""SELECT n.v, g.v FROM {c(EMAIL)} p
JOIN {c(NAME)} n ON n.e = p.e
JOIN {c(AGE)} g ON g.e = p.e
WHERE p.v = $email"""

    def ref_traversal(self):
        c = self.current
        return f"""SELECT DISTINCT n.v FROM {c(EMAIL)} p
JOIN {c(FRIENDS)} f ON f.e = p.e
JOIN {c(FRIENDS)} ff ON ff.e = f.v
JOIN {c(NAME)} n ON n.e = ff.v
WHERE p.v = $email"""

    def aggregate(self):
        return f"SELECT count(*), avg(g.v) FROM {self.current(AGE)} g"

    def older_than(self, age, at=None):
        """Email and age of the people older than `age` (now, or at `$t`)."""
        c = self.current
        return f"""SELECT m.v, g.v FROM {c(AGE, at)} g
JOIN {c(EMAIL, at)} m ON m.e = g.e
WHERE g.v > {age}"""

    def pull(self):
        c = self.current
        return f"""SELECT n.v, fn.v FROM {c(EMAIL)} p
JOIN {c(NAME)} n ON n.e = p.e
LEFT JOIN {c(FRIENDS)} f ON f.e = p.e
LEFT JOIN {c(NAME)} fn ON fn.e = f.v
WHERE p.v = $email"""

    def since(self):
        """The current ages asserted after `$t`, by entity."""
        return f"SELECT g.e, g.v FROM {self.current(AGE, 'since')} g"

    def input_bindings(self):
        c = self.current
        return f"""SELECT m.v, g.v FROM {c(NAME)} n
JOIN {c(AGE)} g ON g.e = n.e
JOIN {c(EMAIL)} m ON m.e = n.e
WHERE n.v = $name AND g.v >= $min"""


def time_filters(column, at):
    """The filters of `current`'s datom and retraction for `at` (see `Sql.current`)."""
    if at == "as_of":
        return f" AND {column} <= $t", " AND r.tx <= $t"
    if at == "since":
        return f" AND {column} > $t", ""
    return "", ""


class SqliteSql(Sql):
    """`datoms(e, a, v, tx, added)`: one dynamically typed `v`."""

    def current(self, attribute, at=None):
        x_at, r_at = time_filters("x.tx", at)
        # SQLite cannot know that `tx > $t` keeps a few rows and would scan the attribute.
        index = " INDEXED BY datoms_tx" if at == "since" else ""
        return (
            f"(SELECT x.e, x.v FROM datoms x{index} WHERE x.a = {attribute} AND x.added{x_at}"
            f" AND NOT EXISTS (SELECT 1 FROM datoms r WHERE r.e = x.e AND r.a = {attribute}"
            f" AND r.v = x.v AND r.tx > x.tx{r_at} AND NOT r.added))"
        )


class DuckDbSql(Sql):
    """`datoms(e, a, v_int, v_str, tx, added)`: a column has one type in DuckDB, so integer
    values (long, ref, instant) are in `v_int`, strings in `v_str`."""

    def current(self, attribute, at=None):
        v = "v_str" if attribute in STRING_ATTRIBUTES else "v_int"
        x_at, r_at = time_filters("x.tx", at)
        return (
            f"(SELECT x.e, x.{v} AS v FROM datoms x ANTI JOIN (SELECT e, {v}, tx FROM datoms r"
            f" WHERE r.a = {attribute} AND NOT r.added{r_at}) r"
            f" ON r.e = x.e AND r.{v} = x.{v} AND r.tx > x.tx"
            f" WHERE x.a = {attribute} AND x.added{x_at})"
        )
