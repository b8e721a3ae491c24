//! Several hubs on one store share each subscription: every hub runs a worker for it, and
//! together they keep to the subscription's `max_in_flight` and to the rate its sink granted
//! (`WebHook-Allowed-Rate`), not each of them on its own; and a pause a sink asked one of
//! them for (`Retry-After`) holds for all, told through the store at once
//! ([`Cluster::pause_sink`]) and read back every second. Each hub says it is alive through
//! the store every second ([`Cluster::hubs_alive`]) and learns which hubs are; by its place
//! among them it takes its share ([`Share`]). A hub that stops says so; one that is killed
//! is forgotten after [`SILENT_FOR`], and the others take its share.
//!
//! [`Cluster::hubs_alive`]: knooppunt_store::Cluster::hubs_alive
//! [`Cluster::pause_sink`]: knooppunt_store::Cluster::pause_sink

use std::time::Duration;

/// How often a hub says it is alive.
pub(crate) const SAY_ALIVE_EVERY: Duration = Duration::from_secs(1);

/// A hub not heard of for this long is forgotten: its share goes to the others.
pub(crate) const SILENT_FOR: Duration = Duration::from_secs(5);

/// This hub's place among the hubs alive: its rank in their ids' order, and how many.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Share {
    pub(crate) rank: usize,
    pub(crate) hubs: usize,
}

impl Default for Share {
    /// Alone (as on the embedded store).
    fn default() -> Self {
        Share { rank: 0, hubs: 1 }
    }
}

impl Share {
    /// This hub's place in `alive` (its id among them), alone if it is not listed.
    pub(crate) fn of(alive: &[String], me: &str) -> Share {
        match alive.iter().position(|id| id == me) {
            Some(rank) => Share {
                rank,
                hubs: alive.len(),
            },
            None => Share::default(),
        }
    }

    /// This hub's slots of an unordered subscription's `max`: an equal part, and one more
    /// for each of the first `max % hubs` hubs, so that the hubs' slots add up to `max`.
    /// None when there are more hubs than slots and this one is not among the first.
    pub(crate) fn slots(self, max: usize) -> usize {
        max / self.hubs + usize::from(self.rank < max % self.hubs)
    }

    /// How many hubs send a subscription's deliveries, each at this part of its granted
    /// rate: all of them for an ordered one (any hub may take its next delivery), those with
    /// slots for an unordered one.
    pub(crate) fn senders(self, max: usize, ordered: bool) -> usize {
        if ordered {
            self.hubs
        } else {
            self.hubs.min(max.max(1))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn share(rank: usize, hubs: usize) -> Share {
        Share { rank, hubs }
    }

    #[test]
    fn the_slots_of_all_hubs_add_up_to_the_subscriptions() {
        for hubs in 1..6 {
            for max in 1..20 {
                let all: usize = (0..hubs).map(|rank| share(rank, hubs).slots(max)).sum();
                assert_eq!(all, max, "{max} slots over {hubs} hubs");
                let with_slots = (0..hubs).filter(|&r| share(r, hubs).slots(max) > 0).count();
                assert_eq!(with_slots, share(0, hubs).senders(max, false));
            }
        }
        assert_eq!(share(0, 2).slots(1), 1);
        assert_eq!(share(1, 2).slots(1), 0, "one slot: one hub sends");
        assert_eq!(share(0, 3).slots(16), 6);
        assert_eq!(share(2, 3).slots(16), 5);
    }

    #[test]
    fn every_hub_paces_an_ordered_subscription() {
        assert_eq!(share(1, 3).senders(1, true), 3);
        assert_eq!(share(1, 3).senders(1, false), 1);
        assert_eq!(share(1, 3).senders(16, false), 3);
    }

    #[test]
    fn a_hub_finds_its_place_by_its_id() {
        let alive = ["a".to_owned(), "b".to_owned(), "c".to_owned()];
        assert_eq!(Share::of(&alive, "b"), share(1, 3));
        assert_eq!(Share::of(&alive, "z"), share(0, 1), "not listed: alone");
    }
}
