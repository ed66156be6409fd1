//! Bounded summaries of many values, fed keyed hashes (see [`crate::values`]):
//! how many distinct values (HyperLogLog), and which are the most common
//! (Space-Saving). Both are estimates, with the error said where they are shown.

/// Distinct values: counted exactly up to [`Distinct::EXACT`] (the hashes kept, so
/// low cardinalities, the ones that matter, are exact and the same from run to
/// run), then by HyperLogLog with 2^8 registers: 256 bytes, a standard error of
/// about 6.5% (1.04 / sqrt(256)).
#[derive(Debug, Clone)]
pub struct Distinct {
    exact: Option<Vec<u64>>,
    registers: Box<[u8; 256]>,
}

impl Default for Distinct {
    fn default() -> Self {
        Distinct { exact: Some(Vec::new()), registers: Box::new([0; 256]) }
    }
}

impl Distinct {
    /// The estimate's standard error past [`Distinct::EXACT`] values, as a share.
    pub const ERROR: f64 = 0.065;
    /// Distinct values counted exactly.
    pub const EXACT: usize = 128;

    /// Counts one value by its 64-bit hash.
    pub fn add(&mut self, hash: u64) {
        if let Some(seen) = &mut self.exact {
            if let Err(at) = seen.binary_search(&hash) {
                if seen.len() < Self::EXACT {
                    seen.insert(at, hash);
                } else {
                    self.exact = None;
                }
            }
        }
        let i = (hash >> 56) as usize;
        let rank = ((hash << 8) | 0x80).leading_zeros() as u8 + 1;
        if rank > self.registers[i] {
            self.registers[i] = rank;
        }
    }

    /// The estimated number of distinct values (linear counting while registers are
    /// empty, as HyperLogLog's small-range correction).
    pub fn estimate(&self) -> u64 {
        if let Some(seen) = &self.exact {
            return seen.len() as u64;
        }
        let m = 256.0;
        let zeros = self.registers.iter().filter(|r| **r == 0).count() as f64;
        let sum: f64 = self.registers.iter().map(|r| 2f64.powi(-i32::from(*r))).sum();
        let raw = 0.7213 / (1.0 + 1.079 / m) * m * m / sum;
        let e = if raw <= 2.5 * m && zeros > 0.0 { m * (m / zeros).ln() } else { raw };
        e.round() as u64
    }
}

/// The most common values (Space-Saving with `N` entries): a value's count is at
/// most `over` too high; values past the table's size share its last places.
#[derive(Debug, Clone, Default)]
pub struct TopK<const N: usize> {
    entries: Vec<(u64, u64, u64)>,
    /// Values counted in all.
    pub total: u64,
}

impl<const N: usize> TopK<N> {
    /// Counts one value by its hash.
    pub fn add(&mut self, hash: u64) {
        self.total += 1;
        if let Some(e) = self.entries.iter_mut().find(|e| e.0 == hash) {
            e.1 += 1;
        } else if self.entries.len() < N {
            self.entries.push((hash, 1, 0));
        } else if let Some(min) = self.entries.iter_mut().min_by_key(|e| e.1) {
            *min = (hash, min.1 + 1, min.1);
        }
    }

    /// The most common value's count, at least (a count less what it may have
    /// inherited from the values it replaced): exact while there are at most `N`
    /// distinct values, and never inflated by many rare ones.
    pub fn top(&self) -> u64 {
        self.entries.iter().map(|e| e.1 - e.2).max().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SplitMix64: a fixed, well-mixed hash of a counter.
    fn h(i: u64) -> u64 {
        let mut z = i.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    #[test]
    fn distinct_counts_within_the_error() {
        for n in [10u64, 200, 5_000, 100_000] {
            let mut d = Distinct::default();
            let hashes: Vec<u64> = (0..n).map(h).collect();
            for x in hashes.iter().chain(hashes.iter()) {
                d.add(*x);
            }
            let e = d.estimate() as f64;
            if n <= Distinct::EXACT as u64 {
                assert_eq!(e as u64, n, "exact while few");
            }
            assert!((e - n as f64).abs() <= n as f64 * 4.0 * Distinct::ERROR + 2.0, "{n}: {e}");
        }
    }

    #[test]
    fn the_most_common_value_is_found_among_many() {
        let mut t: TopK<8> = TopK::default();
        for i in 0..10_000u64 {
            t.add(if i % 4 == 0 { 7 } else { i });
        }
        assert_eq!(t.total, 10_000);
        let top = t.top();
        assert!((2_500 - 10_000 / 8..=2_501).contains(&top), "{top}");
        let mut unique: TopK<8> = TopK::default();
        (0..1_000).for_each(|i| unique.add(i));
        assert_eq!(unique.top(), 1, "unique values have no common one");
    }
}
