//! Stage 1: flatten transaction data into terms with resolved attributes and typed values.

use std::sync::Arc;

use vev_core::error::EntityName;
use vev_core::schema::{Attribute, TupleSpec, ValueType};
use vev_core::value::hex_decode;
use vev_core::{AttrRef, Edn, EntityRef, Keyword, TempId, TxError, TxMap, TxOp, TxValue, Value};

use super::{is_allocated, NoFunctions, Term, TermEntity, TermValue, Terms, TxFunctions};
use crate::db::Db;

/// Transaction functions may call each other; this bounds the depth.
const CALL_DEPTH_MAX: usize = 32;

struct Expander<'a> {
    db: &'a Db,
    functions: &'a dyn TxFunctions,
    terms: Vec<Term>,
    next_internal: u64,
    /// The holders of the lookup refs the transaction data names, looked up together.
    holders: &'a Holders,
    /// The attributes of the latest idents seen, by the ident's allocation: maps built from
    /// one template (a SQL table's rows, an import's records) share their keys' `Arc`s, so
    /// most keys are found here without hashing the ident. Each entry holds its key, so no
    /// other ident can take its address while it is here.
    recent: [Option<(Keyword, Arc<Attribute>)>; RECENT_IDENTS],
    recent_next: usize,
}

/// How many ident lookups an `Expander` remembers (`Expander::recent`).
const RECENT_IDENTS: usize = 8;

/// Estimated terms (an operation's, or a map's attributes) from which expansion runs on
/// two threads, each over half of the operations with its own lookup-ref prefetch.
const EXPAND_SPLIT_MIN: usize = 1024;

pub(crate) fn expand(db: &Db, ops: &[TxOp], functions: &dyn TxFunctions) -> Result<Terms, TxError> {
    // Many terms and no transaction function (which may not be called from another thread):
    // two halves at once. The second's internal tempids are renumbered after the first's, as
    // one pass would have numbered them; on any error the whole expansion runs again in one
    // pass, so the error is the one a single pass reports.
    let calls = |op: &TxOp| matches!(op, TxOp::Call { .. });
    if estimated_terms(ops) >= EXPAND_SPLIT_MIN && !ops.iter().any(calls) {
        let (first, second) = ops.split_at(ops.len() / 2);
        // The other half has no call to make (no `TxOp::Call`), so no functions.
        let halves = vev_core::par::join(
            || expand_all(db, functions, first),
            || expand_all(db, &NoFunctions, second),
        );
        if let (Ok((first, n)), Ok((mut second, used))) = halves {
            if n > 0 && used > 0 {
                for term in &mut second {
                    renumber_internal(term, n);
                }
            }
            return Ok(Terms(vec![first, second]));
        }
    }
    expand_all(db, functions, ops).map(|(terms, _)| Terms(vec![terms]))
}

/// About how many terms `ops` make: a map one per attribute, any other operation one.
fn estimated_terms(ops: &[TxOp]) -> usize {
    ops.iter()
        .map(|op| match op {
            TxOp::Map(m) => m.attrs.len().max(1),
            _ => 1,
        })
        .sum()
}

/// The holders of the lookup refs `ops` name, looked up together.
fn prefetch(db: &Db, ops: &[TxOp]) -> Holders {
    let mut keys = Vec::new();
    for op in ops {
        lookup_keys_of_op(db, op, &mut keys);
    }
    Holders::prefetch(db, keys.into_iter())
}

/// The terms of `ops` in one pass, and how many internal tempids they use.
fn expand_all(
    db: &Db,
    functions: &dyn TxFunctions,
    ops: &[TxOp],
) -> Result<(Vec<Term>, u64), TxError> {
    let holders = prefetch(db, ops);
    let mut x = Expander {
        db,
        functions,
        terms: Vec::with_capacity(ops.len() * 4),
        next_internal: 0,
        holders: &holders,
        recent: Default::default(),
        recent_next: 0,
    };
    for op in ops {
        x.op(op, 0)?;
    }
    Ok((x.terms, x.next_internal))
}

/// Make each internal tempid `n` of `term` `n + by`.
fn renumber_internal(term: &mut Term, by: u64) {
    let temp = |t: &mut TempId| {
        if let TempId::Internal(n) = t {
            *n += by;
        }
    };
    let entity = |e: &mut TermEntity| {
        if let TermEntity::Temp(t) = e {
            temp(t);
        }
    };
    let value = |v: &mut TermValue| {
        if let TermValue::Temp(t) = v {
            temp(t);
        }
    };
    match term {
        Term::Add { e, v, .. } => {
            entity(e);
            value(v);
        }
        Term::Retract { e, v, .. } => {
            entity(e);
            v.iter_mut().for_each(value);
        }
        Term::RetractEntity { e } => entity(e),
        Term::Cas { e, old, new, .. } => {
            entity(e);
            old.iter_mut().for_each(value);
            value(new);
        }
    }
}

