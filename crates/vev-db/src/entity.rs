//! Entities: an entity's attributes as a map, with forward and reverse navigation.
//!
//! Every accessor reads the indexes, which may load segments, so each returns a `Result`:
//! a segment that fails to load is an error, never a missing value.

use std::collections::BTreeMap;

use vev_core::{Component, EntityId, IndexOrder, Keyword, StorageError, Value};

use crate::db::Db;

/// A lazy view of one entity in one database value.
#[derive(Clone)]
pub struct Entity {
    db: Db,
    id: EntityId,
}

impl Entity {
    pub(crate) fn new(db: Db, id: EntityId) -> Entity {
        Entity { db, id }
    }

    /// The entity id.
    pub fn id(&self) -> EntityId {
        self.id
    }

    /// The database value (with its view) this entity's attributes are read from.
    pub fn db(&self) -> &Db {
        &self.db
    }

    /// The values of attribute `attr` (empty when it has none or is unknown).
    pub fn get_all(&self, attr: &Keyword) -> Result<Vec<Value>, StorageError> {
        match self.db.entid(attr) {
            Some(a) => self.db.values(self.id, a),
            None => Ok(Vec::new()),
        }
    }

    /// The value of a cardinality-one attribute (the first value of a cardinality-many one).
    pub fn get(&self, attr: &Keyword) -> Result<Option<Value>, StorageError> {
        Ok(self.get_all(attr)?.into_iter().next())
    }

    /// The entity a ref attribute points at.
    pub fn get_ref(&self, attr: &Keyword) -> Result<Option<Entity>, StorageError> {
        Ok(self
            .get(attr)?
            .and_then(|v| v.as_ref())
            .map(|e| Entity::new(self.db.clone(), e)))
    }

    /// The entities that point at this one through ref attribute `attr` (`:person/_friend`
    /// navigation).
    pub fn reverse(&self, attr: &Keyword) -> Result<Vec<EntityId>, StorageError> {
        let Some(a) = self.db.entid(attr) else {
            return Ok(Vec::new());
        };
        self.db
            .datoms(
                IndexOrder::Vaet,
                &[Component::Value(Value::Ref(self.id)), Component::Entity(a)],
            )
            .map(|d| d.map(|d| d.e))
            .collect()
    }

    /// Every attribute of the entity with its values, by ident.
    pub fn attrs(&self) -> Result<BTreeMap<Keyword, Vec<Value>>, StorageError> {
        let mut out: BTreeMap<Keyword, Vec<Value>> = BTreeMap::new();
        for d in self
            .db
            .datoms(IndexOrder::Eavt, &[Component::Entity(self.id)])
        {
            let d = d?;
            let key = match self.db.ident(d.a) {
                Some(k) => k.clone(),
                None => Keyword::new(&d.a.to_string()),
            };
            out.entry(key).or_default().push(d.v);
        }
        Ok(out)
    }

    /// True when the entity has no datoms in this view.
    pub fn is_empty(&self) -> Result<bool, StorageError> {
        match self
            .db
            .datoms(IndexOrder::Eavt, &[Component::Entity(self.id)])
            .next()
        {
            None => Ok(true),
            Some(d) => d.map(|_| false),
        }
    }
}

impl Db {
    /// The entity with this id (it may have no attributes).
    pub fn entity(&self, e: EntityId) -> Entity {
        Entity::new(self.clone(), e)
    }
}
