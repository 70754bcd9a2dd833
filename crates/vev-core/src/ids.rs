//! Entity ids, partitions and basis-t.
//!
//! An entity id is 64 bits: the partition in bits 42 and up, a counter below, as in Datomic.
//! Partition 0 holds the system entities (built-in attributes and idents), partition 3 the
//! transaction entities (`tx id = tx partition | t`), partition 4 every user entity.

/// A 64-bit entity id.
pub type EntityId = u64;
/// The basis of a database: the number of transactions applied since the empty database.
pub type BasisT = u64;

/// How far the partition is shifted left in an entity id: the low 42 bits are the counter
/// within the partition.
pub const PARTITION_SHIFT: u32 = 42;
/// The db partition: the system entities (built-in attributes and idents, `schema::sys`).
pub const PART_DB: u64 = 0;
/// The tx partition: one entity per transaction, whose counter is its basis-t (`tx_id`).
pub const PART_TX: u64 = 3;
/// The user partition: every entity a transaction creates from a tempid.
pub const PART_USER: u64 = 4;

/// The entity id of the transaction with basis `t`.
pub const fn tx_id(t: BasisT) -> EntityId {
    (PART_TX << PARTITION_SHIFT) | t
}

/// The basis `t` of a transaction entity id, or of a plain `t` (ids below the tx partition are
/// taken to be `t` already, as Datomic's `as-of` accepts either).
pub const fn t_of(id: EntityId) -> BasisT {
    if partition(id) == PART_TX {
        id & ((1 << PARTITION_SHIFT) - 1)
    } else {
        id
    }
}

/// The partition of entity id `id` (`PART_DB`, `PART_TX` or `PART_USER` for ids Vev
/// allocates).
pub const fn partition(id: EntityId) -> u64 {
    id >> PARTITION_SHIFT
}

/// The entity id in the user partition whose counter is `n` (`n` is below 2^42, or it would
/// spill into the partition bits).
pub const fn user_id(n: u64) -> EntityId {
    (PART_USER << PARTITION_SHIFT) | n
}

/// Whether `id` is in the tx partition, i.e. names a transaction entity.
pub const fn is_tx_id(id: EntityId) -> bool {
    partition(id) == PART_TX
}
