use knooppunt_store::DeliveryQueue;
use knooppunt_store::EventLog;
use knooppunt_store::Records;
use std::sync::atomic::Ordering as AtomicOrdering;

use super::*;
use knooppunt_store::{Inspect, SinkCredential};

/// A store with these subscriptions.
async fn store_with(dir: &Path, subscriptions: &[&str], options: SledOptions) -> EmbeddedStore {
    let store = EmbeddedStore::open_with(dir, options).unwrap();
    for id in subscriptions {
        store.insert_subscription(&subscription(id)).await.unwrap();
    }
    store
}

fn subscription(id: &str) -> Subscription {
    Subscription {
        id: id.into(),
        owner: "gemeente".into(),
        label: None,
        sink: knooppunt_store::Sink::parse("http://127.0.0.1:9/sink").unwrap(),
        source: None,
        types: Some(vec!["nl.brp.x".into()]),
        filters: vec![serde_json::json!({"prefix": {"type": "nl."}})],
        protocol_settings: Default::default(),
        sink_credential: Some(SinkCredential::Plain {
            identifier: "hub".into(),
            secret: "s3cret".into(),
        }),
        config: Default::default(),
        created_at: 1,
        updated_at: 1,
        status: knooppunt_store::Status::default(),
        validation_token: None,
        signing: None,
        client_certificate: None,
    }
}

fn event(id: &str, subscriptions: &[&str]) -> NewEvent {
    NewEvent {
        source: "urn:nld:x".into(),
        id: id.into(),
        json: format!(r#"{{"specversion":"1.0","id":"{id}","source":"urn:nld:x","type":"t"}}"#),
        extension_types: None,
        subscriptions: subscriptions.iter().map(|s| (*s).to_owned()).collect(),
    }
}

const HOUR: u64 = 3_600_000;

/// Segments of one event each, so that retention can remove single events.
fn one_event_per_segment() -> SledOptions {
    SledOptions {
        segment_bytes: 1,
        ..SledOptions::default()
    }
}

/// One copy of an event serves all its deliveries (the trait asks it of every backend).
#[tokio::test]
async fn an_event_is_read_once_for_all_its_deliveries() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_with(dir.path(), &["s1", "s2"], SledOptions::default()).await;
    let appended = store
        .append_events(vec![event("1", &["s1", "s2"])], 1000, HOUR)
        .await
        .unwrap();
    let Appended::Accepted { seq } = appended[0] else {
        panic!("{appended:?}")
    };
    let stored = store.event(seq).await.unwrap().unwrap();
    let again = store.event(seq).await.unwrap().unwrap();
    assert!(std::sync::Arc::ptr_eq(&stored, &again));
}

#[tokio::test]
async fn a_matched_event_is_cached_when_written_as_the_log_holds_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_with(dir.path(), &["s1"], SledOptions::default()).await;
    let unmatched = store
        .append_events(vec![event("0", &[])], 1000, HOUR)
        .await
        .unwrap();
    assert_eq!(
        store.inner.events.len(),
        0,
        "an unmatched event is not kept"
    );
    let matched = store
        .append_events(vec![event("1", &["s1"])], 1000, HOUR)
        .await
        .unwrap();
    assert!(matches!(unmatched[0], Appended::Accepted { .. }));
    let Appended::Accepted { seq } = matched[0] else {
        panic!("{matched:?}")
    };
    assert_eq!(store.inner.events.len(), 1);
    // What the deliveries get without a read is exactly what the log holds.
    let cached = store.event(seq).await.unwrap().unwrap();
    let location = (store.inner.queues.read().unwrap())
        .index
        .get(seq)
        .unwrap()
        .location;
    let read = store.inner.readers.read_event(location).unwrap();
    assert_eq!(*cached, read);
}

