//! Passes that let a change wait for the work that began before it: a piece of work takes
//! a [`Pass`] from a [`Gate`] (two atomic additions, no lock), and a change that must know
//! nothing begun before it is still beginning waits for every pass taken before its call
//! ([`Gate::wait_for_earlier_passes`]). The broker's publishes use one before a grant is
//! taken away; each subscription's attempts use one at the moment they start, so that a
//! cut ([`crate::Deliverer::cut`]) has a point in time after which none starts.

use std::sync::atomic::{AtomicUsize, Ordering};

/// Passes in two epochs: work enters the current epoch; a change moves to the next and
/// waits until the previous one is empty. Work that entered the previous epoch after the
/// change saw it empty sees what the change did before it (every step is `SeqCst`).
#[derive(Debug, Default)]
pub struct Gate {
    epoch: AtomicUsize,
    active: [AtomicUsize; 2],
}

/// A pass; given back when dropped.
#[derive(Debug)]
pub struct Pass<'a> {
    gate: &'a Gate,
    epoch: usize,
}

impl Gate {
    pub fn enter(&self) -> Pass<'_> {
        let epoch = self.epoch.load(Ordering::SeqCst) & 1;
        self.active[epoch].fetch_add(1, Ordering::SeqCst);
        Pass { gate: self, epoch }
    }

    /// Waits until every pass taken before this call is given back. Callers that change
    /// the same thing must take turns (a lock of their own). Passes are held briefly, so
    /// this waits milliseconds.
    pub async fn wait_for_earlier_passes(&self) {
        let previous = self.epoch.fetch_add(1, Ordering::SeqCst) & 1;
        while self.active[previous].load(Ordering::SeqCst) != 0 {
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
    }
}

/// A subscription's cuts ([`crate::Deliverer::cut`]): how many there were, and the passes
/// of the attempts (and receives) starting now.
#[derive(Debug, Default)]
pub(crate) struct Cut {
    pub(crate) generation: std::sync::atomic::AtomicU64,
    pub(crate) gate: Gate,
    /// Cuts of one subscription take turns.
    pub(crate) turn: tokio::sync::Mutex<()>,
}

impl Cut {
    /// A pass, and whether work leased under `generation` may begin under it: only if no
    /// cut came since (what was taken away never begins after the cut). Work that must
    /// finish beginning before a cut goes on (a hand-out) keeps the pass that long.
    pub(crate) fn enter(&self, generation: u64) -> (Pass<'_>, bool) {
        let pass = self.gate.enter();
        let uncut = self.generation.load(Ordering::SeqCst) == generation;
        (pass, uncut)
    }

    /// [`Cut::enter`] for work that begins at once (an attempt's request going out).
    pub(crate) fn begins(&self, generation: u64) -> bool {
        self.enter(generation).1
    }
}

impl Drop for Pass<'_> {
    fn drop(&mut self) {
        self.gate.active[self.epoch].fetch_sub(1, Ordering::SeqCst);
    }
}
