//! A query result's tuples as one flat table: every cell in one vector, row after row, so a
//! result of a million rows is one allocation rather than a million.

use std::ops::Index;

use vev_edn::Edn;

/// Tuples of one width, stored row after row in one vector. A row is a slice of `width`
/// cells; `rows[i]` is the `i`th.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Rows {
    width: usize,
    len: usize,
    cells: Vec<Edn>,
}

impl Rows {
    /// No rows yet, each to have `width` cells.
    pub fn new(width: usize) -> Rows {
        Rows {
            width,
            len: 0,
            cells: Vec::new(),
        }
    }

    /// No rows yet, with room for `rows` of them.
    pub fn with_capacity(width: usize, rows: usize) -> Rows {
        Rows {
            width,
            len: 0,
            cells: Vec::with_capacity(width * rows),
        }
    }

    /// Rows from a vector of tuples, or `None` when one has a width other than `width`.
    pub fn from_vecs(width: usize, rows: Vec<Vec<Edn>>) -> Option<Rows> {
        let mut out = Rows::with_capacity(width, rows.len());
        for row in rows {
            if row.len() != width {
                return None;
            }
            out.cells.extend(row);
            out.len += 1;
        }
        Some(out)
    }

    /// Add one row. `cells` must give exactly `width` values (checked in debug builds).
    pub(crate) fn push(&mut self, cells: impl IntoIterator<Item = Edn>) {
        let before = self.cells.len();
        self.cells.extend(cells);
        debug_assert_eq!(self.cells.len() - before, self.width);
        self.len += 1;
    }

    /// Add `len` rows, whose `n` cells (`len × width`) `fill` pushes in row order.
    pub(crate) fn extend_flat(&mut self, len: usize, n: usize, fill: impl FnOnce(&mut Vec<Edn>)) {
        let before = self.cells.len();
        self.cells.reserve(n);
        fill(&mut self.cells);
        debug_assert_eq!(self.cells.len() - before, len * self.width);
        self.len += len;
    }

    /// The number of rows.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are no rows.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The number of cells in each row.
    pub fn width(&self) -> usize {
        self.width
    }

    /// The `i`th row, if there is one.
    pub fn get(&self, i: usize) -> Option<&[Edn]> {
        (i < self.len).then(|| &self.cells[i * self.width..(i + 1) * self.width])
    }

    /// The rows in order.
    pub fn iter(&self) -> Iter<'_> {
        Iter {
            rows: self,
            next: 0,
        }
    }

    /// Every cell, row after row.
    pub fn cells(&self) -> &[Edn] {
        &self.cells
    }

    /// The cells, row after row, by value.
    pub fn into_cells(mut self) -> Vec<Edn> {
        std::mem::take(&mut self.cells)
    }

    /// The rows as one vector per row.
    pub fn into_vecs(mut self) -> Vec<Vec<Edn>> {
        let mut out = Vec::with_capacity(self.len);
        let mut cells = std::mem::take(&mut self.cells).into_iter();
        for _ in 0..self.len {
            out.push(cells.by_ref().take(self.width).collect());
        }
        out
    }

    /// The rows as one vector per row, copied.
    pub fn to_vecs(&self) -> Vec<Vec<Edn>> {
        self.iter().map(<[Edn]>::to_vec).collect()
    }
}

/// Integers (entity ids among them, the most common cells) own nothing: they are moved out
/// and forgotten, which spares a call per cell to drop them; the rest are dropped.
impl Drop for Rows {
    fn drop(&mut self) {
        for cell in self.cells.drain(..) {
            match cell {
                Edn::Integer(_) => std::mem::forget(cell),
                other => drop(other),
            }
        }
    }
}

/// The rows of a [`Rows`], in order, as slices.
#[derive(Clone, Debug)]
pub struct Iter<'a> {
    rows: &'a Rows,
    next: usize,
}

impl<'a> Iterator for Iter<'a> {
    type Item = &'a [Edn];

    fn next(&mut self) -> Option<&'a [Edn]> {
        let row = self.rows.get(self.next)?;
        self.next += 1;
        Some(row)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.rows.len - self.next;
        (left, Some(left))
    }
}

impl ExactSizeIterator for Iter<'_> {}

impl<'a> IntoIterator for &'a Rows {
    type Item = &'a [Edn];
    type IntoIter = Iter<'a>;

    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

impl Index<usize> for Rows {
    type Output = [Edn];

    /// The `i`th row; panics when there is none (as a slice index does).
    fn index(&self, i: usize) -> &[Edn] {
        assert!(i < self.len, "row {i} of a result of {} rows", self.len);
        &self.cells[i * self.width..(i + 1) * self.width]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn int(i: i64) -> Edn {
        Edn::Integer(i)
    }

    #[test]
    fn rows_round_trip_through_vectors() {
        let vecs = vec![
            vec![int(1), int(2)],
            vec![int(3), int(4)],
            vec![int(5), int(6)],
        ];
        let rows = Rows::from_vecs(2, vecs.clone()).unwrap();
        assert_eq!(rows.len(), 3);
        assert_eq!(rows.width(), 2);
        assert_eq!(&rows[1], &[int(3), int(4)][..]);
        assert_eq!(rows.get(2), Some(&[int(5), int(6)][..]));
        assert_eq!(rows.get(3), None);
        assert_eq!(rows.iter().len(), 3);
        let mut seen = 0;
        for (i, row) in (&rows).into_iter().enumerate() {
            assert_eq!(row, &vecs[i][..]);
            seen += 1;
        }
        assert_eq!(seen, 3);
        assert_eq!(rows.to_vecs(), vecs);
        assert_eq!(rows.into_vecs(), vecs);
    }

    #[test]
    fn a_row_of_another_width_is_refused() {
        assert_eq!(
            Rows::from_vecs(2, vec![vec![int(1), int(2)], vec![int(3)]]),
            None
        );
    }

    #[test]
    fn rows_of_no_cells_keep_their_count() {
        let mut rows = Rows::new(0);
        rows.push([]);
        rows.push([]);
        assert_eq!(rows.len(), 2);
        assert_eq!(rows.iter().count(), 2);
        assert_eq!(rows.get(1), Some(&[][..]));
        assert_eq!(rows.into_vecs(), vec![Vec::<Edn>::new(), Vec::new()]);
    }

    #[test]
    fn flat_rows_append_after_pushed_ones() {
        let mut rows = Rows::new(2);
        rows.push([int(1), int(2)]);
        rows.extend_flat(2, 4, |cells| cells.extend([int(3), int(4), int(5), int(6)]));
        assert_eq!(rows.len(), 3);
        assert_eq!(rows.cells().len(), 6);
        assert_eq!(&rows[2], &[int(5), int(6)][..]);
    }
}