#[tokio::test]
async fn appended_events_survive_reopening() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = store_with(dir.path(), &["s"], SledOptions::default()).await;
        let writers: Vec<_> = (0..8)
            .map(|w| {
                let store = store.clone();
                tokio::spawn(async move {
                    for i in 0..25 {
                        store
                            .append_events(vec![event(&format!("{w}-{i}"), &["s"])], 5, HOUR)
                            .await
                            .unwrap();
                    }
                })
            })
            .collect();
        for writer in writers {
            writer.await.unwrap();
        }
    }
    let store = EmbeddedStore::open(dir.path()).unwrap();
    let pending = store.pending_deliveries("s", 1000).await.unwrap();
    assert_eq!(pending.len(), 200);
    assert!(pending.windows(2).all(|w| w[0].seq < w[1].seq));
    let again = store
        .append_events(vec![event("3-7", &["s"])], 6, HOUR)
        .await
        .unwrap();
    assert!(
        matches!(again[0], Appended::Duplicate { .. }),
        "the dedupe index is durable too"
    );
}

#[tokio::test]
async fn the_sweep_removes_only_finished_events_past_retention() {
    let dir = tempfile::tempdir().unwrap();
    // One event per segment, so that retention can remove single events.
    let store = store_with(dir.path(), &["s"], one_event_per_segment()).await;
    let unmatched = store
        .append_events(vec![event("1", &[])], 0, HOUR)
        .await
        .unwrap();
    let pending = store
        .append_events(vec![event("2", &["s"])], 0, HOUR)
        .await
        .unwrap();
    let recent = store
        .append_events(vec![event("3", &[])], 2 * HOUR, HOUR)
        .await
        .unwrap();
    let seq = |a: &[Appended]| match a[0] {
        Appended::Accepted { seq } => seq,
        Appended::Duplicate { .. } => panic!(),
    };
    let swept = store.sweep(2 * HOUR + 1, HOUR, HOUR).await.unwrap();
    assert_eq!(
        swept,
        Swept {
            events: 1,
            dedupe_entries: 2
        }
    );
    assert_eq!(store.event(seq(&unmatched)).await.unwrap(), None);
    assert!(
        store.event(seq(&pending)).await.unwrap().is_some(),
        "a pending delivery keeps it"
    );
    assert!(store.event(seq(&recent)).await.unwrap().is_some());
}

/// Group commit: every writer returns only after a flush that began after its write, and
/// concurrent writers share flushes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_commit_covers_every_write_with_fewer_flushes() {
    use std::sync::Arc;
    use std::sync::atomic::AtomicU64;

    let commit = Arc::new(GroupCommit::default());
    // `applied` counts writes that happened; a flush makes everything applied so far durable.
    let applied = Arc::new(AtomicU64::new(0));
    let durable = Arc::new(AtomicU64::new(0));
    let flushes = Arc::new(AtomicU64::new(0));
    let writers: Vec<_> = (0..64)
        .map(|_| {
            let (commit, applied, durable, flushes) = (
                commit.clone(),
                applied.clone(),
                durable.clone(),
                flushes.clone(),
            );
            tokio::spawn(async move {
                for _ in 0..20 {
                    let mine = applied.fetch_add(1, AtomicOrdering::SeqCst) + 1;
                    commit
                        .commit(|| async {
                            let upto = applied.load(AtomicOrdering::SeqCst);
                            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
                            durable.fetch_max(upto, AtomicOrdering::SeqCst);
                            flushes.fetch_add(1, AtomicOrdering::SeqCst);
                            Ok(())
                        })
                        .await
                        .unwrap();
                    assert!(
                        durable.load(AtomicOrdering::SeqCst) >= mine,
                        "a write was acknowledged before a flush covered it"
                    );
                }
            })
        })
        .collect();
    for writer in writers {
        writer.await.unwrap();
    }
    let flushes = flushes.load(AtomicOrdering::SeqCst);
    assert!(
        flushes < 1280 / 4,
        "{flushes} flushes for 1280 writes: not grouped"
    );
}

