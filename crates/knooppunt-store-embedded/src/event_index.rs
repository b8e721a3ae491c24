//! Where each retained event is in the log, in acceptance order.
//!
//! Events are filed in the order of their sequence numbers and forgotten oldest first (whole
//! segments), so a deque sorted by sequence number serves: appending and forgetting at its
//! ends, finding one by binary search, 56 bytes an event. The deque is kept in chunks of a
//! fixed size: it never doubles (a vector of a million entries would reserve, and copy
//! into, room for two million the moment one more arrived), and forgetting gives whole
//! chunks back.

use std::collections::VecDeque;

use super::dedupe::Identity;
use super::event_log::Location;

#[derive(Debug, Clone, Copy)]
pub(super) struct Indexed {
    pub(super) location: Location,
    pub(super) accepted_at: u64,
    /// The duplicate-detection hash of its `source` and `id`.
    pub(super) hash: Identity,
    /// Its own size (`queues::event_bytes`), which each of its pending deliveries adds
    /// to its subscription's backlog.
    pub(super) bytes: u32,
}

/// Entries a chunk holds (229 KB).
const CHUNK: usize = 4096;

type Entry = (u64, Indexed);

#[derive(Debug, Default)]
pub(super) struct EventIndex {
    /// `(seq, indexed)`, sorted by `seq` across the chunks; no chunk is empty.
    chunks: VecDeque<Vec<Entry>>,
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
    pub(super) fn insert(&mut self, seq: u64, indexed: Indexed) {
        let in_order = self
            .chunks
            .back()
            .and_then(|chunk| chunk.last())
            .is_none_or(|(last, _)| *last < seq);
        if in_order {
            match self.chunks.back_mut() {
                Some(last) if last.len() < CHUNK => last.push((seq, indexed)),
                _ => {
                    let mut chunk = Vec::with_capacity(CHUNK);
                    chunk.push((seq, indexed));
                    self.chunks.push_back(chunk);
                }
            }
            return;
        }
        // Not expected: in its place, replacing an entry with that number (the chunk may
        // grow past its size; it is not split).
        let at = self
            .chunks
            .partition_point(|chunk| chunk.last().is_some_and(|(s, _)| *s < seq))
            .min(self.chunks.len() - 1);
        let chunk = &mut self.chunks[at];
        match chunk.binary_search_by_key(&seq, |(s, _)| *s) {
            Ok(found) => chunk[found] = (seq, indexed),
            Err(place) => chunk.insert(place, (seq, indexed)),
        }
    }

    /// Where the first entry numbered `seq` or above is: (chunk, place in it); past the
    /// end, `(chunks, 0)`.
    fn position(&self, seq: u64) -> (usize, usize) {
        let chunk = self
            .chunks
            .partition_point(|chunk| chunk.last().is_some_and(|(s, _)| *s < seq));
        match self.chunks.get(chunk) {
            Some(entries) => (chunk, entries.partition_point(|(s, _)| *s < seq)),
            None => (chunk, 0),
        }
    }

    pub(super) fn get(&self, seq: u64) -> Option<&Indexed> {
        let (chunk, at) = self.position(seq);
        let (found, indexed) = self.chunks.get(chunk)?.get(at)?;
        (*found == seq).then_some(indexed)
    }

    /// The events numbered `first..next`, in order.
    pub(super) fn range(&self, first: u64, next: u64) -> impl DoubleEndedIterator<Item = &Entry> {
        let (from_chunk, from) = self.position(first);
        let (to_chunk, to) = self.position(next.max(first));
        let end_chunk = (to_chunk + 1).min(self.chunks.len()).max(from_chunk);
        (from_chunk..end_chunk).flat_map(move |index| {
            let chunk = &self.chunks[index];
            let start = if index == from_chunk { from } else { 0 };
            let end = if index == to_chunk { to } else { chunk.len() };
            chunk[start.min(end)..end].iter()
        })
    }

    /// The events numbered above `seq`, in order.
    pub(super) fn after(&self, seq: u64) -> impl Iterator<Item = &Entry> {
        self.range(seq.saturating_add(1), u64::MAX)
    }

