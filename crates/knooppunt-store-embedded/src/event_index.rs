//! Where each retained event is in the log, in acceptance order.
//!
//! Events are filed in the order of their sequence numbers and forgotten oldest first (whole
//! segments), so a deque sorted by sequence number serves: appending and forgetting at its
//! ends, finding one by binary search, 56 bytes an event.

use std::collections::VecDeque;

use super::dedupe::Identity;
use super::event_log::Location;

#[derive(Debug, Clone, Copy)]
pub(super) struct Indexed {
    pub(super) location: Location,
    pub(super) accepted_at: u64,
    /// The duplicate-detection hash of its `source` and `id`.
    pub(super) hash: Identity,
    /// Its own size (`committer::event_bytes`), which each of its pending deliveries adds
    /// to its subscription's backlog.
    pub(super) bytes: u32,
}

#[derive(Debug, Default)]
pub(super) struct EventIndex {
    /// `(seq, indexed)`, sorted by `seq`.
    entries: VecDeque<(u64, Indexed)>,
}

/// Puts `(seq, value)` into a deque sorted by sequence number: at the end, where numbers
/// arrive in order, else (not expected) in its place, replacing an entry with that number.
pub(super) fn insert_by_seq<T>(entries: &mut VecDeque<(u64, T)>, seq: u64, value: T) {
    match entries.back() {
        Some((last, _)) if *last >= seq => {
            let at = entries.partition_point(|(s, _)| *s < seq);
            if entries.get(at).is_some_and(|(s, _)| *s == seq) {
                entries[at] = (seq, value);
            } else {
                entries.insert(at, (seq, value));
            }
        }
        _ => entries.push_back((seq, value)),
    }
}

impl EventIndex {
    pub(super) fn reserve(&mut self, events: usize) {
        self.entries.reserve_exact(events);
    }

    pub(super) fn insert(&mut self, seq: u64, indexed: Indexed) {
        insert_by_seq(&mut self.entries, seq, indexed);
    }

    pub(super) fn get(&self, seq: u64) -> Option<&Indexed> {
        let at = self.entries.binary_search_by_key(&seq, |(s, _)| *s).ok()?;
        Some(&self.entries[at].1)
    }

    /// The events numbered `first..next`, in order.
    pub(super) fn range(
        &self,
        first: u64,
        next: u64,
    ) -> impl DoubleEndedIterator<Item = &(u64, Indexed)> {
        let start = self.entries.partition_point(|(s, _)| *s < first);
        let end = self.entries.partition_point(|(s, _)| *s < next).max(start);
        self.entries.range(start..end)
    }

    /// The events numbered above `seq`, in order.
    pub(super) fn after(&self, seq: u64) -> impl Iterator<Item = &(u64, Indexed)> {
        let start = self.entries.partition_point(|(s, _)| *s <= seq);
        self.entries.range(start..)
    }

    /// Removes the events numbered `first..next` and returns them.
    pub(super) fn remove_range(&mut self, first: u64, next: u64) -> Vec<(u64, Indexed)> {
        let start = self.entries.partition_point(|(s, _)| *s < first);
        let end = self.entries.partition_point(|(s, _)| *s < next).max(start);
        self.entries.drain(start..end).collect()
    }

    /// A number at or before the first event accepted at or after `at`: acceptance times are
    /// nearly in number order (appends take their time before they are numbered), so a
    /// minute of slack is searched before it.
    pub(super) fn seq_before(&self, at: u64) -> u64 {
        let at = self
            .entries
            .partition_point(|(_, indexed)| indexed.accepted_at.saturating_add(60_000) < at);
        match at.checked_sub(1) {
            Some(before) => self.entries[before].0,
            None => self
                .entries
                .front()
                .map_or(0, |(seq, _)| seq.saturating_sub(1)),
        }
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.entries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What every event the hub holds costs in the index (issue 41: memory per pending
    /// delivery at most 120 bytes after a restart, of which this is most).
    #[test]
    fn an_entry_is_56_bytes() {
        assert_eq!(std::mem::size_of::<(u64, Indexed)>(), 56);
    }

    fn indexed(accepted_at: u64) -> Indexed {
        Indexed {
            location: Location {
                segment: 1,
                offset: 0,
                len: 10,
            },
            accepted_at,
            bytes: 10,
            hash: Identity::of_test(accepted_at),
        }
    }

    #[test]
    fn finds_ranges_and_forgets_the_oldest() {
        let mut index = EventIndex::default();
        for seq in [1, 3, 4, 7] {
            index.insert(seq, indexed(seq * 10));
        }
        index.insert(2, indexed(20));
        assert_eq!(index.get(3).map(|i| i.accepted_at), Some(30));
        assert!(index.get(5).is_none());
        let seqs =
            |it: &mut dyn Iterator<Item = &(u64, Indexed)>| it.map(|(s, _)| *s).collect::<Vec<_>>();
        assert_eq!(seqs(&mut index.range(2, 7)), [2, 3, 4]);
        assert_eq!(seqs(&mut index.range(5, 7)), Vec::<u64>::new());
        assert_eq!(seqs(&mut index.after(3)), [4, 7]);
        let removed = index.remove_range(0, 4);
        assert_eq!(
            removed.iter().map(|(s, _)| *s).collect::<Vec<_>>(),
            [1, 2, 3]
        );
        assert_eq!(index.len(), 2);
    }
}