/// Duplicate detection lives in memory and is rebuilt from the event log when the store
/// opens.
#[tokio::test]
async fn duplicate_detection_is_rebuilt_from_the_log() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = store_with(dir.path(), &["s"], SledOptions::default()).await;
        store
            .append_events(vec![event("1", &["s"]), event("2", &["s"])], 0, HOUR)
            .await
            .unwrap();
    }
    let store = EmbeddedStore::open(dir.path()).unwrap();
    let again = store
        .append_events(vec![event("2", &["s"]), event("3", &["s"])], 1, HOUR)
        .await
        .unwrap();
    assert!(matches!(again[0], Appended::Duplicate { .. }));
    assert!(matches!(again[1], Appended::Accepted { .. }));
    assert_eq!(store.pending_deliveries("s", 10).await.unwrap().len(), 3);
    // What the log held knows when it was accepted: once the window has passed, the
    // identity is free again.
    let later = store
        .append_events(vec![event("1", &["s"])], HOUR, HOUR)
        .await
        .unwrap();
    assert!(matches!(later[0], Appended::Accepted { .. }), "{later:?}");
}

/// A segment stays while duplicate detection still needs it, even past the retention.
#[tokio::test]
async fn segments_outlive_retention_while_the_duplicate_window_needs_them() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_with(dir.path(), &["s"], one_event_per_segment()).await;
    store
        .append_events(vec![event("1", &[])], 0, 10 * HOUR)
        .await
        .unwrap();
    store
        .append_events(vec![event("2", &[])], 0, 10 * HOUR)
        .await
        .unwrap();
    let swept = store.sweep(2 * HOUR, HOUR, 10 * HOUR).await.unwrap();
    assert_eq!(
        swept.events, 0,
        "the duplicate window is longer than the retention"
    );
    let again = store
        .append_events(vec![event("1", &[])], 2 * HOUR, 10 * HOUR)
        .await
        .unwrap();
    assert!(matches!(again[0], Appended::Duplicate { .. }));
    let swept = store.sweep(11 * HOUR, HOUR, 10 * HOUR).await.unwrap();
    assert_eq!(
        swept.events, 1,
        "the closed segment goes once both have passed"
    );
}

/// A directory in use is refused with a message that says so (after a short wait for a store
/// that is just closing); once it is closed, it opens.
#[tokio::test]
async fn a_directory_in_use_is_refused_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let first = EmbeddedStore::open(dir.path()).unwrap();
    let error = EmbeddedStore::open(dir.path()).unwrap_err().to_string();
    assert!(error.contains("in use by another process"), "{error}");
    drop(first);
    EmbeddedStore::open(dir.path()).unwrap();
}

/// Duplicate detection forgets identities once the window has passed, however many (the
/// sweep works through them in chunks), and the same ids are then accepted as new events.
#[tokio::test]
async fn the_sweep_forgets_every_expired_identity() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_with(dir.path(), &["s"], SledOptions::default()).await;
    let many = 2 * super::committer::FORGET_CHUNK + 3;
    let events = (0..many).map(|n| event(&n.to_string(), &[])).collect();
    store.append_events(events, 0, HOUR).await.unwrap();
    let later = store
        .append_events(vec![event("later", &[])], HOUR / 2, HOUR)
        .await
        .unwrap();
    assert!(matches!(later[0], Appended::Accepted { .. }));

    let swept = store.sweep(HOUR, 2 * HOUR, HOUR).await.unwrap();
    assert_eq!(swept.dedupe_entries, many as u64);
    let again = store
        .append_events(
            vec![
                event("0", &[]),
                event(&(many - 1).to_string(), &[]),
                event("later", &[]),
            ],
            HOUR,
            HOUR,
        )
        .await
        .unwrap();
    assert!(matches!(again[0], Appended::Accepted { .. }));
    assert!(matches!(again[1], Appended::Accepted { .. }));
    assert!(
        matches!(again[2], Appended::Duplicate { .. }),
        "an identity within the window is still known"
    );
    assert_eq!(
        store
            .sweep(HOUR, 2 * HOUR, HOUR)
            .await
            .unwrap()
            .dedupe_entries,
        0
    );
}