impl Expander<'_> {
    fn op(&mut self, op: &TxOp, depth: usize) -> Result<(), TxError> {
        match op {
            TxOp::Add { e, a, v } => {
                let a = self.attr(a)?;
                let e = self.entity(e)?;
                for v in self.values(&a, v, &e)? {
                    self.terms.push(Term::Add {
                        e: e.clone(),
                        a: a.clone(),
                        v,
                    });
                }
            }
            TxOp::Retract { e, a, v } => {
                let a = self.attr(a)?;
                if a.is_composite() {
                    return Err(TxError::CompositeTupleWrite {
                        attribute: a.ident.clone(),
                    });
                }
                let e = self.entity(e)?;
                match v {
                    None => self.terms.push(Term::Retract { e, a, v: None }),
                    Some(v) => {
                        for v in self.values(&a, v, &e)? {
                            self.terms.push(Term::Retract {
                                e: e.clone(),
                                a: a.clone(),
                                v: Some(v),
                            });
                        }
                    }
                }
            }
            TxOp::RetractEntity { e } => {
                let e = self.entity(e)?;
                self.terms.push(Term::RetractEntity { e });
            }
            TxOp::Cas { e, a, old, new } => {
                let a = self.attr(a)?;
                if a.is_composite() {
                    return Err(TxError::CompositeTupleWrite {
                        attribute: a.ident.clone(),
                    });
                }
                let e = self.entity(e)?;
                let old = old.as_ref().map(|v| self.single(&a, v, &e)).transpose()?;
                let new = self.single(&a, new, &e)?;
                self.terms.push(Term::Cas { e, a, old, new });
            }
            TxOp::Map(m) => {
                self.map(m, None)?;
            }
            TxOp::Call { name, args } => self.call(name, args, depth)?,
        }
        Ok(())
    }

    fn call(
        &mut self,
        name: &vev_core::Keyword,
        args: &[Edn],
        depth: usize,
    ) -> Result<(), TxError> {
        if depth >= CALL_DEPTH_MAX {
            return Err(TxError::FunctionFailed {
                name: name.clone(),
                message: format!("transaction functions nested deeper than {CALL_DEPTH_MAX}"),
            });
        }
        match self.functions.call(name, self.db, args) {
            None => Err(TxError::UnknownFunction {
                name: Edn::Keyword(name.clone()),
            }),
            Some(Err(message)) => Err(TxError::FunctionFailed {
                name: name.clone(),
                message,
            }),
            Some(Ok(ops)) => {
                for op in &ops {
                    self.op(op, depth + 1)?;
                }
                Ok(())
            }
        }
    }

    /// A map form; `nested_under` is set for nested maps (the attribute that refers to it).
    fn map(&mut self, m: &TxMap, nested_under: Option<&Attribute>) -> Result<TermEntity, TxError> {
        self.map_inner(m, nested_under).map_err(|err| match err {
            // Name a schema entity by the ident the map gives it.
            TxError::InvalidAttribute {
                attribute: Edn::String(_),
                reason,
            } => {
                let ident = m.attrs.iter().find(|(k, _)| k.as_str() == "db/ident");
                let attribute = ident.map_or(Edn::Nil, |(_, v)| v.to_edn());
                TxError::InvalidAttribute { attribute, reason }
            }
            other => other,
        })
    }

    fn map_inner(
        &mut self,
        m: &TxMap,
        nested_under: Option<&Attribute>,
    ) -> Result<TermEntity, TxError> {
        let e = match &m.id {
            Some(r) => self.entity(r)?,
            None => {
                self.next_internal += 1;
                TermEntity::Temp(TempId::Internal(self.next_internal))
            }
        };
        if let Some(parent_attr) = nested_under {
            self.check_nested(m, parent_attr)?;
        }
        for (k, v) in &m.attrs {
            if let Some(a) = self.recent_attr(k) {
                for v in self.values(&a, v, &e)? {
                    self.terms.push(Term::Add {
                        e: e.clone(),
                        a: a.clone(),
                        v,
                    });
                }
                continue;
            }
            if k.is_reverse() {
                let a = self.attr(&AttrRef::Ident(k.reversed()))?;
                if !a.is_ref() {
                    return Err(TxError::WrongValueType {
                        attribute: a.ident.clone(),
                        expected: a.value_type,
                        value: v.to_edn(),
                        found: "a reverse reference",
                        entity: entity_name(&e),
                    });
                }
                for other in self.values_reverse(&a, v)? {
                    let from = match other {
                        TermValue::Val(Value::Ref(id)) => TermEntity::Id(id),
                        TermValue::Temp(t) => TermEntity::Temp(t),
                        TermValue::Val(_) => unreachable!("ref_value yields refs and tempids"),
                    };
                    self.push_add(from, &a, e.clone());
                }
                continue;
            }
            let a = self.attr(&AttrRef::Ident(k.clone()))?;
            self.remember(k, &a);
            for v in self.values(&a, v, &e)? {
                self.terms.push(Term::Add {
                    e: e.clone(),
                    a: a.clone(),
                    v,
                });
            }
        }
        Ok(e)
    }

    fn push_add(&mut self, from: TermEntity, a: &Arc<Attribute>, to: TermEntity) {
        let v = match to {
            TermEntity::Id(id) => TermValue::Val(Value::Ref(id)),
            TermEntity::Temp(t) => TermValue::Temp(t),
        };
        self.terms.push(Term::Add {
            e: from,
            a: a.clone(),
            v,
        });
    }

    /// Datomic's rule: a nested map is a component, or names its entity, or carries a
    /// `:db.unique/identity` attribute through which it can upsert.
    fn check_nested(&self, m: &TxMap, parent: &Attribute) -> Result<(), TxError> {
        if parent.is_component || m.id.is_some() {
            return Ok(());
        }
        let has_unique = m.attrs.iter().any(|(k, _)| {
            self.db
                .attribute(k)
                .is_some_and(|a| a.unique == Some(vev_core::Unique::Identity))
        });
        if has_unique {
            return Ok(());
        }
        Err(TxError::malformed(
            &m.to_edn(),
            format!(
                "nested entity map under non-component attribute {} needs a :db/id or a unique attribute",
                parent.ident
            ),
        ))
    }

    /// The attribute of (non-reverse) ident `k` if it is among the latest looked up, found
    /// by the ident's allocation.
    fn recent_attr(&self, k: &Keyword) -> Option<Arc<Attribute>> {
        self.recent
            .iter()
            .flatten()
            .find_map(|(known, a)| std::ptr::eq(known.as_str(), k.as_str()).then(|| a.clone()))
    }

    fn remember(&mut self, k: &Keyword, a: &Arc<Attribute>) {
        self.recent[self.recent_next] = Some((k.clone(), a.clone()));
        self.recent_next = (self.recent_next + 1) % RECENT_IDENTS;
    }

    fn attr(&self, a: &AttrRef) -> Result<Arc<Attribute>, TxError> {
        let schema = self.db.schema();
        let found = match a {
            AttrRef::Ident(k) => schema.attribute_by_ident(k),
            AttrRef::Id(id) => schema.attribute(*id),
        };
        found
            .cloned()
            .ok_or_else(|| TxError::UnknownAttribute { ident: a.to_edn() })
    }

    /// Resolve an entity in entity position.
    pub(super) fn entity(&self, r: &EntityRef) -> Result<TermEntity, TxError> {
        resolve_entity(self.db, r, self.holders)
    }

    /// A value that must be single (cas).
    fn single(
        &mut self,
        a: &Arc<Attribute>,
        v: &TxValue,
        e: &TermEntity,
    ) -> Result<TermValue, TxError> {
        let mut vs = self.values_inner(a, v, e, false)?;
        match (vs.len(), vs.pop()) {
            (1, Some(v)) => Ok(v),
            _ => Err(TxError::malformed(&v.to_edn(), "expected a single value")),
        }
    }

    fn values(
        &mut self,
        a: &Arc<Attribute>,
        v: &TxValue,
        e: &TermEntity,
    ) -> Result<Values, TxError> {
        self.values_inner(a, v, e, a.is_many())
            .map_err(|err| schema_error(err, a, e))
    }

    fn values_reverse(
        &mut self,
        a: &Arc<Attribute>,
        v: &TxValue,
    ) -> Result<Vec<TermValue>, TxError> {
        let mut out = Vec::new();
        for item in self.split_values(a, v, true) {
            match self.nested(a, &item) {
                Some(nested) => out.push(nested?),
                None => out.push(self.ref_value(&item)?),
            }
        }
        Ok(out)
    }

    fn values_inner(
        &mut self,
        a: &Arc<Attribute>,
        v: &TxValue,
        e: &TermEntity,
        many: bool,
    ) -> Result<Values, TxError> {
        // The usual case, one value, is neither split nor copied.
        if !self.is_collection(a, v, many) {
            return Ok(smallvec::smallvec![self.one_value(a, v, e)?]);
        }
        split(v)
            .iter()
            .map(|item| self.one_value(a, item, e))
            .collect()
    }

    /// The single values in `v`: a collection of values for a cardinality-many attribute
    /// (but not a lookup ref of a ref attribute, nor one tuple of a tuple attribute).
    fn split_values(&self, a: &Attribute, v: &TxValue, many: bool) -> Vec<TxValue> {
        if self.is_collection(a, v, many) {
            split(v)
        } else {
            vec![v.clone()]
        }
    }

    /// Whether `v` is a collection of values of `a` (see `split_values`).
    fn is_collection(&self, a: &Attribute, v: &TxValue, many: bool) -> bool {
        match v {
            TxValue::Many(_) => true,
            TxValue::Edn(Edn::Set(_)) => many,
            TxValue::Edn(Edn::Vector(items) | Edn::List(items)) if many => match a.value_type {
                ValueType::Ref => !self.is_lookup_ref(items),
                ValueType::Tuple => items.iter().all(|x| matches!(x, Edn::Vector(_))),
                _ => true,
            },
            _ => false,
        }
    }

    /// A nested entity map given as the value of ref attribute `a`, expanded.
    fn nested(&mut self, a: &Arc<Attribute>, v: &TxValue) -> Option<Result<TermValue, TxError>> {
        let expanded = match v {
            TxValue::Map(m) => self.map(m, Some(a)),
            TxValue::Edn(form @ Edn::Map(_)) => match TxOp::from_edn(form) {
                Ok(TxOp::Map(m)) => self.map(&m, Some(a)),
                Ok(_) => unreachable!("a map form is a map op"),
                Err(err) => Err(err),
            },
            _ => return None,
        };
        Some(expanded.map(e_to_v))
    }

    fn is_lookup_ref(&self, items: &[Edn]) -> bool {
        matches!(items, [Edn::Keyword(k), _] if self.db.attribute(k).is_some_and(|a| a.unique.is_some()))
    }

    fn one_value(
        &mut self,
        a: &Arc<Attribute>,
        v: &TxValue,
        e: &TermEntity,
    ) -> Result<TermValue, TxError> {
        if a.is_ref() {
            if let Some(nested) = self.nested(a, v) {
                return nested;
            }
            return match v {
                TxValue::Value(Value::Ref(_)) | TxValue::Entity(_) | TxValue::Edn(_) => self
                    .ref_value(v)
                    .map_err(|err| wrong_type_for(err, a, v, e)),
                TxValue::Value(other) => Err(wrong_type(a, &other.to_edn(), e)),
                TxValue::Many(_) | TxValue::Map(_) => Err(wrong_type(a, &v.to_edn(), e)),
            };
        }
        match v {
            TxValue::Edn(x) => coerce(self.db, a, x)
                .ok_or_else(|| wrong_type(a, x, e))
                .map(TermValue::Val),
            TxValue::Value(x) if x.value_type() == Some(a.value_type) => {
                Ok(TermValue::Val(x.clone()))
            }
            TxValue::Entity(EntityRef::TempId(t)) => Err(TxError::TempidNotRef {
                tempid: t.to_string(),
                attribute: a.ident.clone(),
            }),
            other => Err(wrong_type(a, &other.to_edn(), e)),
        }
    }

    /// A value of a ref attribute: an entity reference.
    fn ref_value(&self, v: &TxValue) -> Result<TermValue, TxError> {
        let r = match v {
            TxValue::Entity(r) => r.clone(),
            TxValue::Value(Value::Ref(id)) => EntityRef::Id(*id),
            TxValue::Edn(x) => EntityRef::from_edn(x)?,
            other => {
                return Err(TxError::malformed(
                    &other.to_edn(),
                    "expected an entity reference",
                ))
            }
        };
        Ok(e_to_v(resolve_entity(self.db, &r, self.holders)?))
    }
}