    /// Removes the events numbered `first..next` and returns them.
    pub(super) fn remove_range(&mut self, first: u64, next: u64) -> Vec<Entry> {
        let removed: Vec<Entry> = self.range(first, next).copied().collect();
        if removed.is_empty() {
            return removed;
        }
        for chunk in &mut self.chunks {
            chunk.retain(|(s, _)| *s < first || *s >= next);
        }
        self.chunks.retain(|chunk| !chunk.is_empty());
        removed
    }

    /// A number at or before the first event accepted at or after `at`: acceptance times are
    /// nearly in number order (appends take their time before they are numbered), so a
    /// minute of slack is searched before it.
    pub(super) fn seq_before(&self, at: u64) -> u64 {
        let early = |indexed: &Indexed| indexed.accepted_at.saturating_add(60_000) < at;
        let chunk = self
            .chunks
            .partition_point(|chunk| chunk.last().is_some_and(|(_, i)| early(i)));
        let before = match self.chunks.get(chunk) {
            Some(entries) => match entries.partition_point(|(_, i)| early(i)) {
                0 => chunk
                    .checked_sub(1)
                    .and_then(|c| self.chunks[c].last())
                    .map(|(s, _)| *s),
                at => Some(entries[at - 1].0),
            },
            None => self
                .chunks
                .back()
                .and_then(|entries| entries.last())
                .map(|(s, _)| *s),
        };
        before.unwrap_or_else(|| {
            self.chunks
                .front()
                .and_then(|entries| entries.first())
                .map_or(0, |(seq, _)| seq.saturating_sub(1))
        })
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.chunks.iter().map(Vec::len).sum()
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

    /// Across chunks, the index answers as a sorted map would: appends, a few out of
    /// order, ranges both ways, forgetting the oldest and some in the middle, `seq_before`.
    #[test]
    fn across_chunks_it_answers_as_a_sorted_map() {
        let mut index = EventIndex::default();
        let mut model = std::collections::BTreeMap::new();
        let mut state = 7u64;
        let mut random = |below: u64| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (state >> 33) % below
        };
        for seq in (1..=3 * CHUNK as u64 + 17).map(|n| n * 2) {
            index.insert(seq, indexed(seq * 10));
            model.insert(seq, seq * 10);
        }
        for _ in 0..50 {
            let seq = random(6 * CHUNK as u64 + 40) | 1;
            index.insert(seq, indexed(seq * 10));
            model.insert(seq, seq * 10);
        }
        let check = |index: &EventIndex, model: &std::collections::BTreeMap<u64, u64>| {
            assert_eq!(index.len(), model.len());
            let all: Vec<u64> = index.range(0, u64::MAX).map(|(s, _)| *s).collect();
            assert_eq!(all, model.keys().copied().collect::<Vec<_>>());
        };
        check(&index, &model);
        for _ in 0..200 {
            let first = random(6 * CHUNK as u64 + 60);
            let next = first + random(3 * CHUNK as u64);
            let want: Vec<u64> = model.range(first..next).map(|(s, _)| *s).collect();
            let got: Vec<u64> = index.range(first, next).map(|(s, _)| *s).collect();
            assert_eq!(got, want, "{first}..{next}");
            let back: Vec<u64> = index.range(first, next).rev().map(|(s, _)| *s).collect();
            assert_eq!(back, want.iter().rev().copied().collect::<Vec<_>>());
            assert_eq!(
                index.after(first).next().map(|(s, _)| *s),
                model.range(first + 1..).next().map(|(s, _)| *s)
            );
            assert_eq!(
                index.get(first).map(|i| i.accepted_at),
                model.get(&first).copied()
            );
            // accepted_at is seq * 10: the last event more than a minute before `at`.
            let at = first * 10 + 60_000;
            let before = model.range(..first).next_back().map(|(s, _)| *s);
            let front = model.keys().next().map_or(0, |s| s - 1);
            assert_eq!(index.seq_before(at), before.unwrap_or(front), "{at}");
        }
        let oldest: Vec<u64> = model.keys().take(CHUNK + 5).copied().collect();
        let cut = oldest[CHUNK + 4] + 1;
        let removed: Vec<u64> = index.remove_range(0, cut).iter().map(|(s, _)| *s).collect();
        assert_eq!(removed, oldest);
        model.retain(|s, _| *s >= cut);
        check(&index, &model);
        let (a, b) = (cut + 100, cut + 2 * CHUNK as u64);
        index.remove_range(a, b);
        model.retain(|s, _| *s < a || *s >= b);
        check(&index, &model);
    }
}
