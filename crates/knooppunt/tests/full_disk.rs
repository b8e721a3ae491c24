//! A hub whose disk fills up and is freed again recovers by itself: the real binary on a
//! real 20 MiB tmpfs, an ordered and an unordered push subscription, filled until
//! publishers get 503, then the ballast removed. Without a restart the hub takes events
//! again, every queue moves again, and a canary reaches both subscribers; while publishes
//! are refused `/v1/status` says `accepting: false`.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::{HubProcess, config_with_admin};
use knooppunt_tests::sink::{Reply, Sink};
use serde_json::{Value, json};

const TOKEN: &str = "disk-admin";
const TYPE: &str = "nl.test.disk";
const SIZE_MIB: u64 = 20;

/// A tmpfs of [`SIZE_MIB`] mounted on a fresh directory, unmounted when dropped.
struct Tmpfs {
    path: PathBuf,
}

impl Tmpfs {
    fn mount(path: &Path) -> Tmpfs {
        std::fs::create_dir_all(path).unwrap();
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={SIZE_MIB}m"), "tmpfs"])
            .arg(path)
            .status()
            .expect("mount(8) runs");
        assert!(
            status.success(),
            "mounting a tmpfs needs root (CAP_SYS_ADMIN), which this test requires"
        );
        Tmpfs {
            path: path.to_owned(),
        }
    }

    fn free_bytes(&self) -> u64 {
        let output = Command::new("df")
            .args(["--output=avail", "-B1"])
            .arg(&self.path)
            .output()
            .unwrap();
        let text = String::from_utf8(output.stdout).unwrap();
        text.lines().nth(1).unwrap().trim().parse().unwrap()
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.path).status();
    }
}

async fn publish(client: &reqwest::Client, events_url: &str, id: &str, bytes: usize) -> u16 {
    let event = json!({"specversion": "1.0", "id": id, "source": "urn:nld:disk",
                       "type": TYPE, "data": "x".repeat(bytes)});
    client
        .post(events_url)
        .bearer_auth(TOKEN)
        .header("content-type", "application/cloudevents+json")
        .body(event.to_string())
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

async fn subscribe(
    client: &reqwest::Client,
    hub: &HubProcess,
    sink: &Sink,
    ordering: &str,
) -> String {
    common::subscribe(client, hub, TOKEN, (&sink.url, TYPE), ordering).await
}

async fn get(client: &reqwest::Client, hub: &HubProcess, path: &str) -> (u16, Value) {
    let answer = client
        .get(hub.url(path))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    (answer.status().as_u16(), answer.json().await.unwrap())
}

async fn sink() -> Sink {
    let sink = Sink::start_for_any_hub().await;
    sink.answer_always(Reply::status(204));
    sink
}

fn arrived(sink: &Sink, id: &str) -> bool {
    sink.deliveries()
        .iter()
        .any(|d| d.status / 100 == 2 && d.json()["id"] == id)
}

/// Publishes 8 KiB events from four publishers until the hub refuses one with 503 (the
/// disk is full); how many it accepted.
async fn fill(client: &reqwest::Client, hub: &HubProcess, round: usize) -> usize {
    let accepted = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let refused = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut publishers = tokio::task::JoinSet::new();
    for publisher in 0..4 {
        let (client, url) = (client.clone(), hub.url("/v1/events"));
        let (accepted, refused) = (accepted.clone(), refused.clone());
        publishers.spawn(async move {
            // Bounded: 20 MiB holds at most about 2,500 such events.
            for n in 0..2_000 {
                if refused.load(std::sync::atomic::Ordering::SeqCst) {
                    return;
                }
                let id = format!("fill-{round}-{publisher}-{n}");
                match publish(&client, &url, &id, 8 * 1024).await {
                    202 => {
                        accepted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    }
                    503 => {
                        refused.store(true, std::sync::atomic::Ordering::SeqCst);
                        return;
                    }
                    other => panic!("a publish was answered {other}"),
                }
            }
        });
    }
    while publishers.join_next().await.is_some() {}
    assert!(
        refused.load(std::sync::atomic::Ordering::SeqCst),
        "the disk never filled up"
    );
    accepted.load(std::sync::atomic::Ordering::SeqCst)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deliveries_resume_without_a_restart_once_a_full_disk_is_freed() {
    let dir = tempfile::tempdir().unwrap();
    let disk = Tmpfs::mount(&dir.path().join("disk"));
    let config = config_with_admin(dir.path(), TOKEN);
    let mut text = std::fs::read_to_string(&config).unwrap();
    // Only the disk itself refuses: no floor kept free, no backlog limit.
    text.push_str("\n[backlog]\ncheck_interval = \"PT0.1S\"\nmin_free_bytes = 0\n");
    std::fs::write(&config, text).unwrap();
    let hub = HubProcess::start(&config, &disk.path.join("hub"));
    let client = reqwest::Client::new();
    let (ordered_sink, unordered_sink) = (sink().await, sink().await);
    let ordered = subscribe(&client, &hub, &ordered_sink, "ordered").await;
    let unordered = subscribe(&client, &hub, &unordered_sink, "unordered").await;

    for round in 0..2 {
        // Ballast takes most of the room, so that a few hundred events fill the rest.
        let ballast = disk.path.join("ballast");
        let room = disk.free_bytes().saturating_sub(4 << 20);
        std::fs::write(&ballast, vec![0u8; room as usize]).unwrap();
        let accepted = fill(&client, &hub, round).await;
        assert!(
            accepted > 0,
            "round {round}: nothing was accepted before the disk filled"
        );

        // While publishes are refused, the hub says so.
        let (_, status) = get(&client, &hub, "/v1/status").await;
        assert_eq!(status["accepting"], false, "round {round}: {status}");
        let (ready, _) = get(&client, &hub, "/readyz").await;
        assert_eq!(
            ready, 503,
            "round {round}: a store that takes no writes is not ready"
        );

        std::fs::remove_file(&ballast).unwrap();
        // The hub finds out by itself that the disk takes writes again.
        let canary = format!("canary-{round}");
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            match publish(&client, &hub.url("/v1/events"), &canary, 100).await {
                202 => break,
                503 => {}
                other => panic!("round {round}: the canary was answered {other}"),
            }
            assert!(
                Instant::now() < deadline,
                "round {round}: the canary is still refused"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let (_, status) = get(&client, &hub, "/v1/status").await;
        assert_eq!(status["accepting"], true, "round {round}: {status}");

        // Both queues move again: the canary arrives, and nothing stays pending.
        let deadline = Instant::now() + Duration::from_secs(60);
        for (name, sink, id) in [
            ("ordered", &ordered_sink, &ordered),
            ("unordered", &unordered_sink, &unordered),
        ] {
            loop {
                let (_, stats) =
                    get(&client, &hub, &format!("/v1/subscriptions/{id}/status")).await;
                if arrived(sink, &canary) && stats["backlog"] == 0 {
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "round {round}: the {name} subscription does not move: {stats}"
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        let (ready, checks) = get(&client, &hub, "/readyz").await;
        assert_eq!(ready, 200, "round {round}: {checks}");
    }
    let log = hub.log().join("\n");
    assert!(
        log.contains("The event log takes writes again"),
        "the recovery is in the log"
    );
}