/// A bad value of a schema attribute (`:db/valueType :db.type/integer`) is an invalid
/// attribute definition rather than a plain type error.
fn schema_error(err: TxError, a: &Attribute, e: &TermEntity) -> TxError {
    if a.id >= vev_core::schema::sys::END || a.id == vev_core::schema::sys::TX_INSTANT {
        return err;
    }
    match err {
        TxError::UnknownIdent { .. } | TxError::WrongValueType { .. } => {
            TxError::InvalidAttribute {
                attribute: match e {
                    TermEntity::Id(id) => Edn::Integer(*id as i64),
                    TermEntity::Temp(t) => t.to_edn(),
                },
                reason: format!("bad value for {}: {err}", a.ident),
            }
        }
        other => other,
    }
}

fn e_to_v(e: TermEntity) -> TermValue {
    match e {
        TermEntity::Id(id) => TermValue::Val(Value::Ref(id)),
        TermEntity::Temp(t) => TermValue::Temp(t),
    }
}

/// The values one map entry or list form gives an attribute: usually one, kept inline.
type Values = smallvec::SmallVec<[TermValue; 1]>;

fn split(v: &TxValue) -> Vec<TxValue> {
    match v {
        TxValue::Many(items) => items.clone(),
        TxValue::Edn(Edn::Vector(items) | Edn::List(items)) => {
            items.iter().cloned().map(TxValue::Edn).collect()
        }
        TxValue::Edn(Edn::Set(items)) => items.iter().cloned().map(TxValue::Edn).collect(),
        other => vec![other.clone()],
    }
}

