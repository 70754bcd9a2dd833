//! `ExactSum`: the sum of many numbers, rounded once, so that it does not depend on the order
//! they come in.
//!
//! A query's `sum` and `avg` see their values in whatever order the plan produces rows: the
//! general path in its relation's order, the star aggregate in entity order over two threads.
//! Adding doubles left to right rounds after every step, so two plans (or a naive and an
//! optimized one) could answer in different last bits. Here longs and entity ids add up
//! exactly in an `i128`, and doubles are kept as a short list of non-overlapping partial sums
//! (Shewchuk's algorithm, as in Python's `math.fsum`), so the total is exact until `value`
//! rounds it to the nearest double (ties to even). Infinities and NaN follow IEEE arithmetic;
//! an intermediate sum of finite doubles that overflows makes the result infinite.

use smallvec::SmallVec;

/// An exactly kept sum of longs and doubles.
#[derive(Clone, Debug, Default)]
pub(crate) struct ExactSum {
    longs: i128,
    /// Non-overlapping partial sums of the finite doubles, by increasing magnitude.
    partials: SmallVec<[f64; 4]>,
    /// The sum of the non-finite doubles (and of overflowed partials); 0 when there are none.
    special: f64,
}

impl ExactSum {
    /// Add an integer (a long or an entity id) exactly.
    #[inline]
    pub(crate) fn add_int(&mut self, x: i128) {
        self.longs += x;
    }

    /// Add a double exactly.
    pub(crate) fn add_f64(&mut self, x: f64) {
        if !x.is_finite() {
            self.special += x;
            return;
        }
        let mut x = x;
        let mut kept = 0;
        for j in 0..self.partials.len() {
            let mut y = self.partials[j];
            if x.abs() < y.abs() {
                std::mem::swap(&mut x, &mut y);
            }
            let hi = x + y;
            if !hi.is_finite() {
                // Finite values whose sum overflows: the total is as infinite as naive
                // addition would make it.
                self.special += hi;
                self.partials.clear();
                return;
            }
            let lo = y - (hi - x);
            if lo != 0.0 {
                self.partials[kept] = lo;
                kept += 1;
            }
            x = hi;
        }
        self.partials.truncate(kept);
        self.partials.push(x);
    }

    /// Add everything `other` holds.
    pub(crate) fn merge(&mut self, other: &ExactSum) {
        self.longs += other.longs;
        self.special += other.special;
        for &x in &other.partials {
            self.add_f64(x);
        }
    }

    /// The sum of the integers added (exact; the doubles are not in it).
    pub(crate) fn integer(&self) -> i128 {
        self.longs
    }

    /// The exact sum, rounded to the nearest double.
    pub(crate) fn value(&self) -> f64 {
        let mut all = self.clone();
        // The integer part joins the partials exactly: each step takes the nearest double
        // and keeps the (smaller, exact in i128) rest.
        let mut rest = self.longs;
        while rest != 0 {
            let part = rest as f64;
            all.add_f64(part);
            rest -= part as i128;
        }
        // `special` is 0 or an infinity or NaN, which the finite part cannot change.
        if !all.special.is_finite() {
            return all.special;
        }
        let p = &all.partials;
        let Some(&top) = p.last() else {
            return 0.0;
        };
        // Add from the largest down until a rounding error shows; then correct a tie that the
        // next partial breaks (Python's msum does the same).
        let mut n = p.len() - 1;
        let mut hi = top;
        let mut lo = 0.0;
        while n > 0 {
            let x = hi;
            let y = p[n - 1];
            n -= 1;
            hi = x + y;
            lo = y - (hi - x);
            if lo != 0.0 {
                break;
            }
        }
        if n > 0 && ((lo < 0.0 && p[n - 1] < 0.0) || (lo > 0.0 && p[n - 1] > 0.0)) {
            let y = lo * 2.0;
            let x = hi + y;
            if y == x - hi {
                hi = x;
            }
        }
        hi
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sum_of(xs: &[f64]) -> f64 {
        let mut s = ExactSum::default();
        for &x in xs {
            s.add_f64(x);
        }
        s.value()
    }

    #[test]
    fn cancellation_that_left_to_right_addition_loses() {
        let big = 2f64.powi(53);
        assert_eq!(sum_of(&[big, 1.0, -big, 1.0]), 2.0);
        assert_eq!([big, 1.0, -big, 1.0].iter().sum::<f64>(), 1.0);
        assert_eq!(sum_of(&[0.1; 10]), 1.0);
        assert_eq!(sum_of(&[1e308, 1e308, -1e308]), f64::INFINITY);
        assert_eq!(sum_of(&[]), 0.0);
        assert!(sum_of(&[f64::INFINITY, f64::NEG_INFINITY]).is_nan());
        assert_eq!(sum_of(&[f64::INFINITY, 1.0]), f64::INFINITY);
    }

    #[test]
    fn longs_add_exactly_with_doubles() {
        let mut s = ExactSum::default();
        s.add_int(i64::MAX.into());
        s.add_int(i64::MAX.into());
        s.add_f64(0.5);
        s.add_int((-i64::MAX).into());
        s.add_int((-i64::MAX).into());
        assert_eq!(s.value(), 0.5);
        let mut s = ExactSum::default();
        s.add_int((1 << 53) + 1);
        s.add_f64(1.0);
        assert_eq!(s.value(), ((1i64 << 53) + 2) as f64);
    }

    /// Values `k × 2^-s`: their exact sum is an integer count of 2^-40, which an `i128` holds
    /// and `as f64` rounds correctly (ties to even), the reference here.
    fn scaled() -> impl Strategy<Value = (i64, u32)> {
        (-(1i64 << 52)..(1i64 << 52), 0u32..=40)
    }

    proptest! {
        #[test]
        fn the_sum_is_the_exact_sum_rounded_once_in_any_order(
            xs in proptest::collection::vec(scaled(), 0..60),
            longs in proptest::collection::vec(-(1i64 << 62)..(1i64 << 62), 0..5),
            seed in any::<u64>(),
        ) {
            let exact: i128 = xs.iter().map(|&(k, s)| i128::from(k) << (40 - s)).sum::<i128>()
                + longs.iter().map(|&l| i128::from(l) << 40).sum::<i128>();
            let want = exact as f64 / 2f64.powi(40);
            let values: Vec<f64> = xs.iter().map(|&(k, s)| k as f64 / 2f64.powi(s as i32)).collect();
            let mut order: Vec<usize> = (0..values.len()).collect();
            // A permutation from the seed.
            let mut r = seed | 1;
            for i in (1..order.len()).rev() {
                r ^= r << 13; r ^= r >> 7; r ^= r << 17;
                order.swap(i, (r % (i as u64 + 1)) as usize);
            }
            for pass in [false, true] {
                let mut s = ExactSum::default();
                for &l in &longs {
                    s.add_int(l.into());
                }
                for k in 0..values.len() {
                    s.add_f64(values[if pass { order[k] } else { k }]);
                }
                prop_assert_eq!(s.value().to_bits(), want.to_bits(), "pass {}", pass);
            }
        }
    }
}
