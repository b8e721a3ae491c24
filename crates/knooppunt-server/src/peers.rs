//! The connections being served, for two decisions of the accept loop: a peer (an IP
//! address) may hold at most `max_connections_per_peer` of them, and when every slot is
//! taken, the connection that has waited longest without a whole request being answered is
//! closed to make room (an idle kept-alive connection, or one whose request's headers or
//! body are still arriving), so that clients that hold sockets open, or send requests
//! slowly, cannot keep others out.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

/// Nanoseconds since the first call: when a connection became idle, kept in an atomic, so
/// that answering a request takes no lock.
fn now_nanos() -> u64 {
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

use tokio::sync::Notify;

/// One connection: its requests in flight, since when it has had none, and how to close it.
///
/// A connection is *busy* only while a whole request of it (headers and body) is being
/// answered. One that is idle, or has sent only part of a request (headers or body still
/// arriving), can give its slot up: an idle one after what it was sent is written, an
/// unfinished one at once, its request dropped (nothing of it was answered).
#[derive(Debug)]
pub(crate) struct Connection {
    in_flight: AtomicUsize,
    /// Of those in flight, how many are still receiving their body.
    receiving: AtomicUsize,
    /// Bytes of a request arrived, and its headers are not complete yet.
    partial: AtomicBool,
    /// A request of it has started: it is no longer fresh.
    served: AtomicBool,
    /// When its task first ran ([`now_nanos`]), [`UNSEEN`] until then.
    seen_at: AtomicU64,
    idle_since: AtomicU64,
    /// Told once, when the hub needs its slot: it closes once its requests are answered.
    pub(crate) close: Notify,
    closing: AtomicBool,
}

/// [`Connection::seen_at`] of a connection whose task has not run yet.
const UNSEEN: u64 = u64::MAX;

impl Connection {
    /// Its task runs: from now on what the client sent is read.
    pub(crate) fn seen(&self) {
        self.seen_at.store(now_nanos(), Ordering::SeqCst);
    }

    /// A request started (its headers are complete); `with_body` if a body is to come, in
    /// which case [`Connection::body_received`] follows.
    pub(crate) fn request_started(&self, with_body: bool) {
        if with_body {
            self.receiving.fetch_add(1, Ordering::SeqCst);
        }
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        self.partial.store(false, Ordering::SeqCst);
        if !self.served.load(Ordering::Relaxed) {
            self.served.store(true, Ordering::Relaxed);
        }
    }

    /// A request's body has ended (read whole, failed or dropped).
    pub(crate) fn body_received(&self) {
        self.receiving.fetch_sub(1, Ordering::SeqCst);
    }

    /// A request was answered.
    pub(crate) fn request_answered(&self) {
        if self.in_flight.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.idle_since.store(now_nanos(), Ordering::SeqCst);
        }
    }

    /// Bytes arrived from the client.
    pub(crate) fn bytes_read(&self) {
        if self.in_flight.load(Ordering::Relaxed) == 0 && !self.partial.load(Ordering::Relaxed) {
            self.partial.store(true, Ordering::SeqCst);
        }
    }

    /// No whole request is being answered.
    fn evictable(&self) -> bool {
        self.in_flight.load(Ordering::SeqCst) == self.receiving.load(Ordering::SeqCst)
    }

    /// Whether the connection, told to close, may be dropped at once: part of a request
    /// arrived and no whole one is being answered (so nothing is being written to it).
    pub(crate) fn unfinished(&self) -> bool {
        self.evictable()
            && (self.partial.load(Ordering::SeqCst) || self.receiving.load(Ordering::SeqCst) > 0)
    }

    fn idle_since(&self) -> Option<u64> {
        if !self.evictable() || self.closing.load(Ordering::SeqCst) {
            return None;
        }
        // A connection is never closed before its task has read what the client sent: under
        // a flood of connections, one whose task has not run yet would otherwise be the
        // oldest, and closed, with its whole request waiting unread in the socket (the
        // scheduler, not the client, decides when that task runs, so this cannot be used to
        // hold a slot). A fresh one nothing was read from then gets a moment more for its
        // first request to arrive.
        let seen_at = self.seen_at.load(Ordering::SeqCst);
        if seen_at == UNSEEN {
            return None;
        }
        let fresh = !self.served.load(Ordering::Relaxed) && !self.unfinished();
        if fresh && now_nanos().saturating_sub(seen_at) < FRESH_GRACE_NANOS {
            return None;
        }
        Some(self.idle_since.load(Ordering::SeqCst))
    }

    /// Which evictable connections go first: unfinished requests (0), then the others
    /// (1, idle after a request or fresh), oldest first within each. A fresh connection's
    /// first request may only be waiting to be read; an unfinished one is being sent
    /// slowly.
    fn eviction_rank(&self) -> u8 {
        u8::from(!self.unfinished())
    }
}