fn entity_name(e: &TermEntity) -> EntityName {
    match e {
        TermEntity::Id(id) => EntityName::Id(*id),
        TermEntity::Temp(t) => EntityName::TempId(t.to_string()),
    }
}

pub(super) fn wrong_type(a: &Attribute, v: &Edn, e: &TermEntity) -> TxError {
    TxError::WrongValueType {
        attribute: a.ident.clone(),
        expected: a.value_type,
        value: v.clone(),
        found: v.type_name(),
        entity: entity_name(e),
    }
}

/// Errors from resolving a ref value keep their own code, except a plain wrong shape.
fn wrong_type_for(err: TxError, a: &Attribute, v: &TxValue, e: &TermEntity) -> TxError {
    match err {
        TxError::MalformedForm { .. } => wrong_type(a, &v.to_edn(), e),
        other => other,
    }
}

/// Resolve an entity reference against db-before (tempids stay symbolic); a lookup ref's
/// holder from `holders` when it was prefetched.
fn resolve_entity(db: &Db, r: &EntityRef, holders: &Holders) -> Result<TermEntity, TxError> {
    match r {
        EntityRef::Id(id) => {
            let tx_next = vev_core::ids::tx_id(db.basis_t() + 1);
            if is_allocated(db, *id, tx_next) {
                Ok(TermEntity::Id(*id))
            } else {
                Err(TxError::InvalidEntityId { id: *id as i64 })
            }
        }
        EntityRef::Ident(k) => db
            .entid(k)
            .map(TermEntity::Id)
            .ok_or_else(|| TxError::UnknownIdent { ident: k.clone() }),
        EntityRef::TempId(t) => Ok(TermEntity::Temp(t.clone())),
        EntityRef::LookupRef(a, v) => lookup_ref(db, a, v, holders).map(TermEntity::Id),
    }
}

