//! The data of the query benchmark: one fixture, built here, for every engine.
//!
//! Each query runs on one database of a given [`DbShape`]: the 20,000 people of the core suite (the
//! same SplitMix64 generator and seed as `fixture.rs`, so the same people), the "wide" trees
//! and "long" chains of datascript-bench's rule benches, and a wide tree of people for the
//! pull bench. Entity ids are explicit and the same everywhere (people are 1..=20,000; tree
//! ids follow datascript-bench's numbering), so a root entity or a row can be named across
//! engines. The peers get the datoms, the schemas and the query texts in one JSON file written
//! by [`write_json`]; nothing is generated twice, in another language, where it could drift.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde_json::{json, Map, Value as Json};

use crate::fixture::{self, Person};
use crate::queries::{QueryForm, QuerySpec};

/// The attributes of the fixture, unnamespaced as in datascript-bench.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Attr {
    Name,
    LastName,
    Sex,
    Age,
    Salary,
    Follows,
}

impl Attr {
    pub const ALL: [Attr; 6] = [
        Attr::Name,
        Attr::LastName,
        Attr::Sex,
        Attr::Age,
        Attr::Salary,
        Attr::Follows,
    ];

    /// The keyword's name, without the colon.
    pub fn ident(self) -> &'static str {
        match self {
            Attr::Name => "name",
            Attr::LastName => "last-name",
            Attr::Sex => "sex",
            Attr::Age => "age",
            Attr::Salary => "salary",
            Attr::Follows => "follows",
        }
    }

    /// How the peers decode a JSON value of this attribute: `string`, `keyword`, `long`, `ref`.
    pub fn json_type(self) -> &'static str {
        match self {
            Attr::Name | Attr::LastName => "string",
            Attr::Sex => "keyword",
            Attr::Age | Attr::Salary => "long",
            Attr::Follows => "ref",
        }
    }
}