/// The dead-letter sweep looks at a subscription's dead letters a chunk at a time (never
/// holding the queues' lock for all of them) and still removes exactly the oldest.
#[tokio::test]
async fn the_dead_letter_sweep_takes_the_oldest_across_chunks() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_with(dir.path(), &["a", "b"], SledOptions::default()).await;
    let events = (0..10_000)
        .map(|n| event(&format!("d{n}"), &["a", "b"]))
        .collect();
    let appended = store.append_events(events, 100, HOUR).await.unwrap();
    let seqs = knooppunt_store_conformance::seqs(&appended);
    // "a": its first 5,000 died at 2,000, the rest at 1,000; "b": all at 3,000.
    use knooppunt_store_conformance::withdraw;
    store
        .record(vec![
            withdraw("a", &seqs[..5_000], 2_000),
            withdraw("a", &seqs[5_000..], 1_000),
            withdraw("b", &seqs, 3_000),
        ])
        .await
        .unwrap();
    // The 6,000 oldest before 5,000: a's 5,000 that died at 1,000, then 1,000 of a's others.
    let swept = store.sweep_dead_letters(5_000, 6_000).await.unwrap();
    assert_eq!(swept, [("a".to_owned(), 6_000)]);
    let left = store.dead_letters("a", None, 10_000).await.unwrap();
    assert_eq!(left.len(), 4_000);
    assert!(left.iter().all(|d| d.dead_at == 2_000));
    assert_eq!(
        store.dead_letters("b", None, 10_000).await.unwrap().len(),
        10_000
    );
}

/// A backup taken while writers append, across segments, restores into a store that holds
/// every event appended before it began, whole, with a log that ends where a crash's would
/// (a record half copied is cut off), and the subscriptions; the copy is a store of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_taken_while_appending_restores_a_whole_store() {
    let dir = tempfile::tempdir().unwrap();
    let options = SledOptions {
        segment_bytes: 4 * 1024,
        ..SledOptions::default()
    };
    let store = store_with(&dir.path().join("live"), &["s"], options).await;
    for i in 0..200 {
        store
            .append_events(vec![event(&format!("before-{i}"), &["s"])], 1, HOUR)
            .await
            .unwrap();
    }
    let writing = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let writer = {
        let (store, writing) = (store.clone(), Arc::clone(&writing));
        tokio::spawn(async move {
            let mut i = 0;
            while writing.load(AtomicOrdering::Relaxed) {
                store
                    .append_events(vec![event(&format!("during-{i}"), &["s"])], 2, HOUR)
                    .await
                    .unwrap();
                i += 1;
            }
        })
    };
    let backup = {
        let store = store.clone();
        tokio::task::spawn_blocking(move || {
            let mut out = Vec::new();
            let beside = [("audit-head".to_string(), b"7:abc\n".to_vec())];
            let summary = store.backup(&mut out, &beside).unwrap();
            (out, summary)
        })
        .await
        .unwrap()
    };
    writing.store(false, AtomicOrdering::Relaxed);
    writer.await.unwrap();
    let (bytes, summary) = backup;
    assert!(summary.segments > 5, "{summary:?}");
    assert_eq!(summary.records["subscriptions"], 1);

    let copy = dir.path().join("copy");
    let restored = restore(&mut bytes.as_slice(), &copy).unwrap();
    assert_eq!(restored, summary);
    assert_eq!(std::fs::read(copy.join("audit-head")).unwrap(), b"7:abc\n");
    let reopened = EmbeddedStore::open_with(&copy, options).unwrap();
    let pending = reopened.pending_deliveries("s", 100_000).await.unwrap();
    let mut ids = Vec::new();
    for delivery in &pending {
        let stored = reopened.event(delivery.seq).await.unwrap().unwrap();
        let json: serde_json::Value = serde_json::from_str(&stored.json).unwrap();
        ids.push(json["id"].as_str().unwrap().to_owned());
    }
    for i in 0..200 {
        assert!(ids.contains(&format!("before-{i}")), "before-{i}");
    }
    assert!(pending.windows(2).all(|w| w[0].seq < w[1].seq));
    assert!(reopened.subscription("s").await.unwrap().is_some());
    // The copy takes writes of its own.
    reopened
        .append_events(vec![event("after", &["s"])], 3, HOUR)
        .await
        .unwrap();
}