fn lookup_ref(
    db: &Db,
    a: &vev_core::Keyword,
    v: &TxValue,
    holders: &Holders,
) -> Result<u64, TxError> {
    let form = Edn::Vector(vec![Edn::Keyword(a.clone()), v.to_edn()]);
    let Some(attr) = db.attribute(a) else {
        return Err(TxError::InvalidLookupRef {
            form,
            reason: format!("{a} is not an attribute"),
        });
    };
    if attr.unique.is_none() {
        return Err(TxError::InvalidLookupRef {
            form,
            reason: format!("attribute {a} is not :db/unique"),
        });
    }
    let value = match v {
        TxValue::Value(x) => Some(x.clone()),
        TxValue::Edn(x) if attr.is_ref() => {
            match resolve_entity(db, &EntityRef::from_edn(x)?, holders)? {
                TermEntity::Id(id) => Some(Value::Ref(id)),
                TermEntity::Temp(_) => None,
            }
        }
        TxValue::Edn(x) => coerce(db, attr, x),
        _ => None,
    };
    let Some(value) = value else {
        return Err(TxError::InvalidLookupRef {
            form,
            reason: format!(
                "the value does not have {a}'s type :db.type/{}",
                attr.value_type.name()
            ),
        });
    };
    holders
        .get(db, attr.id, &value)
        .ok_or_else(|| TxError::UnresolvedLookupRef {
            attribute: a.clone(),
            value: v.to_edn(),
        })
}

