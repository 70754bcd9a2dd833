//! The queries of the query benchmark, defined once for every engine.
//!
//! They are datascript-bench's (tonsky/datascript `bench/`, and the q2-switch and q5 that
//! Datalevin's copy of it adds), word for word: every engine gets the same EDN text and the
//! same EDN inputs. Each query also carries a naive row counter over the fixture's datoms, so
//! the report can check every engine's row count against one that needs no query engine.

use std::collections::BTreeSet;

use crate::query_fixture::{descendants, Attr, DbShape, FixtureDb, FixtureValue};

/// The people database of the people queries: 20,000 people, 100,000 datoms.
pub const PEOPLE: DbShape = DbShape::People { count: 20_000 };

/// DataScript needs only what changes its behaviour: `:follows` is a many-valued ref.
pub const DATASCRIPT_SCHEMA_EDN: &str =
    "{:follows {:db/valueType :db.type/ref :db/cardinality :db.cardinality/many}}";

/// Datalevin stores typed values and benefits from knowing every type.
pub const DATALEVIN_SCHEMA_EDN: &str = "{:name {:db/valueType :db.type/string}
 :last-name {:db/valueType :db.type/string}
 :sex {:db/valueType :db.type/keyword}
 :age {:db/valueType :db.type/long}
 :salary {:db/valueType :db.type/long}
 :follows {:db/valueType :db.type/ref :db/cardinality :db.cardinality/many}}";

/// Vev, like Datomic, needs every attribute installed with a value type.
pub const VEV_SCHEMA_EDN: &str = r#"[
 {:db/ident :name :db/valueType :db.type/string :db/cardinality :db.cardinality/one}
 {:db/ident :last-name :db/valueType :db.type/string :db/cardinality :db.cardinality/one}
 {:db/ident :sex :db/valueType :db.type/keyword :db/cardinality :db.cardinality/one}
 {:db/ident :age :db/valueType :db.type/long :db/cardinality :db.cardinality/one}
 {:db/ident :salary :db/valueType :db.type/long :db/cardinality :db.cardinality/one}
 {:db/ident :follows :db/valueType :db.type/ref :db/cardinality :db.cardinality/many}]"#;

/// datascript-bench's recursive rule.
pub const FOLLOWS_RULES: &str =
    "[[(follows ?x ?y) [?x :follows ?y]] [(follows ?x ?y) [?x :follows ?t] (follows ?t ?y)]]";

const RULES_QUERY: &str = "[:find ?e ?e2 :in $ % :where (follows ?e ?e2)]";

/// What an engine runs: a query with inputs after the database, or a pull from one entity.
#[derive(Clone, Debug)]
pub enum QueryForm {
    /// `text` is an EDN query; `inputs` are EDN values bound after `$`, in `:in` order.
    Query {
        text: &'static str,
        inputs: &'static [&'static str],
    },
    /// `pattern` is an EDN pull pattern, pulled from the fixture entity `root`.
    Pull { pattern: &'static str, root: u64 },
}

/// One benchmark query.
#[derive(Clone, Debug)]
pub struct QuerySpec {
    pub name: &'static str,
    pub db: DbShape,
    pub form: QueryForm,
    /// The expected row count (pull: entities in the result), by a naive scan of the datoms.
    pub rows: fn(&FixtureDb) -> usize,
}

fn q(name: &'static str, text: &'static str, rows: fn(&FixtureDb) -> usize) -> QuerySpec {
    QuerySpec {
        name,
        db: PEOPLE,
        form: QueryForm::Query { text, inputs: &[] },
        rows,
    }
}

fn rules(name: &'static str, db: DbShape) -> QuerySpec {
    QuerySpec {
        name,
        db,
        form: QueryForm::Query {
            text: RULES_QUERY,
            inputs: &[FOLLOWS_RULES],
        },
        rows: rule_rows,
    }
}

