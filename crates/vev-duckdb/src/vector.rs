//! The unsafe part: typed writes into DuckDB's output vectors. A vector's physical type is
//! read once per chunk (`Slots::of`), and every write checks it and the row against the
//! vector's capacity, so a buffer is never written as a type DuckDB did not allocate, nor
//! past its end.

use duckdb::core::{FlatVector, LogicalTypeId};
use duckdb::ffi::duckdb_hugeint;

use crate::error::{ExtError, Result};

/// A vector's physical storage, as far as these writers care.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Physical {
    I64,
    F64,
    Bool,
    I128,
    /// Strings and blobs (written through DuckDB's own calls), or a type not written here.
    Other,
}

/// The data buffer of one output vector, for typed writes.
pub struct Slots {
    physical: Physical,
    ptr: *mut u8,
    cap: usize,
}

impl Slots {
    /// The buffer of `v`. `v` must outlive every write through the result: the buffer is
    /// DuckDB's, valid while the chunk is (`table::Table::func` makes both per chunk).
    pub fn of(v: &FlatVector<'_>) -> Slots {
        let ty = v.logical_type();
        let physical = match ty.id() {
            LogicalTypeId::Bigint | LogicalTypeId::Timestamp => Physical::I64,
            LogicalTypeId::Double => Physical::F64,
            LogicalTypeId::Boolean => Physical::Bool,
            LogicalTypeId::Uuid | LogicalTypeId::Hugeint => Physical::I128,
            LogicalTypeId::Decimal if ty.decimal_width() > 18 => Physical::I128,
            LogicalTypeId::Decimal if ty.decimal_width() > 9 => Physical::I64,
            _ => Physical::Other,
        };
        // SAFETY: only the pointer is taken here; writes check the physical type and the row.
        let ptr = unsafe { v.as_mut_ptr::<u8>() };
        Slots {
            physical,
            ptr,
            cap: v.capacity(),
        }
    }

    fn put<T>(&mut self, want: Physical, row: usize, x: T) -> Result<()> {
        if self.physical != want || row >= self.cap || self.ptr.is_null() {
            return Err(ExtError::new(
                "duckdb/internal",
                format!(
                    "row {row} of a {:?} vector of {} rows written as {want:?}",
                    self.physical, self.cap
                ),
            ));
        }
        // SAFETY: the buffer holds `cap` values of the physical type `want` names (checked
        // above, with `T` the Rust type of that physical type at each call site), `row` is
        // below `cap`, and nothing else reads or writes the buffer during the scan callback.
        unsafe { self.ptr.cast::<T>().add(row).write(x) };
        Ok(())
    }

    /// Write a BIGINT, TIMESTAMP or DECIMAL(10..=18) value.
    pub fn i64(&mut self, row: usize, x: i64) -> Result<()> {
        self.put(Physical::I64, row, x)
    }

    /// Write a DOUBLE.
    pub fn f64(&mut self, row: usize, x: f64) -> Result<()> {
        self.put(Physical::F64, row, x)
    }

    /// Write a BOOLEAN.
    pub fn bool(&mut self, row: usize, x: bool) -> Result<()> {
        self.put(Physical::Bool, row, x)
    }

    /// Write a 128-bit value (UUID, HUGEINT, DECIMAL(19..=38)).
    pub fn i128(&mut self, row: usize, x: i128) -> Result<()> {
        let h = duckdb_hugeint {
            lower: x as u64,
            upper: (x >> 64) as i64,
        };
        self.put(Physical::I128, row, h)
    }
}