/// The entity holding `value` for unique attribute `a` in db's current view.
pub(crate) fn lookup_unique(db: &Db, a: u64, value: &Value) -> Option<u64> {
    db.holder_of(a, value)
}

/// The holders in db-before of the unique values a stage of the transactor will ask about,
/// looked up together (`Db::holders_of`): a transaction of many new entities would otherwise
/// descend AVET from the root once per identity, twice (upsert, then the uniqueness check).
/// The default holds no keys: every question is looked up when asked.
#[derive(Default)]
pub(crate) struct Holders {
    keys: Vec<(u64, Value)>,
    found: Vec<Option<u64>>,
}

impl Holders {
    /// Look up these `(attribute, value)` keys (any order, repeats allowed).
    pub(crate) fn prefetch(db: &Db, keys: impl Iterator<Item = (u64, Value)>) -> Holders {
        let mut keys: Vec<(u64, Value)> = keys.collect();
        keys.sort_unstable();
        keys.dedup();
        let found = db.holders_of(&keys);
        Holders { keys, found }
    }

    /// `lookup_unique(db, a, value)`: from the prefetched keys, else looked up now.
    pub(crate) fn get(&self, db: &Db, a: u64, value: &Value) -> Option<u64> {
        match self
            .keys
            .binary_search_by(|(ka, kv)| ka.cmp(&a).then_with(|| kv.cmp(value)))
        {
            Ok(i) => self.found[i],
            Err(_) => lookup_unique(db, a, value),
        }
    }
}

/// The `(attribute, value)` key of the lookup ref `[a v]` when `a` is a unique non-ref
/// attribute and `v` has its type: what `lookup_ref` will look up.
fn lookup_key(db: &Db, a: &vev_core::Keyword, v: &TxValue) -> Option<(u64, Value)> {
    match v {
        TxValue::Value(x) => unique_attr(db, a).map(|attr| (attr.id, x.clone())),
        TxValue::Edn(x) => lookup_key_edn(db, a, x),
        _ => None,
    }
}

/// `lookup_key` for the lookup ref `[a x]` written in EDN.
fn lookup_key_edn(db: &Db, a: &vev_core::Keyword, x: &Edn) -> Option<(u64, Value)> {
    let attr = unique_attr(db, a)?;
    Some((attr.id, coerce(db, attr, x)?))
}

fn unique_attr<'a>(db: &'a Db, a: &vev_core::Keyword) -> Option<&'a Attribute> {
    db.attribute(a)
        .map(|attr| &**attr)
        .filter(|attr| attr.unique.is_some() && !attr.is_ref())
}

/// The keys of the lookup refs in `op` (as an entity, or as a value of a ref attribute),
/// for `Holders::prefetch`. Only a prefetch: a lookup ref it misses (inside a
/// transaction function's result, say) is looked up when the expander meets it.
fn lookup_keys_of_op(db: &Db, op: &TxOp, out: &mut Vec<(u64, Value)>) {
    let entity = |r: &EntityRef, out: &mut Vec<(u64, Value)>| {
        if let EntityRef::LookupRef(a, v) = r {
            out.extend(lookup_key(db, a, v));
        }
    };
    match op {
        TxOp::Add { e, a, v } | TxOp::Retract { e, a, v: Some(v) } => {
            entity(e, out);
            if let AttrRef::Ident(k) = a {
                lookup_keys_of_value(db, k, v, out);
            }
        }
        TxOp::Retract { e, .. } | TxOp::RetractEntity { e } | TxOp::Cas { e, .. } => {
            entity(e, out);
        }
        TxOp::Map(m) => lookup_keys_of_map(db, m, out),
        TxOp::Call { .. } => {}
    }
}

fn lookup_keys_of_map(db: &Db, m: &TxMap, out: &mut Vec<(u64, Value)>) {
    if let Some(EntityRef::LookupRef(a, v)) = &m.id {
        out.extend(lookup_key(db, a, v));
    }
    for (k, v) in &m.attrs {
        if !k.is_reverse() {
            lookup_keys_of_value(db, k, v, out);
        }
    }
}

