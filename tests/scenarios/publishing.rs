//! Publishing over HTTP: the three content modes, every rejection, duplicates, source limits,
//! unmatched events, retention, and nothing lost across a restart.

use std::time::Duration;

use knooppunt_broker::{IngestCounters, IngestOptions};
use knooppunt_event::ProfileLevel;
use knooppunt_store::{AnyRecord, EventLog, Inspect, Key, Kind, RecordRef, Store, StoreFuture};
use knooppunt_tests::wait::until;
use knooppunt_tests::{Answer, TestHub, tokens};
use reqwest::Method;
use serde_json::{Value, json};

const SOURCE: &str = "urn:nld:oin:00000001823288444000:systeem:BRP";
const TYPE: &str = "nl.brp.persoon-verhuisd";

fn event(id: &str) -> Value {
    json!({"specversion": "1.0", "id": id, "source": SOURCE, "type": TYPE,
           "subject": "999990342", "comexampleothervalue": 5, "flag": true,
           "data": {"bsn": "999990342", "amount": 1.50}})
}

async fn subscribe(hub: &TestHub, body: Value) -> String {
    let answer = Answer::from(
        hub.request(Method::POST, "/v1/subscriptions", tokens::ADMIN)
            .json(&body)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(answer.status, 201, "{}", answer.body);
    answer.body["id"].as_str().unwrap().to_owned()
}

async fn subscribe_to_type(hub: &TestHub) -> String {
    subscribe(
        hub,
        json!({"sink": "http://127.0.0.1:9/", "protocol": "HTTP", "types": [TYPE]}),
    )
    .await
}

async fn post(
    hub: &TestHub,
    token: &str,
    content_type: &str,
    body: impl Into<reqwest::Body>,
) -> Answer {
    let request = hub
        .request(Method::POST, "/v1/events", token)
        .header("content-type", content_type)
        .body(body);
    Answer::from(request.send().await.unwrap()).await
}

async fn publish(hub: &TestHub, text: &str) -> Answer {
    post(
        hub,
        tokens::PUBLISHER,
        "application/cloudevents+json",
        text.to_owned(),
    )
    .await
}

async fn pending(hub: &TestHub, subscription: &str) -> Vec<String> {
    let mut ids = Vec::new();
    for delivery in hub
        .store
        .pending_deliveries(subscription, 10_000)
        .await
        .unwrap()
    {
        let event = hub.store.event(delivery.seq).await.unwrap().unwrap();
        ids.push(event.id.clone());
    }
    ids
}

#[tokio::test]
async fn the_three_modes_are_accepted_and_routed() {
    let hub = TestHub::start().await;
    let subscription = subscribe_to_type(&hub).await;

    let text = "{ \"specversion\":\"1.0\", \"id\":\"s-1\", \"source\":\"urn:nld:oin:00000001823288444000:systeem:BRP\",\n  \"type\":\"nl.brp.persoon-verhuisd\", \"comexampleothervalue\": 5, \"data\": {\"x\": 10.0, \"y\": 1.50e0} }";
    let structured = publish(&hub, text).await;
    assert_eq!(structured.status, 202, "{}", structured.body);
    assert_eq!(structured.body["id"], "s-1");
    assert_eq!(structured.body["duplicate"], false);
    assert_eq!(structured.body["matchedSubscriptions"], 1);
    assert!(structured.body["sequence"].is_u64());
    let seq = structured.body["sequence"].as_u64().unwrap();
    assert_eq!(
        hub.store.event(seq).await.unwrap().unwrap().json,
        text,
        "the publisher's JSON is stored byte for byte"
    );

    let binary = Answer::from(
        hub.request(Method::POST, "/v1/events", tokens::PUBLISHER)
            .header("ce-specversion", "1.0")
            .header("ce-id", "b-1")
            .header("ce-source", SOURCE)
            .header("ce-type", TYPE)
            .header("ce-subject", "Euro%20%E2%82%AC")
            .header("content-type", "application/json")
            .body(r#"{"bsn": "999990342"}"#)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(binary.status, 202, "{}", binary.body);
    let stored = hub
        .store
        .event(binary.body["sequence"].as_u64().unwrap())
        .await
        .unwrap()
        .unwrap();
    let as_json: Value = serde_json::from_str(&stored.json).unwrap();
    assert_eq!(as_json["subject"], "Euro €");
    assert_eq!(as_json["data"], json!({"bsn": "999990342"}));

    let batch = json!([event("batch-1"), event("batch-2")]).to_string();
    let batched = post(
        &hub,
        tokens::PUBLISHER,
        "application/cloudevents-batch+json",
        batch,
    )
    .await;
    assert_eq!(batched.status, 202, "{}", batched.body);
    assert_eq!(batched.body["events"].as_array().unwrap().len(), 2);
    assert_eq!(batched.body["events"][1]["id"], "batch-2");

    assert_eq!(
        pending(&hub, &subscription).await,
        ["s-1", "b-1", "batch-1", "batch-2"]
    );
    let empty = post(
        &hub,
        tokens::PUBLISHER,
        "application/cloudevents-batch+json",
        "[]",
    )
    .await;
    assert_eq!(empty.status, 202);
    assert_eq!(empty.body, json!({"events": []}));
}

#[tokio::test]
async fn invalid_events_are_rejected_with_every_problem() {
    let hub = TestHub::start().await;
    let subscription = subscribe_to_type(&hub).await;
    let answer = publish(
        &hub,
        r#"{"specversion":"1.0","source":"/s","type":"t","time":"yesterday","count":1.5}"#,
    )
    .await
    .assert_problem(400);
    let mut names = answer.invalid_params();
    names.sort();
    assert_eq!(names, ["count", "id", "time"]);
    let rules: Vec<&str> = answer.body["errors"][0]["violations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["rule"].as_str().unwrap())
        .collect();
    assert!(
        rules.contains(&"core.required") && rules.contains(&"core.timestamp"),
        "{rules:?}"
    );
    assert!(
        answer.body["errors"][0]["violations"][0]["spec"]
            .as_str()
            .unwrap()
            .contains("§")
    );

    let mut late = event("ok-2");
    late["time"] = json!("2026-13-01T00:00:00Z");
    let batch = json!([event("ok-1"), late, {"id": 3}]).to_string();
    let answer = post(
        &hub,
        tokens::PUBLISHER,
        "application/cloudevents-batch+json",
        batch,
    )
    .await
    .assert_problem(400);
    let names = answer.invalid_params();
    assert!(names.contains(&"[1].time".to_owned()), "{names:?}");
    assert!(names.contains(&"[2].source".to_owned()), "{names:?}");
    assert!(
        answer.body["detail"]
            .as_str()
            .unwrap()
            .contains("none was accepted")
    );
    assert_eq!(
        pending(&hub, &subscription).await,
        Vec::<String>::new(),
        "all or nothing"
    );

    publish(&hub, "{\"specversion\": ")
        .await
        .assert_problem(400);
    let not_an_event = post(&hub, tokens::PUBLISHER, "text/plain", "hello")
        .await
        .assert_problem(415);
    assert!(
        not_an_event.body["detail"]
            .as_str()
            .unwrap()
            .contains("ce-specversion")
    );
    post(&hub, tokens::PUBLISHER, "application/cloudevents+avro", "x")
        .await
        .assert_problem(415);
    let counters = hub.hub.counters();
    assert!(IngestCounters::get(&counters.rejected) >= 6);
    assert_eq!(IngestCounters::get(&counters.accepted), 0);
}

#[tokio::test]
async fn size_limits() {
    let options = IngestOptions {
        max_event_bytes: 65_536,
        max_batch_bytes: 100_000,
        ..IngestOptions::default()
    };
    let hub = TestHub::builder().ingest(options).start().await;
    let sized = |id: &str, size: usize| {
        let mut value = event(id);
        value["data"] = json!("");
        let overhead = value.to_string().len();
        value["data"] = json!("x".repeat(size - overhead));
        let text = value.to_string();
        assert_eq!(text.len(), size);
        text
    };
    let at_limit = publish(&hub, &sized("64k", 65_536)).await;
    assert_eq!(at_limit.status, 202, "events of 64 KiB are always accepted");
    let over = publish(&hub, &sized("64k+1", 65_537))
        .await
        .assert_problem(413);
    assert!(
        over.body["detail"].as_str().unwrap().contains("65536"),
        "{}",
        over.body
    );
    let batch = format!("[{},{}]", sized("b1", 1000), sized("b2", 65_537));
    let answer = post(
        &hub,
        tokens::PUBLISHER,
        "application/cloudevents-batch+json",
        batch,
    )
    .await
    .assert_problem(413);
    assert!(answer.body["detail"].as_str().unwrap().contains("[1]"));
    let huge = format!("[{}]", vec![sized("h", 60_000); 2].join(","));
    post(
        &hub,
        tokens::PUBLISHER,
        "application/cloudevents-batch+json",
        huge,
    )
    .await
    .assert_problem(413);
}

#[tokio::test]
async fn the_profile_level_decides() {
    let strict = TestHub::builder()
        .ingest(IngestOptions {
            profile: ProfileLevel::Enforce,
            ..IngestOptions::default()
        })
        .start()
        .await;
    let mut event = event("p-1");
    event["type"] = json!("PersonMoved");
    let answer = publish(&strict, &event.to_string())
        .await
        .assert_problem(400);
    assert_eq!(
        answer.body["errors"][0]["violations"][0]["rule"],
        "nlgov.type.reverse-domain"
    );
    assert!(
        answer.body["errors"][0]["violations"][0]["spec"]
            .as_str()
            .unwrap()
            .contains("NL GOV")
    );

    let lenient = TestHub::start().await;
    let answer = publish(&lenient, &event.to_string()).await;
    assert_eq!(answer.status, 202);
    assert_eq!(
        answer.body["warnings"][0]["rule"],
        "nlgov.type.reverse-domain"
    );
    assert_eq!(answer.body["warnings"][0]["severity"], "warning");

    // A batch says each warning once, with the events it concerns, not in every receipt.
    let mut batch = Vec::new();
    for n in 0..1000 {
        let mut event = self::event(&format!("p-batch-{n}"));
        if n != 500 {
            event["type"] = json!("PersonMoved");
        }
        batch.push(event);
    }
    let answer = post(
        &lenient,
        tokens::PUBLISHER,
        "application/cloudevents-batch+json",
        Value::Array(batch).to_string(),
    )
    .await;
    assert_eq!(answer.status, 202, "{}", answer.body);
    let warnings = answer.body["warnings"].as_array().unwrap();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert_eq!(warnings[0]["rule"], "nlgov.type.reverse-domain");
    let events: Vec<u64> = warnings[0]["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i.as_u64().unwrap())
        .collect();
    assert_eq!(events, (0..1000).filter(|n| *n != 500).collect::<Vec<_>>());
    let receipts = answer.body["events"].as_array().unwrap();
    assert_eq!(receipts.len(), 1000);
    assert!(receipts.iter().all(|r| r.get("warnings").is_none()));
    assert!(
        answer.body.to_string().len() < 200_000,
        "the answer stays small: {} bytes",
        answer.body.to_string().len()
    );
}

#[tokio::test]
async fn publishing_needs_the_publisher_role_and_an_allowed_source() {
    let hub = TestHub::start().await;
    let text = event("a-1").to_string();
    let anonymous = Answer::from(
        hub.client
            .post(hub.url("/v1/events"))
            .header("content-type", "application/cloudevents+json")
            .body(text.clone())
            .send()
            .await
            .unwrap(),
    )
    .await;
    anonymous.assert_problem(401);
    post(
        &hub,
        tokens::KVK,
        "application/cloudevents+json",
        text.clone(),
    )
    .await
    .assert_problem(403);

    let allowed = post(
        &hub,
        tokens::BRP_PUBLISHER,
        "application/cloudevents+json",
        text,
    )
    .await;
    assert_eq!(allowed.status, 202, "{}", allowed.body);
    let mut foreign = event("a-2");
    foreign["source"] = json!("urn:nld:oin:99999999999999999999:systeem:X");
    let refused = post(
        &hub,
        tokens::BRP_PUBLISHER,
        "application/cloudevents+json",
        foreign.to_string(),
    )
    .await
    .assert_problem(403);
    assert!(
        refused.body["detail"]
            .as_str()
            .unwrap()
            .contains("urn:nld:oin:00000001823288444000:")
    );
    let batch = json!([event("a-3"), foreign]).to_string();
    post(
        &hub,
        tokens::BRP_PUBLISHER,
        "application/cloudevents-batch+json",
        batch,
    )
    .await
    .assert_problem(403);
    let again = post(
        &hub,
        tokens::BRP_PUBLISHER,
        "application/cloudevents+json",
        event("a-3").to_string(),
    )
    .await;
    assert_eq!(
        again.body["duplicate"], false,
        "nothing of the refused batch was stored"
    );
}

#[tokio::test]
async fn duplicates_are_acknowledged_but_not_routed_twice() {
    let hub = TestHub::start().await;
    let subscription = subscribe_to_type(&hub).await;
    let first = publish(&hub, &event("d-1").to_string()).await;
    let second = publish(&hub, &event("d-1").to_string()).await;
    assert_eq!(second.status, 202);
    assert_eq!(second.body["duplicate"], true);
    assert_eq!(second.body["matchedSubscriptions"], 0);
    assert_eq!(second.body["sequence"], first.body["sequence"]);
    assert_eq!(IngestCounters::get(&hub.hub.counters().duplicates), 1);

    let hub = hub.restart().await;
    let third = publish(&hub, &event("d-1").to_string()).await;
    assert_eq!(
        third.body["duplicate"], true,
        "duplicate detection survives a restart"
    );
    assert_eq!(pending(&hub, &subscription).await, ["d-1"]);
}

#[tokio::test]
async fn unmatched_events_are_accepted_counted_and_swept_after_retention() {
    let ingest = IngestOptions {
        retention: Duration::from_millis(1),
        // Events are kept for duplicate detection too, so the window must pass as well.
        dedupe_window: Duration::from_millis(1),
        sweep_interval: Duration::from_millis(20),
        ..IngestOptions::default()
    };
    // One event per log segment, so that retention removes single events.
    let store = knooppunt_store_embedded::SledOptions {
        segment_bytes: 1,
        ..Default::default()
    };
    let hub = TestHub::builder().ingest(ingest).store(store).start().await;
    let subscription = subscribe_to_type(&hub).await;
    let mut other = event("u-1");
    other["type"] = json!("nl.kvk.onderneming-opgericht");
    let unmatched = publish(&hub, &other.to_string()).await;
    assert_eq!(unmatched.status, 202);
    assert_eq!(unmatched.body["matchedSubscriptions"], 0);
    assert_eq!(IngestCounters::get(&hub.hub.counters().unmatched), 1);
    let matched = publish(&hub, &event("m-1").to_string()).await;

    let unmatched_seq = unmatched.body["sequence"].as_u64().unwrap();
    until(
        "the finished event swept after retention",
        Duration::from_secs(10),
        || async {
            match hub.store.event(unmatched_seq).await.unwrap() {
                None => Ok(()),
                Some(_) => Err("still kept"),
            }
        },
    )
    .await;
    let matched_seq = matched.body["sequence"].as_u64().unwrap();
    assert!(
        hub.store.event(matched_seq).await.unwrap().is_some(),
        "pending deliveries keep it"
    );
    assert_eq!(pending(&hub, &subscription).await, ["m-1"]);
}

#[tokio::test]
async fn nothing_acknowledged_is_lost_across_a_restart() {
    let hub = TestHub::start().await;
    let subscription = subscribe_to_type(&hub).await;
    let mut acknowledged = Vec::new();
    for i in 0..50 {
        let id = format!("r-{i}");
        assert_eq!(publish(&hub, &event(&id).to_string()).await.status, 202);
        acknowledged.push(id);
    }
    let hub = hub.restart().await;
    assert_eq!(pending(&hub, &subscription).await, acknowledged);
    assert_eq!(
        hub.hub.matching_subscriptions(
            &knooppunt_event::format::json::decode_event(event("x").to_string().as_bytes())
                .unwrap()
                .event
        ),
        [subscription]
    );
}

#[tokio::test]
async fn other_methods_are_not_allowed() {
    let hub = TestHub::start().await;
    let answer = Answer::from(
        hub.request(Method::GET, "/v1/events", tokens::PUBLISHER)
            .send()
            .await
            .unwrap(),
    )
    .await
    .assert_problem(405);
    assert_eq!(answer.header("allow"), Some("POST"));
}

/// A store whose appends wait until the test opens the gate, and whose measurements of
/// the backlog (`queue_stats`) wait on their own gate while `hold_stats` is set.
struct GatedStore {
    inner: knooppunt_store_embedded::EmbeddedStore,
    gate: tokio::sync::Semaphore,
    hold_stats: std::sync::atomic::AtomicBool,
    stats_waiting: std::sync::atomic::AtomicUsize,
    stats_gate: tokio::sync::Semaphore,
}

impl GatedStore {
    fn open(dir: &std::path::Path, append_permits: usize) -> Self {
        GatedStore {
            inner: knooppunt_store_embedded::EmbeddedStore::open(dir).unwrap(),
            gate: tokio::sync::Semaphore::new(append_permits),
            hold_stats: std::sync::atomic::AtomicBool::new(false),
            stats_waiting: std::sync::atomic::AtomicUsize::new(0),
            stats_gate: tokio::sync::Semaphore::new(0),
        }
    }
}

impl knooppunt_store::Records for GatedStore {
    fn insert<'a>(&'a self, record: RecordRef<'a>) -> StoreFuture<'a, ()> {
        self.inner.insert(record)
    }

    fn replace<'a>(&'a self, record: RecordRef<'a>) -> StoreFuture<'a, bool> {
        self.inner.replace(record)
    }

    fn put<'a>(&'a self, record: RecordRef<'a>) -> StoreFuture<'a, ()> {
        self.inner.put(record)
    }

    fn remove<'a>(&'a self, kind: Kind, key: Key<'a>) -> StoreFuture<'a, Option<AnyRecord>> {
        self.inner.remove(kind, key)
    }

    fn get<'a>(&'a self, kind: Kind, key: Key<'a>) -> StoreFuture<'a, Option<AnyRecord>> {
        self.inner.get(kind, key)
    }

    fn all(&self, kind: Kind) -> StoreFuture<'_, Vec<AnyRecord>> {
        self.inner.all(kind)
    }

    fn former_owner<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<String>> {
        self.inner.former_owner(id)
    }

    fn put_replay<'a>(
        &'a self,
        replay: &'a knooppunt_store::Replay,
        expected: Option<u64>,
    ) -> StoreFuture<'a, bool> {
        self.inner.put_replay(replay, expected)
    }

    fn sweep_sessions(&self, now_ms: u64, idle_before_ms: u64) -> StoreFuture<'_, u64> {
        self.inner.sweep_sessions(now_ms, idle_before_ms)
    }
}

impl knooppunt_store::EventLog for GatedStore {
    fn append_events(
        &self,
        events: Vec<knooppunt_store::NewEvent>,
        now: u64,
        window: u64,
    ) -> knooppunt_store::StoreFuture<'_, Vec<knooppunt_store::Appended>> {
        Box::pin(async move {
            let _open = self.gate.acquire().await.unwrap();
            self.inner.append_events(events, now, window).await
        })
    }

    fn event(
        &self,
        seq: u64,
    ) -> knooppunt_store::StoreFuture<'_, Option<std::sync::Arc<knooppunt_store::StoredEvent>>>
    {
        self.inner.event(seq)
    }

    fn sweep(
        &self,
        now: u64,
        retention: u64,
        window: u64,
    ) -> knooppunt_store::StoreFuture<'_, knooppunt_store::Swept> {
        self.inner.sweep(now, retention, window)
    }

    fn receipts_of_event(
        &self,
        seq: u64,
    ) -> knooppunt_store::StoreFuture<'_, Vec<knooppunt_store::Receipt>> {
        self.inner.receipts_of_event(seq)
    }

    fn receipts_of_subscription<'a>(
        &'a self,
        s: &'a str,
        after: Option<&'a str>,
        limit: usize,
    ) -> knooppunt_store::StoreFuture<'a, (Vec<knooppunt_store::Receipt>, Option<String>)> {
        self.inner.receipts_of_subscription(s, after, limit)
    }

    fn sweep_receipts(&self, before_ms: u64) -> knooppunt_store::StoreFuture<'_, u64> {
        self.inner.sweep_receipts(before_ms)
    }

    fn events_after(
        &self,
        after: u64,
        limit: usize,
    ) -> knooppunt_store::StoreFuture<'_, Vec<std::sync::Arc<knooppunt_store::StoredEvent>>> {
        self.inner.events_after(after, limit)
    }

    fn swept_through(&self) -> knooppunt_store::StoreFuture<'_, u64> {
        self.inner.swept_through()
    }

    fn seq_before(&self, at_ms: u64) -> knooppunt_store::StoreFuture<'_, u64> {
        self.inner.seq_before(at_ms)
    }
}