/// All benchmark queries, in report order.
pub fn all() -> Vec<QuerySpec> {
    let wide = |depth, width| DbShape::Wide { depth, width };
    let long = |depth, width| DbShape::Long { depth, width };
    vec![
        q("q1", r#"[:find ?e :where [?e :name "Ivan"]]"#, ivans),
        q(
            "q2",
            r#"[:find ?e ?a :where [?e :name "Ivan"] [?e :age ?a]]"#,
            ivans,
        ),
        q(
            "q2-switch",
            r#"[:find ?e ?a :where [?e :age ?a] [?e :name "Ivan"]]"#,
            ivans,
        ),
        q(
            "q3",
            r#"[:find ?e ?a :where [?e :name "Ivan"] [?e :age ?a] [?e :sex :male]]"#,
            male_ivans,
        ),
        q(
            "q4",
            r#"[:find ?e ?l ?a :where [?e :name "Ivan"] [?e :last-name ?l] [?e :age ?a] [?e :sex :male]]"#,
            male_ivans,
        ),
        q(
            "q5",
            r#"[:find ?e1 ?l ?a :where [?e :name "Ivan"] [?e :age ?a] [?e1 :age ?a] [?e1 :last-name ?l]]"#,
            same_age_as_an_ivan,
        ),
        q(
            "qpred1",
            "[:find ?e ?s :where [?e :salary ?s] [(> ?s 50000)]]",
            salary_above_50000,
        ),
        QuerySpec {
            name: "qpred2",
            db: PEOPLE,
            form: QueryForm::Query {
                text: "[:find ?e ?s :in $ ?min_s :where [?e :salary ?s] [(> ?s ?min_s)]]",
                inputs: &["50000"],
            },
            rows: salary_above_50000,
        },
        rules("rules-wide-3x3", wide(3, 3)),
        rules("rules-wide-5x3", wide(5, 3)),
        rules("rules-wide-7x3", wide(7, 3)),
        rules("rules-wide-4x6", wide(4, 6)),
        rules("rules-long-10x3", long(10, 3)),
        rules("rules-long-30x3", long(30, 3)),
        rules("rules-long-30x5", long(30, 5)),
        QuerySpec {
            name: "pull-wide-4x5",
            db: DbShape::PeopleTree { depth: 4, width: 5 },
            form: QueryForm::Pull {
                pattern: "[:db/id :name :last-name :sex :age :salary {:follows ...}]",
                root: 1,
            },
            rows: pull_rows,
        },
    ]
}

fn is(db: &FixtureDb, a: Attr, v: &FixtureValue) -> BTreeSet<u64> {
    db.datoms
        .iter()
        .filter(|d| d.a == a && d.v == *v)
        .map(|d| d.e)
        .collect()
}

fn ivans(db: &FixtureDb) -> usize {
    is(db, Attr::Name, &FixtureValue::Str("Ivan")).len()
}

fn male_ivans(db: &FixtureDb) -> usize {
    let males = is(db, Attr::Sex, &FixtureValue::Keyword("male"));
    is(db, Attr::Name, &FixtureValue::Str("Ivan"))
        .intersection(&males)
        .count()
}

/// q5's rows are (?e1 ?l ?a) for every ?e1 whose age some Ivan has; ?e1 fixes ?l and ?a.
fn same_age_as_an_ivan(db: &FixtureDb) -> usize {
    let ents = db.entities();
    let ivans = is(db, Attr::Name, &FixtureValue::Str("Ivan"));
    let ages: BTreeSet<i64> = ivans
        .iter()
        .filter_map(|e| ents[e].long(Attr::Age))
        .collect();
    ents.values()
        .filter(|x| x.get(Attr::LastName).is_some())
        .filter(|x| x.long(Attr::Age).is_some_and(|a| ages.contains(&a)))
        .count()
}

fn salary_above_50000(db: &FixtureDb) -> usize {
    let ents = db.entities();
    ents.values()
        .filter(|x| x.long(Attr::Salary).is_some_and(|s| s > 50_000))
        .count()
}

/// The transitive closure of `:follows`: one row per (ancestor, descendant).
fn rule_rows(db: &FixtureDb) -> usize {
    let ents = db.entities();
    ents.keys().map(|&e| descendants(&ents, e).len()).sum()
}

/// The pulled tree: the root and everything below it.
fn pull_rows(db: &FixtureDb) -> usize {
    1 + descendants(&db.entities(), 1).len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::query_fixture::QueryFixture;

    #[test]
    fn tree_oracles_count_closures() {
        let specs: Vec<QuerySpec> = all()
            .into_iter()
            .filter(|s| s.name == "rules-wide-3x3" || s.name.starts_with("pull"))
            .collect();
        let fixture = QueryFixture::build(1, &specs);
        // wide 3x3: 3 + 9 + 27 descendants of the root, 3 + 9 under each child, 3 under each
        // grandchild: 39 + 3 * 12 + 9 * 3 = 102.
        assert_eq!((specs[0].rows)(fixture.db(specs[0].db)), 102);
        // wide 4x5 with people: 1 + 5 + 25 + 125 + 625 nodes.
        assert_eq!((specs[1].rows)(fixture.db(specs[1].db)), 781);
    }

    #[test]
    fn names_are_unique() {
        let names: BTreeSet<&str> = all().iter().map(|s| s.name).collect();
        assert_eq!(names.len(), all().len());
    }
}
