//! The data of the `storage` benchmark: accounts and the five transaction shapes.
//!
//! Every value is a formula of an account number `j` or a measurement number `k`, so Vev
//! (here) and Datalevin (`clj/storage.clj`, which repeats these formulas) build the same
//! databases and run the same transactions without shipping datoms between processes. The
//! order, offsets and strides come from here and travel to the Clojure side in its spec file.

use vev::{Db, EntityId, EntityRef, Keyword, TxMap, TxOp, TxValue, Value};

use crate::error::BenchError;

/// Vev's schema: `:acct/id` is the unique identity the upsert goes through; the two `:audit/*`
/// attributes are the provenance the upsert puts on its transaction entity. No `:db/index`
/// (Datomic's default: only unique attributes are in AVET).
pub const SCHEMA_EDN: &str = r#"[
 {:db/ident :acct/id :db/valueType :db.type/long :db/cardinality :db.cardinality/one :db/unique :db.unique/identity}
 {:db/ident :acct/name :db/valueType :db.type/string :db/cardinality :db.cardinality/one}
 {:db/ident :acct/balance :db/valueType :db.type/long :db/cardinality :db.cardinality/one}
 {:db/ident :acct/city :db/valueType :db.type/string :db/cardinality :db.cardinality/one}
 {:db/ident :acct/score :db/valueType :db.type/long :db/cardinality :db.cardinality/one}
 {:db/ident :audit/source :db/valueType :db.type/string :db/cardinality :db.cardinality/one}
 {:db/ident :audit/reason :db/valueType :db.type/string :db/cardinality :db.cardinality/one}]"#;

pub const CITIES: [&str; 8] = [
    "Oslo", "Bergen", "Tromsø", "Lima", "Quito", "Accra", "Hanoi", "Perth",
];

/// Attributes of a resident account.
pub const ACCOUNT_ATTRS: usize = 5;

/// Resident account `j` (1-based): five attributes.
pub fn account(j: u64) -> TxOp {
    TxOp::Map(
        TxMap::new(None)
            .with("acct/id", j as i64)
            .with("acct/name", format!("name-{j}"))
            .with("acct/balance", (j * 7919 % 100_000) as i64)
            .with("acct/city", CITIES[(j % 8) as usize])
            .with("acct/score", (j % 1000) as i64),
    )
}

/// Accounts `first..first + count` as transactions of `per_tx` accounts each.
pub fn account_txs(first: u64, count: u64, per_tx: u64) -> impl Iterator<Item = Vec<TxOp>> {
    let end = first + count;
    (first..end)
        .step_by(per_tx as usize)
        .map(move |start| (start..(start + per_tx).min(end)).map(account).collect())
}

/// A transaction shape of the storage benchmark.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// A new entity with three attributes.
    Append,
    /// A new value for a cardinality-one attribute of a resident account.
    Replace,
    /// One datom of a resident account retracted.
    Retract,
    /// `:db/retractEntity` of a resident account (five attributes).
    RetractEntity,
    /// A resident account upserted through `:acct/id` with three changed attributes, plus two
    /// provenance datoms on the transaction entity.
    Upsert,
}

impl Shape {
    /// The order of the report (and of the targets).
    pub const REPORT_ORDER: [Shape; 5] = [
        Shape::Append,
        Shape::Replace,
        Shape::Retract,
        Shape::RetractEntity,
        Shape::Upsert,
    ];

    /// The order of a run: appends last, so that the other shapes see exactly the resident
    /// accounts (each removing shape restores what it removed, untimed).
    pub const RUN_ORDER: [Shape; 5] = [
        Shape::Replace,
        Shape::Retract,
        Shape::RetractEntity,
        Shape::Upsert,
        Shape::Append,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Shape::Append => "append",
            Shape::Replace => "replace",
            Shape::Retract => "retract",
            Shape::RetractEntity => "retract-entity",
            Shape::Upsert => "upsert",
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Shape::Append => "append a 3-attribute entity",
            Shape::Replace => "replace a cardinality-one value",
            Shape::Retract => "retract one datom",
            Shape::RetractEntity => "`:db/retractEntity` of a 5-attribute entity",
            Shape::Upsert => "upsert by identity: 3 attributes + 2 tx datoms",
        }
    }

    /// Shifts the accounts a shape touches, so that the shapes start at different accounts.
    pub fn offset(self) -> u64 {
        match self {
            Shape::Append => 0,
            Shape::Replace => 11,
            Shape::Retract => 23,
            Shape::RetractEntity => 37,
            Shape::Upsert => 41,
        }
    }
}

/// A stride coprime with `n`, so that `target` visits distinct accounts for `k < n`.
pub fn stride(n: u64) -> u64 {
    if n.is_multiple_of(7919) {
        7907
    } else {
        7919
    }
}

/// The account (its `:acct/id`) that measurement `k` of `shape` touches among `n` accounts:
/// spread over the whole database, distinct for `k < n`.
pub fn target(shape: Shape, k: u64, n: u64) -> u64 {
    1 + (k * stride(n) + shape.offset()) % n
}