impl knooppunt_store::DeliveryQueue for GatedStore {
    fn lease<'a>(
        &'a self,
        s: &'a str,
        now: u64,
        lease: u64,
        limit: usize,
        ordered: bool,
    ) -> knooppunt_store::StoreFuture<'a, Vec<knooppunt_store::Delivery>> {
        self.inner.lease(s, now, lease, limit, ordered)
    }

    fn next_due<'a>(
        &'a self,
        s: &'a str,
        ordered: bool,
    ) -> knooppunt_store::StoreFuture<'a, Option<u64>> {
        self.inner.next_due(s, ordered)
    }

    fn record(
        &self,
        changes: Vec<knooppunt_store::DeliveryChange>,
    ) -> knooppunt_store::StoreFuture<'_, ()> {
        self.inner.record(changes)
    }

    fn renew<'a>(
        &'a self,
        s: &'a str,
        seq: u64,
        lease: u64,
        until_ms: u64,
    ) -> knooppunt_store::StoreFuture<'a, bool> {
        self.inner.renew(s, seq, lease, until_ms)
    }

    fn release<'a>(
        &'a self,
        s: &'a str,
        leases: &'a [(u64, u64)],
    ) -> knooppunt_store::StoreFuture<'a, u64> {
        self.inner.release(s, leases)
    }

    fn pending_seqs<'a>(
        &'a self,
        s: &'a str,
        after: Option<u64>,
        limit: usize,
    ) -> knooppunt_store::StoreFuture<'a, Vec<u64>> {
        self.inner.pending_seqs(s, after, limit)
    }

    fn dead_letters<'a>(
        &'a self,
        s: &'a str,
        after: Option<u64>,
        limit: usize,
    ) -> knooppunt_store::StoreFuture<'a, Vec<knooppunt_store::DeadLetter>> {
        self.inner.dead_letters(s, after, limit)
    }

    fn sweep_dead_letters(
        &self,
        before_ms: u64,
        limit: usize,
    ) -> knooppunt_store::StoreFuture<'_, Vec<(String, u64)>> {
        self.inner.sweep_dead_letters(before_ms, limit)
    }

    fn queue_stats(&self) -> knooppunt_store::StoreFuture<'_, Vec<knooppunt_store::QueueStats>> {
        Box::pin(async move {
            if self.hold_stats.load(std::sync::atomic::Ordering::SeqCst) {
                self.stats_waiting
                    .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let _open = self.stats_gate.acquire().await.unwrap();
            }
            self.inner.queue_stats().await
        })
    }

    fn queue_stats_of<'a>(
        &'a self,
        subscription: &'a str,
    ) -> knooppunt_store::StoreFuture<'a, Option<knooppunt_store::QueueStats>> {
        self.inner.queue_stats_of(subscription)
    }

    fn dead_letter<'a>(
        &'a self,
        s: &'a str,
        seq: u64,
    ) -> knooppunt_store::StoreFuture<'a, Option<knooppunt_store::DeadLetter>> {
        self.inner.dead_letter(s, seq)
    }
}