/// How long a fresh connection is not closed to make room once its task runs: 50 ms.
const FRESH_GRACE_NANOS: u64 = 50_000_000;

#[derive(Debug, Default)]
struct Table {
    next: u64,
    connections: HashMap<u64, (IpAddr, Arc<Connection>)>,
    per_peer: HashMap<IpAddr, usize>,
}

/// Every connection served, by peer.
#[derive(Debug, Default)]
pub(crate) struct Peers {
    table: Mutex<Table>,
}

/// A connection's place in [`Peers`]; dropping it (when the connection ends, however it
/// ends) gives the place back.
#[derive(Debug)]
pub(crate) struct Admitted {
    peers: Arc<Peers>,
    id: u64,
    pub(crate) connection: Arc<Connection>,
}

impl Drop for Admitted {
    fn drop(&mut self) {
        let mut table = self.peers.table.lock().expect("peers lock");
        if let Some((peer, _)) = table.connections.remove(&self.id)
            && let Some(count) = table.per_peer.get_mut(&peer)
        {
            *count -= 1;
            if *count == 0 {
                table.per_peer.remove(&peer);
            }
        }
    }
}

impl Peers {
    /// Admits a connection of `peer` unless that peer holds `limit` already.
    pub(crate) fn admit(self: &Arc<Self>, peer: IpAddr, limit: usize) -> Option<Admitted> {
        let mut table = self.table.lock().expect("peers lock");
        let count = table.per_peer.entry(peer).or_insert(0);
        if *count >= limit {
            return None;
        }
        *count += 1;
        let now = now_nanos();
        let connection = Arc::new(Connection {
            in_flight: AtomicUsize::new(0),
            receiving: AtomicUsize::new(0),
            partial: AtomicBool::new(false),
            served: AtomicBool::new(false),
            seen_at: AtomicU64::new(UNSEEN),
            idle_since: AtomicU64::new(now),
            close: Notify::new(),
            closing: AtomicBool::new(false),
        });
        table.next += 1;
        let id = table.next;
        table
            .connections
            .insert(id, (peer, Arc::clone(&connection)));
        Some(Admitted {
            peers: Arc::clone(self),
            id,
            connection,
        })
    }

    /// Whether any connection has no request in flight (and is not closing already).
    pub(crate) fn any_idle(&self) -> bool {
        let table = self.table.lock().expect("peers lock");
        table
            .connections
            .values()
            .any(|(_, connection)| connection.idle_since().is_some())
    }