/// A backup stream that breaks off, or that names a file outside its directory, restores
/// nothing and says why.
#[test]
fn an_incomplete_or_hostile_backup_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let store = EmbeddedStore::open(&dir.path().join("live")).unwrap();
    let mut bytes = Vec::new();
    store.backup(&mut bytes, &[]).unwrap();
    drop(store);
    for cut in [bytes.len() - 1, bytes.len() / 2, 5] {
        let into = dir.path().join(format!("cut-{cut}"));
        let error = restore(&mut &bytes[..cut], &into).unwrap_err();
        assert!(
            error.to_string().contains("not a whole Knooppunt backup"),
            "{error}"
        );
    }
    let mut hostile = BACKUP_MAGIC.to_vec();
    let name = b"../outside";
    hostile.push(b'F');
    hostile.extend((name.len() as u16).to_le_bytes());
    hostile.extend(name);
    hostile.extend(0u32.to_le_bytes());
    let error = restore(&mut hostile.as_slice(), &dir.path().join("hostile")).unwrap_err();
    assert!(error.to_string().contains("names a file"), "{error}");
    assert!(!dir.path().join("outside").exists());
    // Nor into a directory that holds something.
    let used = dir.path().join("used");
    std::fs::create_dir_all(&used).unwrap();
    std::fs::write(used.join("x"), b"x").unwrap();
    let error = restore(&mut bytes.as_slice(), &used).unwrap_err();
    assert!(error.to_string().contains("not empty"), "{error}");
}

/// sled's cache is bounded ([`SledOptions::cache_bytes`]): records far past it are evicted
/// from memory, not lost, and read back whole after a reopen.
#[tokio::test]
async fn records_far_past_the_cache_are_kept_whole() {
    let dir = tempfile::tempdir().unwrap();
    let options = SledOptions {
        cache_bytes: 64 * 1024,
        ..SledOptions::default()
    };
    let label = |i: usize| format!("{i}:{}", "x".repeat(1000));
    {
        let store = EmbeddedStore::open_with(dir.path(), options).unwrap();
        // About 3 MB of subscriptions, 48 times the cache.
        for i in 0..3000 {
            let mut subscription = subscription(&format!("s{i:04}"));
            subscription.label = Some(label(i));
            store.insert_subscription(&subscription).await.unwrap();
        }
        let all = store.subscriptions().await.unwrap();
        assert_eq!(all.len(), 3000);
    }
    let store = EmbeddedStore::open_with(dir.path(), options).unwrap();
    let mut all = store.subscriptions().await.unwrap();
    all.sort_by(|a, b| a.id.cmp(&b.id));
    assert_eq!(all.len(), 3000);
    for (i, subscription) in all.iter().enumerate() {
        assert_eq!(subscription.id, format!("s{i:04}"));
        assert_eq!(subscription.label.as_deref(), Some(label(i).as_str()));
    }
}

/// The data directory records its format: a directory without one (as every release
/// before wrote them) opens and is stamped with today's; one of a newer format than this
/// release knows is refused, saying which and what to do, and left as it was.
#[test]
fn a_data_directory_of_a_newer_format_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    // Written as an earlier release did: no format recorded.
    drop(open_sled(dir.path(), 1 << 20).unwrap());
    let format = |dir: &Path| {
        let db = open_sled(dir, 1 << 20).unwrap();
        db.get(FORMAT_KEY).unwrap().map(|v| v.to_vec())
    };
    assert_eq!(format(dir.path()), None);
    drop(EmbeddedStore::open(dir.path()).unwrap());
    assert_eq!(
        format(dir.path()),
        Some(FORMAT_VERSION.to_be_bytes().to_vec()),
        "stamped with today's format"
    );
    // A later release wrote it.
    {
        let db = open_sled(dir.path(), 1 << 20).unwrap();
        db.insert(FORMAT_KEY, &(FORMAT_VERSION + 1).to_be_bytes())
            .unwrap();
        db.flush().unwrap();
    }
    let Err(refused) = EmbeddedStore::open(dir.path()) else {
        panic!("a newer format was opened");
    };
    let message = refused.to_string();
    assert!(
        message.contains(&format!(
            "has format version {}, newer than this hub knows ({FORMAT_VERSION})",
            FORMAT_VERSION + 1
        )) && message.contains("restore the backup"),
        "{message}"
    );
    assert_eq!(
        format(dir.path()),
        Some((FORMAT_VERSION + 1).to_be_bytes().to_vec()),
        "left as it was"
    );
}