impl knooppunt_store::AuditLog for GatedStore {
    fn append_audit(
        &self,
        records: Vec<knooppunt_store::AuditRecord>,
    ) -> knooppunt_store::StoreFuture<'_, Vec<knooppunt_store::AuditEntry>> {
        self.inner.append_audit(records)
    }

    fn audit_entries(
        &self,
        range: knooppunt_store::AuditRange,
    ) -> knooppunt_store::StoreFuture<'_, Vec<knooppunt_store::AuditEntry>> {
        self.inner.audit_entries(range)
    }

    fn audit_last(&self) -> knooppunt_store::StoreFuture<'_, Option<knooppunt_store::AuditEntry>> {
        self.inner.audit_last()
    }

    fn remove_audit_through(&self, through: u64) -> knooppunt_store::StoreFuture<'_, u64> {
        self.inner.remove_audit_through(through)
    }
}

impl knooppunt_store::Cluster for GatedStore {
    fn hubs_alive<'a>(
        &'a self,
        hub: &'a str,
        alive_ms: u64,
    ) -> knooppunt_store::StoreFuture<'a, Vec<String>> {
        self.inner.hubs_alive(hub, alive_ms)
    }

    fn hub_leaves<'a>(&'a self, hub: &'a str) -> knooppunt_store::StoreFuture<'a, ()> {
        self.inner.hub_leaves(hub)
    }

    fn pause_sink<'a>(&'a self, sink: &'a str, until: u64) -> knooppunt_store::StoreFuture<'a, ()> {
        self.inner.pause_sink(sink, until)
    }

    fn sinks_paused(&self, now: u64) -> knooppunt_store::StoreFuture<'_, Vec<(String, u64)>> {
        self.inner.sinks_paused(now)
    }
}

