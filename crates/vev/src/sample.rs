//! Deterministic sample data: the people-and-friends graph that `vev demo` loads and the
//! `scale` benchmark measures.
//!
//! Each person has an email (a unique identity), a name, an age (indexed), a city and two or
//! three friends among the people before them (lookup refs by email, or tempids for people of
//! the same transaction): 6.5 datoms a person on average. The same seed gives the same data.

/// The schema of the people graph, as transaction EDN.
pub const PEOPLE_SCHEMA: &str = r#"[
  {:db/ident :person/email :db/valueType :db.type/string :db/cardinality :db.cardinality/one
   :db/unique :db.unique/identity}
  {:db/ident :person/name :db/valueType :db.type/string :db/cardinality :db.cardinality/one}
  {:db/ident :person/age :db/valueType :db.type/long :db/cardinality :db.cardinality/one
   :db/index true}
  {:db/ident :person/city :db/valueType :db.type/string :db/cardinality :db.cardinality/one}
  {:db/ident :person/friend :db/valueType :db.type/ref :db/cardinality :db.cardinality/many}]"#;

const NAMES: [&str; 12] = [
    "Ann", "Bo", "Chen", "Dag", "Eva", "Femi", "Gro", "Hana", "Ivan", "Juno", "Kai", "Lea",
];

/// The cities people live in.
pub const CITIES: [&str; 6] = ["Oslo", "Riga", "Turku", "Lima", "Pune", "Kobe"];

/// The email of person `i`: `p{i}@example.com`.
pub fn email(i: usize) -> String {
    format!("p{i}@example.com")
}

/// A generator of the people graph, transaction by transaction: a small 64-bit LCG, so every
/// run with the same seed builds the same data.
#[derive(Debug, Clone)]
pub struct People {
    rng: u64,
}

impl People {
    /// A generator whose data depends only on `seed` (`vev demo` uses 42).
    pub fn new(seed: u64) -> People {
        People { rng: seed }
    }

    fn below(&mut self, n: usize) -> usize {
        self.rng = self
            .rng
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.rng >> 33) % n as u64) as usize
    }

    /// The transaction data (EDN) for people `from..to`, who may name any earlier person as
    /// a friend. Call it for consecutive ranges from 0.
    pub fn tx(&mut self, from: usize, to: usize) -> String {
        use std::fmt::Write;
        let mut tx = String::from("[");
        for i in from..to {
            let mut friends = String::new();
            if i > 0 {
                for _ in 0..2 + self.below(2) {
                    let f = self.below(i);
                    // Writing into a String cannot fail.
                    let _ = if f >= from {
                        write!(friends, r#""p{f}" "#)
                    } else {
                        write!(friends, r#"[:person/email "p{f}@example.com"] "#)
                    };
                }
            }
            let name = NAMES[self.below(NAMES.len())];
            let age = 18 + self.below(70);
            let city = CITIES[self.below(CITIES.len())];
            let _ = write!(
                tx,
                r#"{{:db/id "p{i}" :person/email "p{i}@example.com" :person/name "{name}" :person/age {age} :person/city "{city}" :person/friend [{friends}]}}"#
            );
        }
        tx.push(']');
        tx
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_data_and_friends_point_back() {
        let (mut a, mut b) = (People::new(42), People::new(42));
        let first = a.tx(0, 3);
        assert_eq!(first, b.tx(0, 3));
        assert!(first.starts_with(r#"[{:db/id "p0" :person/email "p0@example.com""#));
        // p0 has no friends; later people name earlier ones, by tempid within the transaction
        // and by lookup ref before it.
        assert!(first.contains(r#":person/friend []}"#));
        let second = a.tx(3, 5);
        assert!(second.contains(r#"[:person/email "p"#), "{second}");
        assert_ne!(second, People::new(7).tx(3, 5));
    }

    #[test]
    fn a_generated_transaction_commits() {
        let conn = crate::Connection::open_in_memory();
        conn.transact_edn(PEOPLE_SCHEMA).unwrap();
        let mut people = People::new(1);
        conn.transact_edn(&people.tx(0, 50)).unwrap();
        let report = conn.transact_edn(&people.tx(50, 100)).unwrap();
        let n = report
            .db_after
            .q("[:find (count ?p) . :where [?p :person/email]]", &[])
            .unwrap();
        assert_eq!(n.to_edn(), crate::Edn::Integer(100));
    }
}
