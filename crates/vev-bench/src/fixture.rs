//! The deterministic person fixture of the core suite, shared by Vev and DataScript.
//!
//! The people come from a fixed-seed SplitMix64 generator, so every run (and every machine)
//! transacts the same data; DataScript gets it through a JSON file written here, never by
//! re-generating it in JavaScript, so the two engines see exactly the same values.

use std::path::Path;

use serde_json::json;
use vev::{Keyword, TxMap, TxOp, Value};

/// The seed of the person fixture.
pub const SEED: u64 = 0x5EED_0002;

const NAMES: [&str; 8] = [
    "Ivan", "Petr", "Sergei", "Oleg", "Yuri", "Dmitry", "Fedor", "Denis",
];
const LAST_NAMES: [&str; 6] = [
    "Ivanov",
    "Petrov",
    "Sidorov",
    "Kovalev",
    "Kuznetsov",
    "Voronoi",
];

/// The schema of the fixture: every attribute cardinality-one and indexed.
pub const SCHEMA_EDN: &str = r#"[
 {:db/ident :name :db/valueType :db.type/string :db/cardinality :db.cardinality/one :db/index true}
 {:db/ident :last-name :db/valueType :db.type/string :db/cardinality :db.cardinality/one :db/index true}
 {:db/ident :sex :db/valueType :db.type/keyword :db/cardinality :db.cardinality/one :db/index true}
 {:db/ident :age :db/valueType :db.type/long :db/cardinality :db.cardinality/one :db/index true}
 {:db/ident :salary :db/valueType :db.type/long :db/cardinality :db.cardinality/one :db/index true}]"#;

/// The number of attributes each person has.
pub const ATTRS_PER_PERSON: usize = 5;

/// SplitMix64 (Steele, Lea, Flood 2014): tiny, fast, and good enough for fixture data.
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (the modulo bias is irrelevant for n this small).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}

/// One person of the fixture.
#[derive(Clone, Debug, PartialEq)]
pub struct Person {
    pub name: &'static str,
    pub last_name: &'static str,
    pub male: bool,
    pub age: i64,
    pub salary: i64,
}

impl Person {
    fn sex(&self) -> &'static str {
        if self.male {
            "male"
        } else {
            "female"
        }
    }

    /// The person as a Rust-built map form for a new entity.
    pub fn tx_op(&self) -> TxOp {
        TxOp::Map(
            TxMap::new(None)
                .with("name", Value::string(self.name))
                .with("last-name", Value::string(self.last_name))
                .with("sex", Value::Keyword(Keyword::new(self.sex())))
                .with("age", self.age)
                .with("salary", self.salary),
        )
    }

    fn edn(&self) -> String {
        format!(
            "{{:name {:?} :last-name {:?} :sex :{} :age {} :salary {}}}",
            self.name,
            self.last_name,
            self.sex(),
            self.age,
            self.salary
        )
    }
}

/// `count` people from `seed`.
pub fn people(seed: u64, count: usize) -> Vec<Person> {
    let mut rng = SplitMix64::new(seed);
    (0..count)
        .map(|_| Person {
            name: NAMES[rng.below(NAMES.len() as u64) as usize],
            last_name: LAST_NAMES[rng.below(LAST_NAMES.len() as u64) as usize],
            male: rng.below(2) == 0,
            age: rng.below(100) as i64,
            salary: rng.below(100_000) as i64,
        })
        .collect()
}

/// The people as one EDN transaction text.
pub fn edn_text(people: &[Person]) -> String {
    let mut out = String::with_capacity(people.len() * 80);
    out.push('[');
    for p in people {
        out.push_str(&p.edn());
        out.push('\n');
    }
    out.push(']');
    out
}

/// Write the people as JSON for the DataScript side: `{"seed": .., "people": [{..}, ..]}`.
pub fn write_json(people: &[Person], seed: u64, path: &Path) -> std::io::Result<()> {
    let rows: Vec<serde_json::Value> = people
        .iter()
        .map(|p| {
            json!({"name": p.name, "last-name": p.last_name, "sex": p.sex(),
                   "age": p.age, "salary": p.salary})
        })
        .collect();
    let doc = json!({"seed": seed, "people": rows});
    std::fs::write(path, serde_json::to_vec(&doc)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixture_is_deterministic_and_in_range() {
        let a = people(SEED, 1000);
        assert_eq!(a, people(SEED, 1000));
        assert!(a
            .iter()
            .all(|p| (0..100).contains(&p.age) && (0..100_000).contains(&p.salary)));
        assert!(a.iter().any(|p| p.male) && a.iter().any(|p| !p.male));
    }

    #[test]
    fn splitmix64_matches_reference_output() {
        // First output for seed 0 of the reference implementation.
        assert_eq!(SplitMix64::new(0).next_u64(), 0xE220_A839_7B1D_CDAF);
    }
}
