//! A reference [`Source`] for tests: a `Vec` of datoms and a hand-built [`Schema`].
//!
//! [`VecSource`] is deliberately naive so that it can serve as an oracle: each index order is
//! the datom list sorted with [`IndexOrder::cmp`], a scan is a binary search for the first
//! datom of the prefix followed by a linear walk, and counts are exact. It keeps the two
//! membership rules of the real indexes: every datom is in EAVT, AEVT, AVET and the log, and
//! VAET holds only datoms of ref attributes.
//!
//! The schema helpers install the system attributes and idents with the ids of
//! `vev_core::schema::sys` (as the bootstrap transaction does), then user attributes with ids
//! from [`USER_ATTR_ID_FIRST`] up, in the order given. Pick entity ids for test data that do
//! not collide with those (1000 and up, or `vev_core::ids::user_id(n)`).

use std::cmp::Ordering;
use std::ops::Bound;

use vev_core::ids::{t_of, tx_id};
use vev_core::schema::sys;
use vev_core::{
    Attribute, BasisT, Cardinality, Component, Datom, EntityId, IndexOrder, Keyword, Schema,
    Unique, Value, ValueType,
};

use crate::source::Source;

/// The id of the first user attribute [`schema_of`] installs; the ones after it follow.
pub const USER_ATTR_ID_FIRST: EntityId = sys::END;

/// A user attribute for [`schema_of`]: ident (without the colon), value type, cardinality,
/// uniqueness and whether it is a component.
pub type AttrDef<'a> = (&'a str, ValueType, Cardinality, Option<Unique>, bool);

/// A database value held as plain vectors of datoms, one per index order.
#[derive(Clone, Debug)]
pub struct VecSource {
    schema: Schema,
    basis_t: BasisT,
    history: bool,
    eavt: Vec<Datom>,
    aevt: Vec<Datom>,
    avet: Vec<Datom>,
    vaet: Vec<Datom>,
    log: Vec<Datom>,
}

impl VecSource {
    /// A current view holding exactly `datoms`; its basis-t is the latest t among their
    /// transactions (0 when there are none).
    pub fn new(schema: Schema, datoms: Vec<Datom>) -> VecSource {
        let sorted = |order: IndexOrder, mut ds: Vec<Datom>| {
            ds.sort_by(|x, y| order.cmp(x, y));
            ds
        };
        let is_ref = |a: EntityId| schema.attribute(a).is_some_and(|x| x.is_ref());
        let refs: Vec<Datom> = datoms.iter().filter(|d| is_ref(d.a)).cloned().collect();
        VecSource {
            basis_t: datoms.iter().map(|d| t_of(d.tx)).max().unwrap_or(0),
            history: false,
            eavt: sorted(IndexOrder::Eavt, datoms.clone()),
            aevt: sorted(IndexOrder::Aevt, datoms.clone()),
            avet: sorted(IndexOrder::Avet, datoms.clone()),
            vaet: sorted(IndexOrder::Vaet, refs),
            log: sorted(IndexOrder::Log, datoms),
            schema,
        }
    }

