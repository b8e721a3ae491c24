//! Duplicate detection: which `source` + `id` pairs were accepted, when, and under which
//! sequence number. It lives under the committer's intake lock, so a publisher checks and
//! claims an event's identity in the same moment it is numbered, without touching the
//! delivery queues; it is rebuilt from the log at open.

use std::hash::{BuildHasher, Hash, Hasher, RandomState};

use super::word_hash::WordMap;

/// An event's identity (`source` and `id`) as a 128-bit keyed hash, in two words: what holds
/// one is aligned to 8 bytes, not 16 as a `u128` would make it (an index entry of the
/// event log is 56 bytes instead of 80).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Identity([u64; 2]);

impl Identity {
    #[cfg(test)]
    pub(super) fn of_test(n: u64) -> Identity {
        Identity([n, n])
    }
}

impl Hash for Identity {
    /// The map hashes the low word alone: it is already a keyed random hash.
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.0[1]);
    }
}

/// Two SipHash keys drawn at random per process: 128 bits make an accidental collision (which
/// would wrongly report an event as a duplicate) vanishingly unlikely, and random keys keep
/// publishers from choosing colliding ids.
#[derive(Debug, Default)]
pub(super) struct DedupeHasher(RandomState, RandomState);

impl DedupeHasher {
    pub(super) fn hash(&self, source: &str, id: &str) -> Identity {
        let half = |state: &RandomState| {
            let mut hasher = state.build_hasher();
            hasher.write(source.as_bytes());
            hasher.write_u8(0);
            hasher.write(id.as_bytes());
            hasher.finish()
        };
        Identity([half(&self.0), half(&self.1)])
    }
}

/// The accepted events' identities: dedupe hash → (sequence number, accepted at). Those
/// the log held at open are in a vector sorted by hash, with their sequence numbers alone
/// (24 bytes each, where a map takes about 70 with its free slots: a day's events are all
/// within the default window, and this is most of what each costs the hub's memory after a
/// restart; their acceptance times are in the event index, read when one matches); those
/// accepted since are in a map, which wins where both hold a hash (it is the later event).
#[derive(Debug, Default)]
pub(super) struct Dedupe {
    accepted: WordMap<Identity, (u64, u64)>,
    /// `(hash, seq)`, sorted by hash once the log is read; `seq` 0 (no event has it) marks
    /// an entry forgotten since.
    replayed: Vec<(Identity, u64)>,
    forgotten: usize,
}

/// The `seq` of a forgotten entry of `replayed`.
const FORGOTTEN: u64 = 0;

impl Dedupe {
    /// The sequence number of the event with this hash if it was accepted less than `window`
    /// milliseconds before `now`; `accepted_at` tells when an event the log held at open was
    /// (`None`: it is gone).
    pub(super) fn earlier(
        &self,
        hash: Identity,
        now: u64,
        window: u64,
        accepted_at: impl FnOnce(u64) -> Option<u64>,
    ) -> Option<u64> {
        let (seq, accepted_at) = match self.accepted.get(&hash) {
            Some(held) => *held,
            None => {
                let (_, seq) = self.replayed[self.find_replayed(hash)?];
                if seq == FORGOTTEN {
                    return None;
                }
                (seq, accepted_at(seq)?)
            }
        };
        (now.saturating_sub(accepted_at) < window).then_some(seq)
    }

    /// Records an accepted event (a later one with the same hash replaces it).
    pub(super) fn insert(&mut self, hash: Identity, seq: u64, accepted_at: u64) {
        self.accepted.insert(hash, (seq, accepted_at));
    }

    /// Records an event read back from the log at open, in the log's order; then
    /// [`Dedupe::replayed`] once the log is read.
    pub(super) fn replay(&mut self, hash: Identity, seq: u64) {
        self.replayed.push((hash, seq));
    }

    /// Room for `events` read back from the log.
    pub(super) fn reserve_replayed(&mut self, events: usize) {
        self.replayed.reserve_exact(events);
    }

    /// The log is read: sorts what it held by hash, the latest event of each hash kept.
    pub(super) fn replayed(&mut self) {
        self.replayed
            .sort_unstable_by_key(|&(hash, seq)| (hash, std::cmp::Reverse(seq)));
        self.replayed.dedup_by_key(|entry| entry.0);
    }