/// The value of one fixture datom.
#[derive(Clone, Debug, PartialEq)]
pub enum FixtureValue {
    Str(&'static str),
    /// A keyword's name, without the colon (`male`).
    Keyword(&'static str),
    Long(i64),
    /// The entity id of another entity of the same database.
    Ref(u64),
}

impl FixtureValue {
    fn json(&self) -> Json {
        match self {
            FixtureValue::Str(s) | FixtureValue::Keyword(s) => json!(s),
            FixtureValue::Long(n) => json!(n),
            FixtureValue::Ref(e) => json!(e),
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct FixtureDatom {
    pub e: u64,
    pub a: Attr,
    pub v: FixtureValue,
}

/// The databases of the benchmark. Trees are `depth` levels below the root with `width`
/// children per node (wide) or `width` chains of `depth` steps (long), as in datascript-bench.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum DbShape {
    /// `count` people, entity ids 1..=count, 5 datoms each.
    People { count: usize },
    /// Every node `:name "Ivan"`; node `id` follows `id * width + k` for k in 0..width; root 1.
    Wide { depth: u32, width: u32 },
    /// Every node `:name "Ivan"`; `width` chains of `depth + 1` nodes, consecutive ids.
    Long { depth: u32, width: u32 },
    /// A wide tree whose nodes are generated people (the pull bench's `wide-db 4 5`).
    PeopleTree { depth: u32, width: u32 },
}

impl DbShape {
    /// The database's name in the JSON file and in progress lines.
    pub fn name(self) -> String {
        match self {
            DbShape::People { count } => format!("people-{count}"),
            DbShape::Wide { depth, width } => format!("wide-{depth}x{width}"),
            DbShape::Long { depth, width } => format!("long-{depth}x{width}"),
            DbShape::PeopleTree { depth, width } => format!("people-tree-{depth}x{width}"),
        }
    }

    fn datoms(self, seed: u64) -> Vec<FixtureDatom> {
        match self {
            DbShape::People { count } => {
                let people = fixture::people(seed, count);
                (1..).zip(&people).flat_map(|(e, p)| person(e, p)).collect()
            }
            DbShape::Wide { depth, width } => {
                let mut out = Vec::new();
                wide(1, depth, width, &mut |e, children| {
                    out.push(ivan(e));
                    out.extend(children.iter().map(|&c| follows(e, c)));
                });
                out
            }
            DbShape::Long { depth, width } => long(depth, width),
            DbShape::PeopleTree { depth, width } => {
                let mut nodes = Vec::new();
                wide(1, depth, width, &mut |e, children| {
                    nodes.push((e, children.to_vec()))
                });
                let people = fixture::people(seed ^ 0x7EE, nodes.len());
                let mut out = Vec::new();
                for ((e, children), p) in nodes.iter().zip(&people) {
                    out.extend(person(*e, p));
                    out.extend(children.iter().map(|&c| follows(*e, c)));
                }
                out
            }
        }
    }
}

fn person(e: u64, p: &Person) -> [FixtureDatom; 5] {
    let d = |a, v| FixtureDatom { e, a, v };
    [
        d(Attr::Name, FixtureValue::Str(p.name)),
        d(Attr::LastName, FixtureValue::Str(p.last_name)),
        d(
            Attr::Sex,
            FixtureValue::Keyword(if p.male { "male" } else { "female" }),
        ),
        d(Attr::Age, FixtureValue::Long(p.age)),
        d(Attr::Salary, FixtureValue::Long(p.salary)),
    ]
}

fn ivan(e: u64) -> FixtureDatom {
    FixtureDatom {
        e,
        a: Attr::Name,
        v: FixtureValue::Str("Ivan"),
    }
}

fn follows(e: u64, child: u64) -> FixtureDatom {
    FixtureDatom {
        e,
        a: Attr::Follows,
        v: FixtureValue::Ref(child),
    }
}

/// datascript-bench's `wide-db`: visit node `id` and its children, depth first.
fn wide(id: u64, depth: u32, width: u32, visit: &mut impl FnMut(u64, &[u64])) {
    if depth == 0 {
        visit(id, &[]);
        return;
    }
    let children: Vec<u64> = (0..u64::from(width))
        .map(|k| id * u64::from(width) + k)
        .collect();
    visit(id, &children);
    for &c in &children {
        wide(c, depth - 1, width, visit);
    }
}

/// datascript-bench's `long-db`, with Datalevin's one-based ids.
fn long(depth: u32, width: u32) -> Vec<FixtureDatom> {
    let (depth, width) = (u64::from(depth), u64::from(width));
    let mut out = Vec::new();
    for x in 0..width {
        let first = x * (depth + 1) + 1;
        for e in first..=first + depth {
            out.push(ivan(e));
            if e < first + depth {
                out.push(follows(e, e + 1));
            }
        }
    }
    out
}

/// One database of the fixture.
pub struct FixtureDb {
    pub shape: DbShape,
    pub datoms: Vec<FixtureDatom>,
}

impl FixtureDb {
    /// The entities as attribute maps, for the row-count oracles.
    pub fn entities(&self) -> BTreeMap<u64, Entity<'_>> {
        let mut out: BTreeMap<u64, Entity<'_>> = BTreeMap::new();
        for d in &self.datoms {
            let ent = out.entry(d.e).or_default();
            match (d.a, &d.v) {
                (Attr::Follows, FixtureValue::Ref(c)) => ent.follows.push(*c),
                (a, v) => ent.attrs.push((a, v)),
            }
        }
        out
    }
}

/// An entity of a [`FixtureDb`], for the oracles.
#[derive(Default)]
pub struct Entity<'a> {
    pub attrs: Vec<(Attr, &'a FixtureValue)>,
    pub follows: Vec<u64>,
}

impl Entity<'_> {
    pub fn get(&self, a: Attr) -> Option<&FixtureValue> {
        self.attrs.iter().find(|(x, _)| *x == a).map(|(_, v)| *v)
    }

    pub fn long(&self, a: Attr) -> Option<i64> {
        match self.get(a) {
            Some(FixtureValue::Long(n)) => Some(*n),
            _ => None,
        }
    }
}

/// The entities reachable from `from` by one or more `:follows` steps.
pub fn descendants(entities: &BTreeMap<u64, Entity<'_>>, from: u64) -> BTreeSet<u64> {
    let mut seen = BTreeSet::new();
    let mut stack = vec![from];
    while let Some(e) = stack.pop() {
        for &c in entities.get(&e).map_or(&[][..], |x| x.follows.as_slice()) {
            if seen.insert(c) {
                stack.push(c);
            }
        }
    }
    seen
}

/// Every database the queries need, each built once.
pub struct QueryFixture {
    pub seed: u64,
    pub dbs: Vec<FixtureDb>,
}

impl QueryFixture {
    pub fn build(seed: u64, queries: &[QuerySpec]) -> QueryFixture {
        let shapes: BTreeSet<DbShape> = queries.iter().map(|q| q.db).collect();
        let dbs = shapes
            .into_iter()
            .map(|shape| FixtureDb {
                shape,
                datoms: shape.datoms(seed),
            })
            .collect();
        QueryFixture { seed, dbs }
    }

    pub fn db(&self, shape: DbShape) -> &FixtureDb {
        let found = self.dbs.iter().find(|d| d.shape == shape);
        found.expect("QueryFixture::build makes a database for every query")
    }
}

/// Timing parameters the runners read from the fixture file.
pub struct RunnerConfig {
    /// Untimed runs: at least `warmup` of them, and for at least `warmup_ms`.
    pub warmup: usize,
    pub warmup_ms: u64,
    pub reps: usize,
    /// Timed repetitions stop early once a query has used this much time (at least 3 run).
    pub budget_ms: u64,
}

/// Write the fixture, the engines' schemas and the queries as one JSON document:
/// `{"seed", "warmup", "warmup_ms", "reps", "budget_ms", "attributes": {ident: type}, "schemas": {engine:
/// edn}, "dbs": {name: [[e, ident, value], ..]}, "queries": [{"name", "db", "query", "inputs"}
/// | {"name", "db", "pull", "root"}]}`.
pub fn write_json(
    fixture: &QueryFixture,
    queries: &[QuerySpec],
    cfg: &RunnerConfig,
    path: &Path,
) -> std::io::Result<()> {
    let attributes: Map<String, Json> = Attr::ALL
        .iter()
        .map(|a| (a.ident().to_string(), json!(a.json_type())))
        .collect();
    let dbs: Map<String, Json> = fixture
        .dbs
        .iter()
        .map(|db| {
            let rows: Vec<Json> = db
                .datoms
                .iter()
                .map(|d| json!([d.e, d.a.ident(), d.v.json()]))
                .collect();
            (db.shape.name(), Json::Array(rows))
        })
        .collect();
    let specs: Vec<Json> = queries.iter().map(query_json).collect();
    let doc = json!({
        "seed": fixture.seed,
        "warmup": cfg.warmup,
        "warmup_ms": cfg.warmup_ms,
        "reps": cfg.reps,
        "budget_ms": cfg.budget_ms,
        "attributes": attributes,
        "schemas": {
            "datascript": crate::queries::DATASCRIPT_SCHEMA_EDN,
            "datalevin": crate::queries::DATALEVIN_SCHEMA_EDN,
            "vev": crate::queries::VEV_SCHEMA_EDN,
        },
        "dbs": dbs,
        "queries": specs,
    });
    std::fs::write(path, serde_json::to_vec(&doc)?)
}

fn query_json(q: &QuerySpec) -> Json {
    match &q.form {
        QueryForm::Query { text, inputs } => {
            json!({"name": q.name, "db": q.db.name(), "query": text, "inputs": inputs})
        }
        QueryForm::Pull { pattern, root } => {
            json!({"name": q.name, "db": q.db.name(), "pull": pattern, "root": root})
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wide_tree_follows_datascript_bench_numbering() {
        // depth 2, width 2: 1 -> 2, 3; 2 -> 4, 5; 3 -> 6, 7.
        let datoms = DbShape::Wide { depth: 2, width: 2 }.datoms(0);
        let edges: Vec<(u64, u64)> = datoms
            .iter()
            .filter_map(|d| match d.v {
                FixtureValue::Ref(c) => Some((d.e, c)),
                _ => None,
            })
            .collect();
        assert_eq!(edges, [(1, 2), (1, 3), (2, 4), (2, 5), (3, 6), (3, 7)]);
        assert_eq!(datoms.len(), 7 + 6, "7 names and 6 edges");
    }

    #[test]
    fn long_chains_are_one_based_and_disjoint() {
        // depth 2, width 2: 1 -> 2 -> 3 and 4 -> 5 -> 6.
        let db = FixtureDb {
            shape: DbShape::Long { depth: 2, width: 2 },
            datoms: DbShape::Long { depth: 2, width: 2 }.datoms(0),
        };
        let ents = db.entities();
        assert_eq!(ents.keys().copied().collect::<Vec<_>>(), [1, 2, 3, 4, 5, 6]);
        assert_eq!(descendants(&ents, 1), BTreeSet::from([2, 3]));
        assert_eq!(descendants(&ents, 4), BTreeSet::from([5, 6]));
        assert!(descendants(&ents, 3).is_empty());
    }

    #[test]
    fn people_are_the_core_suite_people_with_ids_from_one() {
        let datoms = DbShape::People { count: 3 }.datoms(fixture::SEED);
        let people = fixture::people(fixture::SEED, 3);
        assert_eq!(datoms.len(), 15);
        assert_eq!(datoms[5].e, 2);
        assert_eq!(datoms[5].v, FixtureValue::Str(people[1].name));
    }
}
