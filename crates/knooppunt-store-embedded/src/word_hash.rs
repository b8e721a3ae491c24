//! The hasher of maps keyed by one 64-bit word the hub made itself (a sequence number, a
//! keyed random identity hash): a multiply spreads it well enough, where SipHash costs
//! more than the rest of a lookup. Not for keys a caller chooses.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A map keyed by such a word.
pub(crate) type WordMap<K, V> = HashMap<K, V, BuildHasherDefault<WordBits>>;

#[derive(Debug, Default)]
pub(crate) struct WordBits(u64);

/// 2^64 divided by the golden ratio, odd: distinct words keep distinct low bits.
const SPREAD: u64 = 0x9E37_79B9_7F4A_7C15;

impl Hasher for WordBits {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(byte)).wrapping_mul(SPREAD);
        }
    }

    fn write_u64(&mut self, word: u64) {
        self.0 = (self.0 ^ word).wrapping_mul(SPREAD);
    }
}