    fn find_replayed(&self, hash: Identity) -> Option<usize> {
        self.replayed
            .binary_search_by_key(&hash, |entry| entry.0)
            .ok()
    }

    /// Forgets the event `seq` under `hash`, unless a later event holds the hash now; returns
    /// whether an entry was removed.
    pub(super) fn forget(&mut self, hash: Identity, seq: u64) -> bool {
        if self
            .accepted
            .get(&hash)
            .is_some_and(|(held, _)| *held == seq)
        {
            self.accepted.remove(&hash);
            return true;
        }
        let Some(at) = self.find_replayed(hash) else {
            return false;
        };
        if self.replayed[at].1 != seq || seq == FORGOTTEN {
            return false;
        }
        self.replayed[at].1 = FORGOTTEN;
        self.forgotten += 1;
        // Compacted once half is forgotten: a sweep forgets the oldest events in bulk.
        if self.forgotten * 2 > self.replayed.len() {
            self.replayed.retain(|entry| entry.1 != FORGOTTEN);
            self.replayed.shrink_to_fit();
            self.forgotten = 0;
        }
        true
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.accepted.len() + self.replayed.len() - self.forgotten
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// When the events of these tests were accepted, as the event index would say.
    fn at(seq: u64) -> Option<u64> {
        Some(match seq {
            1 | 2 => 1000,
            3 => 1100,
            _ => unreachable!("only replayed events are looked up"),
        })
    }

    #[test]
    fn an_identity_is_a_duplicate_only_within_the_window() {
        let hasher = DedupeHasher::default();
        let mut dedupe = Dedupe::default();
        let hash = hasher.hash("urn:nld:oin:1:systeem:a", "1");
        assert_ne!(hash, hasher.hash("urn:nld:oin:1:systeem:a1", ""));
        dedupe.insert(hash, 7, 1000);
        assert_eq!(dedupe.earlier(hash, 1500, 1000, at), Some(7));
        assert_eq!(
            dedupe.earlier(hash, 2000, 1000, at),
            None,
            "the window has passed"
        );
        assert_eq!(dedupe.earlier(Identity::of_test(1), 1500, 1000, at), None);

        dedupe.insert(hash, 9, 2500);
        assert!(!dedupe.forget(hash, 7), "a later event holds the hash");
        assert_eq!(dedupe.earlier(hash, 2600, 1000, at), Some(9));
        assert!(dedupe.forget(hash, 9));
        assert_eq!(dedupe.len(), 0);
    }

    #[test]
    fn what_the_log_held_counts_and_what_came_since_wins() {
        let hasher = DedupeHasher::default();
        let mut dedupe = Dedupe::default();
        let (a, b) = (hasher.hash("s", "a"), hasher.hash("s", "b"));
        dedupe.replay(a, 1);
        dedupe.replay(b, 2);
        dedupe.replay(a, 3);
        dedupe.replayed();
        assert_eq!(
            dedupe.len(),
            2,
            "the later event of `a` replaced the earlier"
        );
        assert_eq!(dedupe.earlier(a, 1500, 1000, at), Some(3));
        assert_eq!(dedupe.earlier(b, 1500, 1000, at), Some(2));
        assert_eq!(
            dedupe.earlier(b, 2000, 1000, at),
            None,
            "the window has passed"
        );
        assert!(!dedupe.forget(a, 1), "a later event holds the hash");

        dedupe.insert(b, 4, 1900);
        assert_eq!(
            dedupe.earlier(b, 2000, 1000, at),
            Some(4),
            "the map's later event"
        );
        assert!(dedupe.forget(b, 2), "the replayed entry goes");
        assert_eq!(dedupe.earlier(b, 2000, 1000, at), Some(4));
        assert!(dedupe.forget(b, 4));
        assert_eq!(dedupe.earlier(b, 2000, 1000, at), None);
        assert!(dedupe.forget(a, 3));
        assert!(!dedupe.forget(a, 3), "once");
        assert_eq!(dedupe.earlier(a, 1500, 1000, at), None);
        assert_eq!(dedupe.len(), 0);
    }
}
