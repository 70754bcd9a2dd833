//! Expressions over aggregates, checked against a real PostgreSQL 15 as the oracle: in the
//! select list (with and without GROUP BY, over no rows, with DISTINCT), in HAVING and in
//! ORDER BY; their result types; parameters; the errors both give.

mod common;
#[path = "differential/pair.rs"]
mod pair;
#[path = "differential/pg.rs"]
mod pg;

use pair::{same, same_errors, same_in_order, same_values, with_pair};

const SETUP: &[&str] = &[
    "CREATE TABLE s (id int PRIMARY KEY, grp text, v int, price numeric, qty bigint)",
    "INSERT INTO s VALUES (1, 'a', 4, 2.50, 10), (2, 'a', 6, 1.25, 20), (3, 'b', 9, 3.00, NULL), \
     (4, 'b', NULL, NULL, 5), (5, 'c', 7, 0.75, 7), (6, NULL, 2, 4.00, 1), (7, 'c', 11, 2.25, 3)",
];

/// Compared as sorted rows, numbers by value (PostgreSQL's numeric keeps trailing zeros).
const SCRIPT: &[&str] = &[
    "SELECT grp, sum(v) * 100 / count(*) FROM s GROUP BY grp",
    "SELECT sum(v) / 2, count(*) + 1 FROM s",
    "SELECT grp, max(v) - min(v) AS spread FROM s GROUP BY grp",
    "SELECT grp, -sum(v), (sum(v) + 1) * 2 FROM s GROUP BY grp",
    "SELECT grp, sum(v) % 3, abs(min(v) - max(v)) FROM s GROUP BY grp",
    "SELECT grp || ':' || count(*) FROM s WHERE grp IS NOT NULL GROUP BY grp",
    "SELECT round(sum(price) / count(price), 2) FROM s",
    "SELECT grp, round(avg(v)) FROM s GROUP BY grp",
    "SELECT grp, coalesce(sum(qty), 0) * 2 FROM s GROUP BY grp",
    "SELECT grp, sum(qty) - count(qty) FROM s GROUP BY grp",
    "SELECT grp, sum(v) FROM s GROUP BY grp HAVING sum(v) / count(*) > 3",
    "SELECT grp FROM s GROUP BY grp HAVING max(v) - min(v) >= 2 AND count(*) * 2 = 4",
    "SELECT DISTINCT sum(v) / 10 FROM s GROUP BY grp",
    "SELECT grp, count(*) > 1 FROM s GROUP BY grp",
    // The primary key grouped determines the row's other columns.
    "SELECT id, grp, v * 2 + count(*) FROM s GROUP BY id",
    "SELECT upper(grp), count(*) FROM s GROUP BY grp",
    // In a set operation's branch, a CTE and a derived table.
    "SELECT sum(v) / 2 FROM s UNION ALL SELECT count(*) * 3 FROM s",
    "WITH t AS (SELECT grp, sum(v) * 2 AS d FROM s GROUP BY grp) SELECT d + 1 FROM t",
    "SELECT x.n FROM (SELECT grp, count(*) - 1 AS n FROM s GROUP BY grp) AS x WHERE x.n > 0",
    // Over no rows: one row, as the aggregates give it.
    "SELECT sum(v) / 2 FROM s WHERE v > 1000",
    "SELECT count(*) * 2 FROM s WHERE v > 1000",
    "SELECT coalesce(sum(v), 0) + 1 FROM s WHERE v > 1000",
    "SELECT grp, sum(v) / 2 FROM s WHERE v > 1000 GROUP BY grp",
];

/// Compared in order.
const ORDERED: &[&str] = &[
    "SELECT grp FROM s GROUP BY grp ORDER BY sum(v) / count(*) DESC, grp",
    "SELECT grp, sum(v) % 3 FROM s GROUP BY grp ORDER BY 2, 1",
    "SELECT grp, max(v) - min(v) AS spread FROM s GROUP BY grp ORDER BY spread, grp LIMIT 2",
    "SELECT grp, count(*) * 10 AS n FROM s GROUP BY grp ORDER BY n DESC, grp OFFSET 1",
    // Grouped without aggregates: ORDER BY a column the primary key determines.
    "SELECT id, grp FROM s GROUP BY id ORDER BY v, id",
];

#[test]
fn aggregate_expressions_match_postgres() {
    with_pair(
        "aggregate_expressions_match_postgres",
        |pg, vev| async move {
            same(&pg, &vev, SETUP).await;
            let with_rows = same_values(&pg, &vev, SCRIPT).await;
            // All but the last (groups over no rows are no rows).
            assert_eq!(with_rows, SCRIPT.len() - 1, "the statements return rows");
            for sql in ORDERED {
                same_in_order(&pg, &vev, sql).await;
            }
            // Result types from Describe.
            for (sql, ty) in [
                ("SELECT sum(v) / 2 FROM s", "int8"),
                ("SELECT count(*) * 2 FROM s", "int8"),
                ("SELECT round(sum(price) / count(*), 2) FROM s", "numeric"),
                ("SELECT max(v) - min(v) FROM s", "int4"),
                ("SELECT grp || count(*) FROM s GROUP BY grp", "text"),
                ("SELECT count(*) > 1 FROM s", "bool"),
            ] {
                for c in [&pg, &vev] {
                    let st = c.prepare(sql).await.expect(sql);
                    assert_eq!(st.columns()[0].type_().name(), ty, "{sql}");
                }
            }
            // Parameters in the expression and in HAVING, over the extended protocol.
            for sql in [
            "SELECT grp, sum(v) * $1::int8 FROM s WHERE grp IS NOT NULL GROUP BY grp ORDER BY grp",
            "SELECT grp, count(*) FROM s GROUP BY grp HAVING sum(v) - $1::int8 > 0 ORDER BY grp",
        ] {
            let mut answers = Vec::new();
            for c in [&pg, &vev] {
                let st = c.prepare(sql).await.expect(sql);
                assert_eq!(st.params().len(), 1, "{sql}");
                let rows = c.query(&st, &[&3i64]).await.expect(sql);
                answers.push(
                    rows.iter()
                        .map(|r| (r.get::<_, Option<String>>(0), r.get::<_, Option<i64>>(1)))
                        .collect::<Vec<_>>(),
                );
            }
            assert_eq!(answers[1], answers[0], "{sql}");
            assert!(!answers[0].is_empty(), "{sql}");
        }
            same_errors(
                &pg,
                &vev,
                &[
                    // A column outside an aggregate that is not grouped.
                    ("SELECT v + count(*) FROM s", "42803"),
                    (
                        "SELECT grp FROM s GROUP BY grp HAVING sum(v) + v > 1",
                        "42803",
                    ),
                    ("SELECT sum(v) / 0 FROM s", "22012"),
                    // Grouped by grp, a selected v would split the groups.
                    ("SELECT grp, v, count(*) FROM s GROUP BY grp", "42803"),
                    ("SELECT grp, v FROM s GROUP BY grp", "42803"),
                    ("SELECT grp, v + count(*) FROM s GROUP BY grp", "42803"),
                    ("SELECT grp FROM s GROUP BY grp ORDER BY v", "42803"),
                    (
                        "SELECT grp, sum(v) / (count(*) - count(*)) FROM s GROUP BY grp",
                        "22012",
                    ),
                ],
            )
            .await;
        },
    );
}