    /// A source over `schema_of(attrs)` holding `datoms_of` the facts.
    pub fn of_facts(attrs: &[AttrDef<'_>], facts: &[(EntityId, &str, Value)]) -> VecSource {
        let schema = schema_of(attrs);
        let datoms = datoms_of(&schema, facts);
        VecSource::new(schema, datoms)
    }

    /// The same datoms, presented as a history view (`is_history()`) or not.
    pub fn with_history(mut self, history: bool) -> VecSource {
        self.history = history;
        self
    }

    /// Every datom, in EAVT order.
    pub fn datoms(&self) -> &[Datom] {
        &self.eavt
    }

    fn index(&self, order: IndexOrder) -> &[Datom] {
        match order {
            IndexOrder::Eavt => &self.eavt,
            IndexOrder::Aevt => &self.aevt,
            IndexOrder::Avet => &self.avet,
            IndexOrder::Vaet => &self.vaet,
            IndexOrder::Log => &self.log,
        }
    }

    /// The datoms of `order` under `prefix`.
    fn slice(&self, order: IndexOrder, prefix: &[Component]) -> &[Datom] {
        let index = self.index(order);
        let lo = index.partition_point(|d| order.cmp_prefix(d, prefix) == Ordering::Less);
        let hi = index.partition_point(|d| order.cmp_prefix(d, prefix) != Ordering::Greater);
        &index[lo..hi.max(lo)]
    }

    /// The AVET datoms of `a` with a value inside the bounds.
    fn range(&self, a: EntityId, start: Bound<&Value>, end: Bound<&Value>) -> &[Datom] {
        let attr = self.slice(IndexOrder::Avet, &[Component::Entity(a)]);
        let lo = attr.partition_point(|d| match start {
            Bound::Included(s) => d.v < *s,
            Bound::Excluded(s) => d.v <= *s,
            Bound::Unbounded => false,
        });
        let hi = attr.partition_point(|d| match end {
            Bound::Included(e) => d.v <= *e,
            Bound::Excluded(e) => d.v < *e,
            Bound::Unbounded => true,
        });
        &attr[lo..hi.max(lo)]
    }
}

impl Source for VecSource {
    fn schema(&self) -> &Schema {
        &self.schema
    }

    fn basis_t(&self) -> BasisT {
        self.basis_t
    }

    fn is_history(&self) -> bool {
        self.history
    }

    fn scan(&self, order: IndexOrder, prefix: &[Component], visit: &mut dyn FnMut(&Datom) -> bool) {
        for d in self.slice(order, prefix) {
            if !visit(d) {
                return;
            }
        }
    }

    fn scan_range(
        &self,
        a: EntityId,
        start: Bound<&Value>,
        end: Bound<&Value>,
        visit: &mut dyn FnMut(&Datom) -> bool,
    ) {
        for d in self.range(a, start, end) {
            if !visit(d) {
                return;
            }
        }
    }

    fn count_estimate(&self, order: IndexOrder, prefix: &[Component]) -> usize {
        self.slice(order, prefix).len()
    }