/// The lookup refs among the values `v` of attribute `a` when it is a ref attribute.
fn lookup_keys_of_value(db: &Db, a: &vev_core::Keyword, v: &TxValue, out: &mut Vec<(u64, Value)>) {
    // A scalar names no lookup ref, whatever the attribute: it is not looked up (a COPY's
    // values are all scalars).
    let scalar = match v {
        TxValue::Entity(r) => !matches!(r, EntityRef::LookupRef(..)),
        TxValue::Edn(x) => !matches!(x, Edn::Vector(_) | Edn::List(_) | Edn::Set(_)),
        TxValue::Value(_) => true,
        TxValue::Map(_) | TxValue::Many(_) => false,
    };
    if scalar || !db.attribute(a).is_some_and(|a| a.is_ref()) {
        return;
    }
    let edn_ref = |x: &Edn, out: &mut Vec<(u64, Value)>| match x {
        Edn::Vector(items) | Edn::List(items) => {
            if let [Edn::Keyword(k), x] = items.as_slice() {
                out.extend(lookup_key_edn(db, k, x));
            }
        }
        _ => {}
    };
    match v {
        TxValue::Entity(r) => {
            if let EntityRef::LookupRef(k, x) = r {
                out.extend(lookup_key(db, k, x));
            }
        }
        TxValue::Map(m) => lookup_keys_of_map(db, m, out),
        TxValue::Many(items) => {
            for item in items {
                lookup_keys_of_value(db, a, item, out);
            }
        }
        TxValue::Edn(x @ (Edn::Vector(items) | Edn::List(items))) => {
            // One lookup ref, or a collection of values each of which may be one.
            edn_ref(x, out);
            for item in items {
                edn_ref(item, out);
            }
        }
        TxValue::Edn(Edn::Set(items)) => items.iter().for_each(|x| edn_ref(x, out)),
        TxValue::Edn(_) | TxValue::Value(_) => {}
    }
}

/// Interpret an EDN form as a value of a non-ref attribute's type.
pub(crate) fn coerce(db: &Db, a: &Attribute, x: &Edn) -> Option<Value> {
    match (a.value_type, &a.tuple) {
        (ValueType::Tuple, Some(TupleSpec::Composite(parts))) => {
            let types: Option<Vec<ValueType>> = parts
                .iter()
                .map(|p| db.schema().attribute(*p).map(|x| x.value_type))
                .collect();
            coerce_tuple(&TupleSpec::Heterogeneous(types?), x)
        }
        (ValueType::Tuple, Some(spec)) => coerce_tuple(spec, x),
        (ValueType::Tuple, None) => None,
        (t, _) => coerce_scalar(t, x),
    }
}

pub(crate) fn coerce_scalar(t: ValueType, x: &Edn) -> Option<Value> {
    Some(match (t, x) {
        (ValueType::Keyword, Edn::Keyword(k)) => Value::Keyword(k.clone()),
        (ValueType::String, Edn::String(s)) => Value::String(s.as_str().into()),
        (ValueType::Boolean, Edn::Bool(b)) => Value::Boolean(*b),
        (ValueType::Long, Edn::Integer(n)) => Value::Long(*n),
        (ValueType::BigInt, Edn::BigInt(n)) => Value::BigInt(Arc::new((**n).clone())),
        (ValueType::BigInt, Edn::Integer(n)) => Value::BigInt(Arc::new((*n).into())),
        (ValueType::Double, Edn::Float(d)) => Value::Double(*d),
        (ValueType::Float, Edn::Float(d)) => Value::Float(*d as f32),
        (ValueType::BigDec, Edn::BigDec(d)) => Value::BigDec(Arc::new((**d).clone())),
        (ValueType::Instant, Edn::Inst(ms)) => Value::Instant(*ms),
        (ValueType::Uuid, Edn::Uuid(u)) => Value::Uuid(u.to_be_bytes()),
        (ValueType::Uri, Edn::String(s)) => Value::Uri(Arc::from(s.as_str())),
        (ValueType::Uri, Edn::Tagged(tag, inner)) if tag.as_str() == "uri" => {
            Value::Uri(Arc::from(inner.as_str()?))
        }
        (ValueType::Bytes, Edn::Tagged(tag, inner)) if tag.as_str() == "bytes" => {
            Value::Bytes(Arc::from(hex_decode(inner.as_str()?)?))
        }
        (ValueType::Symbol, Edn::Symbol(s)) => Value::Symbol(s.clone()),
        _ => return None,
    })
}

fn coerce_tuple(spec: &TupleSpec, x: &Edn) -> Option<Value> {
    let items = match x {
        Edn::Vector(items) | Edn::List(items) => items,
        _ => return None,
    };
    if !(2..=8).contains(&items.len()) {
        return None;
    }
    let out: Option<Vec<Value>> = match spec {
        TupleSpec::Homogeneous(t) => items.iter().map(|i| element(*t, i)).collect(),
        TupleSpec::Heterogeneous(ts) if ts.len() == items.len() => {
            ts.iter().zip(items).map(|(t, i)| element(*t, i)).collect()
        }
        _ => None,
    };
    out.map(|v| Value::Tuple(Arc::from(v)))
}

