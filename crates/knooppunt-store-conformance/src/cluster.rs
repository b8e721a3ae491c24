//! [`knooppunt_store::Cluster`]: hubs alive, and sinks' pauses.

use super::*;

/// [`knooppunt_store::Cluster`]: hubs alive, and sinks' pauses.
pub async fn cluster(backend: &mut impl Backend) {
    hubs_alive_are_listed_until_silent_or_gone(backend).await;
    sink_pauses_hold_the_longest_until_they_end(backend).await;
}

/// Hubs said alive are listed in id order until they leave or stay silent too long.
async fn hubs_alive_are_listed_until_silent_or_gone(backend: &mut impl Backend) {
    let store = backend.open().await;
    let minute = 60_000;
    assert_eq!(store.hubs_alive("hub-b", minute).await.unwrap(), ["hub-b"]);
    assert_eq!(
        store.hubs_alive("hub-a", minute).await.unwrap(),
        ["hub-a", "hub-b"],
        "in id order"
    );
    assert_eq!(
        store.hubs_alive("hub-c", minute).await.unwrap(),
        ["hub-a", "hub-b", "hub-c"]
    );
    store.hub_leaves("hub-b").await.unwrap();
    store.hub_leaves("hub-x").await.unwrap();
    assert_eq!(
        store.hubs_alive("hub-a", minute).await.unwrap(),
        ["hub-a", "hub-c"],
        "one that left is not listed"
    );
    // Silent for longer than the limit: forgotten; the one asking is always alive.
    // (Blocking the test's thread is fine: nothing runs meanwhile.)
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(store.hubs_alive("hub-c", 200).await.unwrap(), ["hub-c"]);
    assert_eq!(
        store.hubs_alive("hub-a", minute).await.unwrap(),
        ["hub-a", "hub-c"],
        "said alive again, listed again"
    );
}

/// A sink's pause is kept until it ends; a shorter one never shortens it.
async fn sink_pauses_hold_the_longest_until_they_end(backend: &mut impl Backend) {
    let store = backend.open().await;
    let (a, b) = ("https://a.example.nl:443", "https://b.example.nl:443");
    let now = knooppunt_store::now_ms();
    assert_eq!(store.sinks_paused(now).await.unwrap(), []);
    store.pause_sink(b, now + 60_000).await.unwrap();
    store.pause_sink(a, now + 30_000).await.unwrap();
    store.pause_sink(b, now + 10_000).await.unwrap();
    store.pause_sink(a, now + 40_000).await.unwrap();
    assert_eq!(
        store.sinks_paused(now).await.unwrap(),
        [(a.to_owned(), now + 40_000), (b.to_owned(), now + 60_000)],
        "the longest pause of each, in the order of their names"
    );
    assert_eq!(
        store.sinks_paused(now + 40_000).await.unwrap(),
        [(b.to_owned(), now + 60_000)],
        "an ended pause is not listed"
    );
    assert_eq!(store.sinks_paused(now + 60_000).await.unwrap(), []);
}
