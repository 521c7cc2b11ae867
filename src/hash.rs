//! The mixing function seeds and fingerprints are derived with, the builder of a stage's
//! parameters' key, and a seeded permutation computed one position at a time. The bottom layer: it imports nothing of the crate.

/// SplitMix64's finaliser: a cheap, well-mixed hash of a 64-bit value, used to derive seeds.
pub(crate) fn mix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A stage's parameters as one number for the recipe's fingerprint ([`Dataset::keyed`]):
/// every parameter that decides which elements come out, or in what order, goes in, each as
/// a word of its own (so no two parameters' values can cancel out).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Key(u64);

impl Key {
    pub(crate) fn new() -> Self {
        Key(0x5EED_F1A9)
    }

    pub(crate) fn word(self, word: u64) -> Self {
        Key(mix64(self.0 ^ mix64(word)))
    }

    pub(crate) fn bytes(self, bytes: &[u8]) -> Self {
        bytes
            .chunks(8)
            .fold(self.word(bytes.len() as u64), |key, chunk| {
                let mut word = [0u8; 8];
                word[..chunk.len()].copy_from_slice(chunk);
                key.word(u64::from_le_bytes(word))
            })
    }

    pub(crate) fn finish(self) -> u64 {
        self.0
    }
}

/// A permutation of `0..n` keyed by a seed, computed one position at a time: a 4-round
/// Feistel network over the smallest even power of two at least `n`, applied again while
/// the value is out of range (cycle walking: a bijection of `0..n`, and at most about four
/// rounds of the network per value on average as the domain is under 4n).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Permutation {
    n: u64,
    half: u32,
    key: u64,
}

impl Permutation {
    pub(crate) fn new(n: u64, key: u64) -> Self {
        let bits = (64 - n.saturating_sub(1).leading_zeros()).max(2);
        Permutation {
            n,
            half: bits.div_ceil(2),
            key,
        }
    }

    /// The value at position `k` (`k` itself past the end).
    pub(crate) fn at(&self, k: u64) -> u64 {
        if k >= self.n {
            return k;
        }
        let mut x = k;
        loop {
            x = self.round_trip(x);
            if x < self.n {
                return x;
            }
        }
    }

    fn round_trip(&self, x: u64) -> u64 {
        let mask = (1u64 << self.half) - 1;
        let (mut left, mut right) = (x >> self.half, x & mask);
        for round in 0..4u64 {
            let f = mix64(self.key ^ round.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ right) & mask;
            (left, right) = (right, left ^ f);
        }
        (left << self.half) | right
    }
}

#[cfg(test)]
mod tests {
    use super::Permutation;

    #[test]
    fn the_permutation_is_a_bijection_for_every_small_size() {
        for n in 0..300u64 {
            for key in [0, 1, 0xDEAD_BEEF] {
                let p = Permutation::new(n, key);
                let mut seen: Vec<u64> = (0..n).map(|k| p.at(k)).collect();
                seen.sort_unstable();
                assert_eq!(seen, (0..n).collect::<Vec<_>>(), "n = {n}, key = {key}");
            }
        }
        let (a, b) = (Permutation::new(1000, 1), Permutation::new(1000, 2));
        let differ = (0..1000).filter(|&k| a.at(k) != b.at(k)).count();
        assert!(
            differ > 900,
            "keys give different orders ({differ} of 1000 differ)"
        );
        let fixed = (0..1000).filter(|&k| a.at(k) == k).count();
        assert!(
            fixed < 20,
            "not close to the identity ({fixed} fixed points)"
        );
    }
}