    /// Tells the connection idle for longest to close, other than `new` (the one that needs
    /// the room: it has not had the time to send its request yet); `false` when none is.
    pub(crate) fn close_longest_idle(&self, new: &Admitted) -> bool {
        let table = self.table.lock().expect("peers lock");
        let longest = table
            .connections
            .iter()
            .filter(|(id, _)| **id != new.id)
            .filter_map(|(_, (_, connection))| {
                let since = connection.idle_since()?;
                Some(((connection.eviction_rank(), since), connection))
            })
            .min_by_key(|(order, _)| *order);
        match longest {
            Some((_, connection)) => {
                connection.closing.store(true, Ordering::SeqCst);
                connection.close.notify_one();
                true
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peer_is_limited_and_its_places_come_back() {
        let peers = Arc::new(Peers::default());
        let a: IpAddr = "127.0.0.2".parse().unwrap();
        let b: IpAddr = "127.0.0.3".parse().unwrap();
        let first = peers.admit(a, 2).unwrap();
        let _second = peers.admit(a, 2).unwrap();
        assert!(peers.admit(a, 2).is_none());
        assert!(peers.admit(b, 2).is_some());
        drop(first);
        assert!(peers.admit(a, 2).is_some());
    }

    #[test]
    fn unfinished_requests_go_first_then_the_longest_idle() {
        let peers = Arc::new(Peers::default());
        let peer: IpAddr = "127.0.0.2".parse().unwrap();
        let fresh = peers.admit(peer, 10).unwrap();
        fresh.connection.seen();
        let idle = peers.admit(peer, 10).unwrap();
        idle.connection.seen();
        idle.connection.request_started(false);
        idle.connection.request_answered();
        let half = peers.admit(peer, 10).unwrap();
        half.connection.seen();
        half.connection.bytes_read();
        let new = peers.admit(peer, 10).unwrap();
        assert!(peers.close_longest_idle(&new));
        assert!(
            half.connection.closing.load(Ordering::SeqCst),
            "the unfinished one first"
        );
        assert!(peers.close_longest_idle(&new));
        assert!(idle.connection.closing.load(Ordering::SeqCst));
        assert!(
            !peers.close_longest_idle(&new),
            "a fresh connection is not closed within its grace"
        );
        std::thread::sleep(std::time::Duration::from_millis(60));
        assert!(peers.close_longest_idle(&new));
        assert!(fresh.connection.closing.load(Ordering::SeqCst));
    }

    #[test]
    fn the_longest_idle_connection_is_closed_first_and_busy_ones_never() {
        let peers = Arc::new(Peers::default());
        let peer: IpAddr = "127.0.0.2".parse().unwrap();
        let oldest = peers.admit(peer, 10).unwrap();
        let busy = peers.admit(peer, 10).unwrap();
        let newer = peers.admit(peer, 10).unwrap();
        for seen in [&oldest, &busy, &newer] {
            seen.connection.seen();
        }
        busy.connection.request_started(false);
        oldest.connection.request_started(false);
        oldest.connection.request_answered();
        // Past a fresh connection's grace.
        std::thread::sleep(std::time::Duration::from_millis(60));
        let new = peers.admit(peer, 10).unwrap();
        // `oldest` became idle last; `newer` has been idle since it was accepted.
        assert!(peers.close_longest_idle(&new));
        assert!(newer.connection.closing.load(Ordering::SeqCst));
        assert!(peers.close_longest_idle(&new));
        assert!(oldest.connection.closing.load(Ordering::SeqCst));
        assert!(
            !peers.close_longest_idle(&new),
            "the busy one is never closed, nor the one that needs the room"
        );
        assert!(!busy.connection.closing.load(Ordering::SeqCst));
        assert!(!new.connection.closing.load(Ordering::SeqCst));
    }

    #[test]
    fn a_connection_whose_task_has_not_run_is_never_closed() {
        let peers = Arc::new(Peers::default());
        let peer: IpAddr = "127.0.0.2".parse().unwrap();
        let waiting = peers.admit(peer, 10).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(60));
        let new = peers.admit(peer, 10).unwrap();
        assert!(!peers.any_idle());
        assert!(
            !peers.close_longest_idle(&new),
            "its request may be waiting unread in the socket"
        );
        waiting.connection.seen();
        assert!(
            !peers.close_longest_idle(&new),
            "once it runs, a fresh connection has its grace"
        );
        std::thread::sleep(std::time::Duration::from_millis(60));
        assert!(peers.close_longest_idle(&new));
        assert!(waiting.connection.closing.load(Ordering::SeqCst));
    }
}
