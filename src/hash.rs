//! The mixing function seeds and fingerprints are derived with, and the builder of a stage's
//! parameters' key. The bottom layer: it imports nothing of the crate.

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
