//! Reading a time point from a number or text, the way Datomic's `as-of`, `since` and
//! `tx-range` take one: a basis-t, a transaction id (what `?tx` binds to) or an instant. Every
//! front end (the CLI's flags, its REPL, the bindings) parses through here, so they agree.
//!
//! A number is told apart by its value, as Datomic does: an id in the transaction partition
//! is a transaction id, a number below the first partition is a basis-t. Anything else (a
//! negative number, an id of a user entity) is neither, and an error: Datomic would read its
//! low bits as a t and answer for some unrelated point in time. A t or transaction id later
//! than the database's basis is not an error, as in Datomic: `as-of` it is the latest
//! database, `since` it is empty.

use vev_core::ids::{self, BasisT, EntityId};
use vev_core::StorageError;
use vev_edn::Edn;

use crate::db::{Db, TimePoint};

/// Why a number or text is not a time point.
#[derive(thiserror::Error, Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TimePointError {
    /// A number that is neither a basis-t nor a transaction id.
    #[error(
        "{value} is neither a basis-t nor a transaction id (a basis-t is below {t_limit}, a \
         transaction id is in partition {tx_partition}; this is {found})"
    )]
    NotATime {
        /// The number given.
        value: i64,
        /// Every basis-t is below this (the first id of partition 1).
        t_limit: u64,
        /// The partition of transaction ids.
        tx_partition: u64,
        /// What the number is instead, for the message: `negative`, or `an entity id of
        /// partition 3`.
        found: String,
    },
    /// Text that is not a number, an `#inst "..."` or an RFC 3339 instant.
    #[error(
        "time point {text:?} is neither a basis-t, a transaction id nor an instant \
         (#inst \"2024-01-31T12:00:00Z\")"
    )]
    Unreadable {
        /// The text as given.
        text: String,
    },
}

impl TimePointError {
    /// The stable code: `time/not-a-time` or `time/unreadable`.
    pub fn code(&self) -> &'static str {
        match self {
            TimePointError::NotATime { .. } => "time/not-a-time",
            TimePointError::Unreadable { .. } => "time/unreadable",
        }
    }
}

impl TimePoint {
    /// A number as a time point: a transaction id (in the transaction partition) or a
    /// basis-t (below the first partition).
    pub fn from_long(n: i64) -> Result<TimePoint, TimePointError> {
        let not_a_time = |found: String| TimePointError::NotATime {
            value: n,
            t_limit: 1 << ids::PARTITION_SHIFT,
            tx_partition: ids::PART_TX,
            found,
        };
        let Ok(id) = EntityId::try_from(n) else {
            return Err(not_a_time("negative".into()));
        };
        match ids::partition(id) {
            0 => Ok(TimePoint::T(id)),
            ids::PART_TX => Ok(TimePoint::Tx(id)),
            p => Err(not_a_time(format!("an entity id of partition {p}"))),
        }
    }

    /// A time point written as text: a number (`from_long`), an EDN `#inst "..."`, or an
    /// RFC 3339 instant without the tag (`2024-01-31T12:00:00Z`, `2024-01-31`).
    pub fn parse(text: &str) -> Result<TimePoint, TimePointError> {
        let trimmed = text.trim();
        if let Some(ms) = vev_edn::parse_inst(trimmed) {
            return Ok(TimePoint::Instant(ms));
        }
        match vev_edn::parse(trimmed) {
            Ok(Edn::Integer(n)) => TimePoint::from_long(n),
            Ok(Edn::Inst(ms)) => Ok(TimePoint::Instant(ms)),
            _ => Err(TimePointError::Unreadable {
                text: text.to_owned(),
            }),
        }
    }
}

