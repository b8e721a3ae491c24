//! Duplicate detection: which `source` + `id` pairs were accepted, when, and under which
//! sequence number. It lives under the committer's intake lock, so a publisher checks and
//! claims an event's identity in the same moment it is numbered, without touching the
//! delivery queues; it is rebuilt from the log at open.

use std::collections::HashMap;
use std::hash::{BuildHasher, BuildHasherDefault, Hasher, RandomState};

/// Two SipHash keys drawn at random per process: 128 bits make an accidental collision (which
/// would wrongly report an event as a duplicate) vanishingly unlikely, and random keys keep
/// publishers from choosing colliding ids.
#[derive(Debug, Default)]
pub(super) struct DedupeHasher(RandomState, RandomState);

impl DedupeHasher {
    pub(super) fn hash(&self, source: &str, id: &str) -> u128 {
        let half = |state: &RandomState| {
            let mut hasher = state.build_hasher();
            hasher.write(source.as_bytes());
            hasher.write_u8(0);
            hasher.write(id.as_bytes());
            hasher.finish()
        };
        (u128::from(half(&self.0)) << 64) | u128::from(half(&self.1))
    }
}

/// The map's own hasher: its keys are already keyed random hashes, so their low bits serve
/// as they are.
#[derive(Debug, Default)]
struct KeyBits(u64);

impl Hasher for KeyBits {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.0 ^= u64::from_le_bytes(word);
        }
    }

    fn write_u128(&mut self, key: u128) {
        self.0 = key as u64;
    }
}

/// The accepted events' identities: dedupe hash → (sequence number, accepted at).
#[derive(Debug, Default)]
pub(super) struct Dedupe {
    accepted: HashMap<u128, (u64, u64), BuildHasherDefault<KeyBits>>,
}

impl Dedupe {
    /// The sequence number of the event with this hash if it was accepted less than `window`
    /// milliseconds before `now`.
    pub(super) fn earlier(&self, hash: u128, now: u64, window: u64) -> Option<u64> {
        let (seq, accepted_at) = *self.accepted.get(&hash)?;
        (now.saturating_sub(accepted_at) < window).then_some(seq)
    }

    /// Records an accepted event (a later one with the same hash replaces it).
    pub(super) fn insert(&mut self, hash: u128, seq: u64, accepted_at: u64) {
        self.accepted.insert(hash, (seq, accepted_at));
    }

    /// Forgets the event `seq` under `hash`, unless a later event holds the hash now; returns
    /// whether an entry was removed.
    pub(super) fn forget(&mut self, hash: u128, seq: u64) -> bool {
        if self
            .accepted
            .get(&hash)
            .is_some_and(|(held, _)| *held == seq)
        {
            self.accepted.remove(&hash);
            true
        } else {
            false
        }
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.accepted.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_identity_is_a_duplicate_only_within_the_window() {
        let hasher = DedupeHasher::default();
        let mut dedupe = Dedupe::default();
        let hash = hasher.hash("urn:nld:oin:1:systeem:a", "1");
        assert_ne!(hash, hasher.hash("urn:nld:oin:1:systeem:a1", ""));
        dedupe.insert(hash, 7, 1000);
        assert_eq!(dedupe.earlier(hash, 1500, 1000), Some(7));
        assert_eq!(
            dedupe.earlier(hash, 2000, 1000),
            None,
            "the window has passed"
        );
        assert_eq!(dedupe.earlier(hash ^ 1, 1500, 1000), None);

        dedupe.insert(hash, 9, 2500);
        assert!(!dedupe.forget(hash, 7), "a later event holds the hash");
        assert_eq!(dedupe.earlier(hash, 2600, 1000), Some(9));
        assert!(dedupe.forget(hash, 9));
        assert_eq!(dedupe.len(), 0);
    }
}