impl Store for GatedStore {
    fn disk_usage(&self) -> knooppunt_store::StoreFuture<'_, knooppunt_store::DiskUsage> {
        self.inner.disk_usage()
    }

    fn check(&self) -> knooppunt_store::StoreFuture<'_, ()> {
        self.inner.check()
    }
}

#[tokio::test]
async fn the_acknowledgement_waits_for_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let store = std::sync::Arc::new(GatedStore::open(dir.path(), 0));
    let options = knooppunt_broker::HubOptions::new(knooppunt_broker::Authentication::Disabled);
    let hub = knooppunt_broker::Hub::open(store.clone(), options)
        .await
        .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1/events", listener.local_addr().unwrap());
    tokio::spawn(knooppunt_broker::serve(
        listener,
        hub,
        std::future::pending(),
    ));

    let publishing = tokio::spawn(async move {
        reqwest::Client::new()
            .post(url)
            .header("content-type", "application/cloudevents+json")
            .body(event("gated").to_string())
            .send()
            .await
            .unwrap()
            .status()
    });
    let early = tokio::time::timeout(Duration::from_millis(300), async {
        while !publishing.is_finished() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    assert!(
        early.is_err(),
        "the hub answered before the store had the event"
    );
    store.gate.add_permits(1);
    assert_eq!(publishing.await.unwrap(), 202);
}

/// While the backlog guard measures (the store slow to answer), the hub's estimate of what
/// is undelivered does not dip: a publish past the limit waits for the measurement and is
/// refused, never accepted on the last measurement alone.
#[tokio::test]
async fn no_publish_passes_the_hubs_limit_while_the_backlog_is_measured() {
    let dir = tempfile::tempdir().unwrap();
    let store = std::sync::Arc::new(GatedStore::open(
        dir.path(),
        tokio::sync::Semaphore::MAX_PERMITS,
    ));
    let mut options = knooppunt_broker::HubOptions::new(knooppunt_broker::Authentication::Disabled);
    options.backlog = knooppunt_broker::BacklogOptions {
        max_bytes: 10_000,
        check_interval: Duration::from_secs(3600),
        ..Default::default()
    };
    let hub = knooppunt_broker::Hub::open(store.clone(), options)
        .await
        .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(knooppunt_broker::serve(
        listener,
        hub,
        std::future::pending(),
    ));
    let client = reqwest::Client::new();
    let created = client
        .post(format!("{base}/v1/subscriptions"))
        .json(&json!({"protocol": "HTTP", "types": [TYPE],
                      "config": {"delivery": "pull", "ordering": "unordered"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201, "{}", created.text().await.unwrap());
    let publish = |id: &'static str| {
        let client = client.clone();
        let url = format!("{base}/v1/events");
        let mut event = event(id);
        event["data"] = json!("x".repeat(4000));
        async move {
            client
                .post(url)
                .header("content-type", "application/cloudevents+json")
                .body(event.to_string())
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        }
    };
    // Three events of about 4 KB pass the 10 KB limit (the estimate admits the third).
    for id in ["a", "b", "c"] {
        assert_eq!(publish(id).await, 202, "{id}");
    }
    store
        .hold_stats
        .store(true, std::sync::atomic::Ordering::SeqCst);
    // The fourth finds the hub full and measures it; the store holds the measurement.
    let fourth = tokio::spawn(publish("d"));
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while store
        .stats_waiting
        .load(std::sync::atomic::Ordering::SeqCst)
        == 0
    {
        assert!(std::time::Instant::now() < deadline, "never measured");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let fifth = tokio::spawn(publish("e"));
    let early = tokio::time::timeout(Duration::from_millis(500), async {
        while !fifth.is_finished() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    if early.is_ok() {
        panic!(
            "a publish was answered {} while the backlog was measured",
            fifth.await.unwrap()
        );
    }
    store.stats_gate.add_permits(10);
    assert_eq!(fourth.await.unwrap(), 503);
    assert_eq!(fifth.await.unwrap(), 503);
}