impl Db {
    /// The bound of a log range (`tx_range`) a time point names: a basis-t or transaction id
    /// is its t; an instant is the first transaction at or after it (Datomic's `tx-range`
    /// takes a date that way, for its start and for its exclusive end).
    /// An instant is looked up in the AVET index, which may read storage.
    pub fn log_t_of(&self, point: TimePoint) -> Result<BasisT, StorageError> {
        match point {
            TimePoint::Instant(ms) => match ms.checked_sub(1) {
                Some(before) => {
                    let mark = self.storage_mark();
                    let t = self.t_at_instant(before) + 1;
                    self.storage_check(mark).map(|()| t)
                }
                None => Ok(0),
            },
            other => self.t_of(other),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_told_apart_by_partition() {
        assert_eq!(TimePoint::from_long(0), Ok(TimePoint::T(0)));
        assert_eq!(TimePoint::from_long(3), Ok(TimePoint::T(3)));
        let tx = ids::tx_id(3) as i64;
        assert_eq!(TimePoint::from_long(tx), Ok(TimePoint::Tx(tx as u64)));
        let user = ids::user_id(17) as i64;
        let e = TimePoint::from_long(user).unwrap_err();
        assert_eq!(e.code(), "time/not-a-time");
        assert!(e.to_string().contains("partition 4"), "{e}");
        assert_eq!(
            TimePoint::from_long(-1).unwrap_err().code(),
            "time/not-a-time"
        );
    }

    #[test]
    fn text_is_a_number_an_inst_or_an_rfc3339_instant() {
        let tx = ids::tx_id(2);
        assert_eq!(TimePoint::parse("2"), Ok(TimePoint::T(2)));
        assert_eq!(TimePoint::parse(&tx.to_string()), Ok(TimePoint::Tx(tx)));
        assert_eq!(
            TimePoint::parse("#inst \"1970-01-01T00:00:01Z\""),
            Ok(TimePoint::Instant(1000))
        );
        assert_eq!(
            TimePoint::parse("1970-01-01T00:00:01Z"),
            Ok(TimePoint::Instant(1000))
        );
        for bad in ["soon", "", "1.5", "[1]", "#inst \"never\""] {
            assert_eq!(TimePoint::parse(bad).unwrap_err().code(), "time/unreadable");
        }
    }

    /// A t, its transaction id and the transaction's instant name the same database, for
    /// `as_of`, `since` and log bounds alike.
    #[test]
    fn a_t_its_tx_id_and_its_instant_give_the_same_view() {
        use vev_core::parse_tx;
        let mut db = Db::empty();
        let mut instants = Vec::new();
        for (i, data) in [
            "[{:db/ident :n :db/valueType :db.type/long :db/cardinality :db.cardinality/one}]",
            "[{:db/id \"a\" :n 1}]",
            "[{:db/id \"b\" :n 2}]",
        ]
        .iter()
        .enumerate()
        {
            let ops: Vec<_> = parse_tx(data).unwrap().into_iter().map(|s| s.op).collect();
            let ctx = crate::TxContext {
                functions: &crate::tx::NoFunctions,
                now_ms: 1_000 * (i as i64 + 1),
                speculative: false,
            };
            db = crate::transact(&db, &ops, &ctx).unwrap().db_after;
            instants.push(db.last_instant());
        }
        for t in 1..=3u64 {
            let ms = instants[t as usize - 1];
            let points = [
                TimePoint::parse(&t.to_string()).unwrap(),
                TimePoint::parse(&ids::tx_id(t).to_string()).unwrap(),
                TimePoint::parse(&format!("#inst \"{}\"", vev_edn::format_inst(ms))).unwrap(),
            ];
            for p in points {
                assert_eq!(db.as_of(p).view().as_of, Some(t), "{p:?}");
                assert_eq!(db.since(p).view().since, Some(t), "{p:?}");
                assert_eq!(db.log_t_of(p).unwrap(), t, "{p:?}");
            }
        }
        // An instant between two transactions: as-of the earlier, a log range from the later.
        let between = TimePoint::Instant(instants[0] + 1);
        assert_eq!(db.t_of(between).unwrap(), 1);
        assert_eq!(db.log_t_of(between).unwrap(), 2);
    }
}