/// A timed transaction and what restores the database afterwards (untimed).
pub struct ShapeTx {
    pub ops: Vec<TxOp>,
    pub restore: Option<Vec<TxOp>>,
}

/// The entity ids of the attributes the shapes need.
pub struct Attrs {
    id: EntityId,
    score: EntityId,
}

impl Attrs {
    pub fn of(db: &Db) -> Result<Attrs, BenchError> {
        let find = |ident: &'static str| {
            db.entid(&Keyword::new(ident))
                .ok_or(BenchError::MissingAttribute { ident })
        };
        Ok(Attrs {
            id: find("acct/id")?,
            score: find("acct/score")?,
        })
    }

    /// The entity of account `j`, resolved through AVET before the clock starts (as a caller
    /// holding an entity id would have it).
    fn entity(&self, db: &Db, j: u64) -> Result<EntityId, BenchError> {
        db.entity_with_value(self.id, &Value::Long(j as i64))?
            .ok_or(BenchError::MissingAccount { id: j })
    }
}

/// Which pass over the accounts a measurement belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Round {
    /// Each measurement touches an account no transaction has touched since the bulk load:
    /// on a large database its index segments are not in Vev's cache yet.
    First,
    /// The same accounts again, right after the first round: their segments are cached.
    Cached,
}

impl Round {
    pub const ALL: [Round; 2] = [Round::First, Round::Cached];

    pub fn name(self) -> &'static str {
        match self {
            Round::First => "first",
            Round::Cached => "cached",
        }
    }

    /// Added to `k` in the values a measurement writes, so that the second round changes
    /// every value again.
    pub fn value_offset(self) -> u64 {
        match self {
            Round::First => 0,
            Round::Cached => 100_000,
        }
    }
}

/// The value offset of the `Connection::with` pass that follows the two rounds.
pub const WITH_VALUE_OFFSET: u64 = 200_000;

/// Measurement `k` of `shape` on `db`, a database of `n` resident accounts: the account
/// comes from `k`, the values written from `k + value_offset` (see `Round::value_offset`).
pub fn shape_tx(
    shape: Shape,
    k: u64,
    value_offset: u64,
    n: u64,
    db: &Db,
    attrs: &Attrs,
) -> Result<ShapeTx, BenchError> {
    let j = target(shape, k, n);
    let k = k + value_offset;
    let tx = |ops: Vec<TxOp>| ShapeTx { ops, restore: None };
    Ok(match shape {
        Shape::Append => tx(vec![TxOp::Map(
            TxMap::new(None)
                .with("acct/name", format!("new-{k}"))
                .with("acct/balance", k as i64)
                .with("acct/city", CITIES[(k % 8) as usize]),
        )]),
        Shape::Replace => {
            let e = attrs.entity(db, j)?;
            tx(vec![TxOp::add(
                EntityRef::Id(e),
                "acct/balance",
                1_000_000 + k as i64,
            )])
        }
        Shape::Retract => {
            let e = attrs.entity(db, j)?;
            let v = db
                .values(e, attrs.score)?
                .pop()
                .ok_or(BenchError::MissingAccount { id: j })?;
            ShapeTx {
                ops: vec![TxOp::retract(
                    EntityRef::Id(e),
                    "acct/score",
                    Some(TxValue::Value(v.clone())),
                )],
                restore: Some(vec![TxOp::add(EntityRef::Id(e), "acct/score", v)]),
            }
        }
        Shape::RetractEntity => ShapeTx {
            ops: vec![TxOp::RetractEntity {
                e: EntityRef::Id(attrs.entity(db, j)?),
            }],
            restore: Some(vec![account(j)]),
        },
        Shape::Upsert => tx(vec![
            TxOp::Map(
                TxMap::new(None)
                    .with("acct/id", j as i64)
                    .with("acct/name", format!("up-{k}"))
                    .with("acct/balance", 2_000_000 + k as i64)
                    .with("acct/city", format!("city-up-{k}")),
            ),
            TxOp::add(EntityRef::tempid("datomic.tx"), "audit/source", "bench"),
            TxOp::add(
                EntityRef::tempid("datomic.tx"),
                "audit/reason",
                format!("upsert {k}"),
            ),
        ]),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_are_distinct_below_n() {
        for n in [50u64, 2000, 7919 * 3] {
            for shape in Shape::RUN_ORDER {
                let mut seen: Vec<u64> = (0..45.min(n)).map(|k| target(shape, k, n)).collect();
                assert!(seen.iter().all(|&j| (1..=n).contains(&j)));
                seen.sort_unstable();
                seen.dedup();
                assert_eq!(seen.len() as u64, 45.min(n), "n={n} {shape:?}");
            }
        }
    }

    #[test]
    fn account_txs_cover_the_range_once() {
        let txs: Vec<Vec<TxOp>> = account_txs(1, 2_500, 1_000).collect();
        assert_eq!(
            txs.iter().map(Vec::len).collect::<Vec<_>>(),
            [1000, 1000, 500]
        );
    }
}