fn element(t: ValueType, x: &Edn) -> Option<Value> {
    match (t, x) {
        (_, Edn::Nil) => Some(Value::Nil),
        (ValueType::Ref, Edn::Integer(n)) if *n > 0 => Some(Value::Ref(*n as u64)),
        _ => coerce_scalar(t, x),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ops(text: &str) -> Vec<TxOp> {
        vev_core::parse_tx(text)
            .unwrap()
            .into_iter()
            .map(|s| s.op)
            .collect()
    }

    fn schema_db() -> Db {
        let ctx = crate::TxContext {
            functions: &NoFunctions,
            now_ms: 1_000,
            speculative: false,
        };
        let schema = ops(
            "[{:db/ident :name :db/valueType :db.type/string :db/cardinality :db.cardinality/one}
              {:db/ident :key :db/valueType :db.type/long :db/cardinality :db.cardinality/one
               :db/unique :db.unique/identity}
              {:db/ident :part :db/valueType :db.type/ref :db/cardinality :db.cardinality/many
               :db/isComponent true}
              {:db/ident :friend :db/valueType :db.type/ref :db/cardinality :db.cardinality/one}]",
        );
        crate::transact(&Db::empty(), &schema, &ctx)
            .unwrap()
            .db_after
    }

    /// Maps `from..to`: some under string tempids, some without an id (internal tempids),
    /// with nested component maps (more internal tempids), reverse and forward refs to
    /// other maps' tempids in both halves, and a lookup ref to an existing entity.
    fn maps(from: usize, to: usize, bad_at: Option<usize>) -> String {
        let forms: Vec<String> = (from..to)
            .map(|i| {
                let id = if i % 3 == 0 { String::new() } else { format!(":db/id \"m{i}\"") };
                let name = if Some(i) == bad_at { "42".to_string() } else { format!("\"n{i}\"") };
                let friend = format!("\"m{}\"", ((i * 7919 + 1) % to) | 1);
                format!(
                    "{{{id} :name {name} :key {i} :friend {friend} :part [{{:name \"p{i}\"}}] :_friend [:key 0]}}"
                )
            })
            .collect();
        format!("[{}]", forms.join(" "))
    }

    fn dump<'a>(terms: impl IntoIterator<Item = &'a Term>) -> Vec<String> {
        terms.into_iter().map(|t| format!("{t:?}")).collect()
    }

    /// A transaction large enough to be expanded in two halves on two threads gives the
    /// terms one pass gives, internal tempids numbered alike.
    #[test]
    fn two_halves_expand_as_one_pass() {
        let db = schema_db();
        let db = crate::transact(
            &db,
            &ops("[{:key 0 :name \"zero\"}]"),
            &crate::TxContext {
                functions: &NoFunctions,
                now_ms: 2_000,
                speculative: false,
            },
        )
        .unwrap()
        .db_after;
        let ops = ops(&maps(1, EXPAND_SPLIT_MIN + 500, None));
        assert!(estimated_terms(&ops) >= EXPAND_SPLIT_MIN);
        let halves = expand(&db, &ops, &NoFunctions).unwrap();
        let (one_pass, internal) = expand_all(&db, &NoFunctions, &ops).unwrap();
        assert!(
            internal > ops.len() as u64,
            "nested maps use internal tempids"
        );
        let (halves, one_pass) = (dump(halves.iter()), dump(&one_pass));
        assert_eq!(halves.len(), one_pass.len());
        let differ = halves.iter().zip(&one_pass).position(|(a, b)| a != b);
        assert_eq!(differ.map(|i| (&halves[i], &one_pass[i])), None);
    }

    /// An error in the second half is the error one pass reports (its entity named by the
    /// internal tempid one pass gives it).
    #[test]
    fn an_error_in_the_second_half_is_the_one_pass_error() {
        let db = schema_db();
        let n = EXPAND_SPLIT_MIN + 500;
        // Map n - 2 has no :db/id when n - 2 is a multiple of 3: pick the last such map.
        let bad = (1..n).rev().find(|i| i % 3 == 0).unwrap();
        let ops = ops(&maps(1, n, Some(bad)).replace(":_friend [:key 0]", ""));
        let err = expand(&db, &ops, &NoFunctions).unwrap_err();
        let one_pass = expand_all(&db, &NoFunctions, &ops).unwrap_err();
        assert_eq!(err.to_string(), one_pass.to_string());
        assert!(err.to_string().contains("#tempid"), "{err}");
    }
}
