//! Random databases: entities born in one of 1 to 4 transactions, then changed by later ones.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use vev::ids::BasisT;
use vev::Connection;

use super::{Attr, Tape, Val, SCHEMA};

/// One operation of a transaction, on entity indexes.
#[derive(Clone, Debug)]
pub enum Op {
    Add(usize, Attr, Val),
    Retract(usize, Attr, Val),
}

/// A database to build: entity `i` first appears (through tempid `"e{i}"`) in transaction
/// `born[i]`.
#[derive(Clone, Debug)]
pub struct DbSpec {
    pub born: Vec<usize>,
    pub txs: Vec<Vec<Op>>,
}

/// The values each entity has now, to pick retractions that retract something.
type State = BTreeMap<(usize, Attr), BTreeSet<Val>>;

/// The operations of one transaction, kept free of conflicts: at most one operation per
/// entity and cardinality-one attribute, and per datom for cardinality-many ones.
struct TxOps {
    ops: Vec<Op>,
    touched: HashSet<(usize, Attr, Option<Val>)>,
}

impl TxOps {
    fn claim(&mut self, e: usize, a: Attr, v: &Val) -> bool {
        let key = (e, a, a.many().then(|| v.clone()));
        self.touched.insert(key)
    }

    fn add(&mut self, state: &mut State, e: usize, a: Attr, v: Val) {
        if !self.claim(e, a, &v) {
            return;
        }
        let values = state.entry((e, a)).or_default();
        if !a.many() {
            values.clear();
        }
        values.insert(v.clone());
        self.ops.push(Op::Add(e, a, v));
    }

    fn retract(&mut self, state: &mut State, e: usize, a: Attr, v: Val) {
        if !self.claim(e, a, &v) {
            return;
        }
        state.entry((e, a)).or_default().remove(&v);
        self.ops.push(Op::Retract(e, a, v));
    }
}

impl DbSpec {
    pub fn generate(tape: &mut Tape<'_>) -> DbSpec {
        let n = 5 + tape.pick(36);
        let tx_count = 1 + tape.pick(4);
        let born: Vec<usize> = (0..n)
            .map(|i| {
                if i > 0 && tape.chance(25) {
                    tape.pick(tx_count)
                } else {
                    0
                }
            })
            .collect();
        let mut state = State::new();
        let mut txs = Vec::new();
        for k in 0..tx_count {
            let alive: Vec<usize> = (0..n).filter(|i| born[*i] <= k).collect();
            let mut tx = TxOps {
                ops: Vec::new(),
                touched: HashSet::new(),
            };
            for &e in alive.iter().filter(|i| born[**i] == k) {
                // Dense: most entities have most attributes, so that joins find something.
                let first = tx.ops.len();
                for a in Attr::ALL {
                    let count = if !tape.chance(70) {
                        0
                    } else if a.many() {
                        1 + tape.pick(2)
                    } else {
                        1
                    };
                    for _ in 0..count {
                        let v = Val::of_attr(tape, a, &alive);
                        tx.add(&mut state, e, a, v);
                    }
                }
                if tx.ops.len() == first {
                    let v = Val::of_attr(tape, Attr::Name, &alive);
                    tx.add(&mut state, e, Attr::Name, v);
                }
            }
            let changes = if k == 0 { 0 } else { tape.pick(n / 2 + 2) };
            for _ in 0..changes {
                let e = tape.item(&alive);
                let a = tape.item(&Attr::ALL);
                let existing: Vec<Val> =
                    state.get(&(e, a)).into_iter().flatten().cloned().collect();
                if tape.chance(35) && !existing.is_empty() {
                    let v = tape.item(&existing);
                    tx.retract(&mut state, e, a, v);
                } else {
                    let v = Val::of_attr(tape, a, &alive);
                    tx.add(&mut state, e, a, v);
                }
            }
            txs.push(tx.ops);
        }
        DbSpec { born, txs }
    }

    /// Transaction `k` as EDN; entities born in it are tempids, the others `ids`.
    fn tx_edn(&self, k: usize, ids: &[Option<u64>]) -> String {
        let entity = |i: usize| match ids[i] {
            Some(id) if self.born[i] != k => id.to_string(),
            _ => format!("\"e{i}\""),
        };
        let value = |v: &Val| match v {
            Val::Ent(i) => entity(*i),
            other => other.render(&[]),
        };
        let ops: Vec<String> = self.txs[k]
            .iter()
            .map(|op| match op {
                Op::Add(e, a, v) => format!("[:db/add {} :{} {}]", entity(*e), a.ident(), value(v)),
                Op::Retract(e, a, v) => {
                    format!("[:db/retract {} :{} {}]", entity(*e), a.ident(), value(v))
                }
            })
            .collect();
        format!("[{}]", ops.join("\n "))
    }
}

/// A generated database in Vev.
pub struct Built {
    pub conn: Connection,
    /// Entity index → Vev's entity id.
    pub ids: Vec<u64>,
    /// The basis-t after each data transaction.
    pub ts: Vec<BasisT>,
    /// The data transactions as transacted (to replay in a regression test).
    pub tx_texts: Vec<String>,
}

impl Built {
    /// The transactions, for a failure message.
    pub fn describe(&self) -> String {
        self.tx_texts
            .iter()
            .enumerate()
            .map(|(k, t)| format!("tx {} (t {}):\n{t}", k + 1, self.ts[k]))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

pub fn build(spec: &DbSpec) -> Built {
    let conn = Connection::open_in_memory();
    conn.transact_edn(SCHEMA).expect("the schema transacts");
    let mut ids: Vec<Option<u64>> = vec![None; spec.born.len()];
    let mut ts = Vec::new();
    let mut tx_texts = Vec::new();
    for k in 0..spec.txs.len() {
        let text = spec.tx_edn(k, &ids);
        let report = conn
            .transact_edn(&text)
            .unwrap_or_else(|e| panic!("generated transaction {k} fails: {e}\n{text}"));
        for (i, born) in spec.born.iter().enumerate() {
            if *born == k {
                ids[i] = report.tempid(&format!("e{i}"));
                assert!(
                    ids[i].is_some(),
                    "entity e{i} of transaction {k} got no id\n{text}"
                );
            }
        }
        ts.push(report.db_after.basis_t());
        tx_texts.push(text);
    }
    Built {
        conn,
        ids: ids.into_iter().map(|id| id.unwrap_or_default()).collect(),
        ts,
        tx_texts,
    }
}

/// The schema, then `txs` (as a failure message prints them); returns the basis-t after each.
pub fn build_from_texts(txs: &[&str]) -> (Connection, Vec<BasisT>) {
    let conn = Connection::open_in_memory();
    conn.transact_edn(SCHEMA).expect("the schema transacts");
    let ts = txs
        .iter()
        .map(|t| {
            conn.transact_edn(t)
                .expect("regression data transacts")
                .db_after
                .basis_t()
        })
        .collect();
    (conn, ts)
}