    fn count_range_estimate(&self, a: EntityId, start: Bound<&Value>, end: Bound<&Value>) -> usize {
        self.range(a, start, end).len()
    }
}

/// The system schema plus `attrs`, installed with ids `USER_ATTR_ID_FIRST`,
/// `USER_ATTR_ID_FIRST + 1`, ... in order.
pub fn schema_of(attrs: &[AttrDef<'_>]) -> Schema {
    let mut schema = Schema::system();
    for (id, &(ident, value_type, cardinality, unique, is_component)) in
        (USER_ATTR_ID_FIRST..).zip(attrs)
    {
        let attr = attribute(id, ident, value_type, cardinality, unique, is_component);
        schema.set_ident(id, attr.ident.clone());
        schema.install(attr);
    }
    schema
}

/// Datoms asserting `facts` (entity, attribute ident without the colon, value) in the
/// transaction with basis-t 1.
///
/// # Panics
///
/// When an attribute ident is not in `schema`: this is a helper for tests, whose data is
/// written by hand.
pub fn datoms_of(schema: &Schema, facts: &[(EntityId, &str, Value)]) -> Vec<Datom> {
    let tx = tx_id(1);
    facts
        .iter()
        .map(|(e, ident, v)| {
            let a = schema.entid(&Keyword::new(ident));
            assert!(
                a.is_some(),
                "test data names :{ident}, which the schema lacks"
            );
            Datom::new(*e, a.unwrap_or_default(), v.clone(), tx, true)
        })
        .collect()
}

fn attribute(
    id: EntityId,
    ident: &str,
    value_type: ValueType,
    cardinality: Cardinality,
    unique: Option<Unique>,
    is_component: bool,
) -> Attribute {
    Attribute {
        id,
        ident: Keyword::new(ident),
        value_type,
        cardinality,
        unique,
        is_component,
        index: false,
        fulltext: false,
        no_history: false,
        tuple: None,
    }
}

/// A query result in a form that compares equal between plans: relation rows sorted (with
/// their duplicates, for `:with` bags) and collections sorted, since Datomic's results are
/// sets (or bags) and only their order may differ. The oracles and the fuzzers compare these.
pub fn canonical(result: crate::QueryResult) -> vev_edn::Edn {
    use crate::QueryResult;
    use vev_edn::Edn;
    match result {
        QueryResult::Rel(rows) | QueryResult::Bag(rows) => {
            let mut rows = rows.into_vecs();
            rows.sort();
            Edn::Vector(rows.into_iter().map(Edn::Vector).collect())
        }
        QueryResult::Coll(mut items) | QueryResult::Maps(mut items) => {
            items.sort();
            Edn::Vector(items)
        }
        QueryResult::Scalar(_) | QueryResult::Tuple(_) => result.to_edn(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source() -> VecSource {
        let attrs: &[AttrDef<'_>] = &[
            ("p/name", ValueType::String, Cardinality::One, None, false),
            ("p/friend", ValueType::Ref, Cardinality::Many, None, false),
        ];
        VecSource::of_facts(
            attrs,
            &[
                (1001, "p/name", Value::string("b")),
                (1000, "p/name", Value::string("a")),
                (1000, "p/friend", Value::Ref(1001)),
                (1002, "p/friend", Value::Ref(1001)),
            ],
        )
    }

    fn scan(src: &VecSource, order: IndexOrder, prefix: &[Component]) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        src.scan(order, prefix, &mut |d| {
            out.push((d.e, d.a));
            true
        });
        out
    }

    #[test]
    fn schema_ids() {
        let schema = schema_of(&[("p/x", ValueType::Long, Cardinality::One, None, false)]);
        let x = schema.attribute_by_ident(&Keyword::new("p/x"));
        assert_eq!(x.map(|a| a.id), Some(USER_ATTR_ID_FIRST));
        assert_eq!(schema.entid(&Keyword::new("db/ident")), Some(sys::IDENT));
        assert_eq!(
            schema.entid(&Keyword::new("db.type/ref")),
            Some(ValueType::Ref.entity_id())
        );
    }

    #[test]
    fn scans_follow_prefix_and_order() {
        let src = source();
        let (name, friend) = (USER_ATTR_ID_FIRST, USER_ATTR_ID_FIRST + 1);
        let eavt = scan(&src, IndexOrder::Eavt, &[Component::Entity(1000)]);
        assert_eq!(eavt, [(1000, name), (1000, friend)]);
        let vaet = scan(&src, IndexOrder::Vaet, &[Component::Entity(1001)]);
        assert_eq!(vaet, [(1000, friend), (1002, friend)]);
        // VAET holds ref attributes only.
        assert_eq!(src.count_estimate(IndexOrder::Vaet, &[]), 2);
        assert_eq!(
            src.count_estimate(IndexOrder::Avet, &[Component::Entity(name)]),
            2
        );
        assert_eq!(src.basis_t(), 1);
    }

    #[test]
    fn scan_range_bounds() {
        let src = source();
        let a = USER_ATTR_ID_FIRST;
        let b = Value::string("b");
        let mut seen = Vec::new();
        src.scan_range(
            a,
            Bound::Excluded(&Value::string("a")),
            Bound::Included(&b),
            &mut |d| {
                seen.push(d.e);
                true
            },
        );
        assert_eq!(seen, [1001]);
        assert_eq!(
            src.count_range_estimate(a, Bound::Unbounded, Bound::Excluded(&b)),
            1
        );
        assert_eq!(
            src.count_range_estimate(a, Bound::Included(&b), Bound::Unbounded),
            1
        );
    }
}
