//! `knooppunt-bench`: measures the hub on loopback next to a baseline measured in the same
//! run on the same machine. Every workload is bounded in time and stops by itself.
//!
//! `cargo run --release -p knooppunt-bench -- ingest --seconds 10 --connections 64`

#![allow(clippy::print_stdout)]

mod approvals;
mod brokers;
mod compare;
mod deliver;
mod fanout;
mod identity;
mod load;
mod outage;
mod pending;
mod postgres;
mod pull;
mod tenants;

/// The same allocator as the `knooppunt` binary, so that the numbers are the hub's.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::sync::Arc;
use std::time::Duration;

use axum::routing::post;
use clap::{Parser, Subcommand};
use knooppunt_broker::{Authentication, Hub, HubOptions, Principal, Role, hash_token};
use knooppunt_store_embedded::EmbeddedStore;
use load::{Request, Summary};

/// Load workloads against a real hub on 127.0.0.1, each next to its baseline.
#[derive(Debug, Parser)]
struct Cli {
    #[command(subcommand)]
    workload: Workload,
}

#[derive(Debug, Subcommand)]
enum Workload {
    /// Durable ingest: 1 KiB structured events from many connections, acknowledged events/s
    /// and latency, next to a trivial axum server that answers 204.
    Ingest {
        /// How long each measurement runs.
        #[arg(long, default_value_t = 10)]
        seconds: u64,
        /// Concurrent connections.
        #[arg(long, default_value_t = 64)]
        connections: usize,
        /// Size of each event's JSON, in bytes.
        #[arg(long, default_value_t = 1024)]
        event_bytes: usize,
        /// Subscriptions on the hub (every event matches one of them).
        #[arg(long, default_value_t = 100)]
        subscriptions: usize,
        /// Measure the hub only (for profiling).
        #[arg(long)]
        skip_baseline: bool,
        /// Seconds of load sent to each server first and not counted (caches, allocator and
        /// in-memory indexes warm up).
        #[arg(long, default_value_t = 3)]
        warmup_seconds: u64,
    },
    /// What approval by the data owner costs: ingest with a catalog and many subscriptions,
    /// every entry open, next to half the subscriptions approval-bound (and granted).
    Approvals {
        /// How long each measurement runs.
        #[arg(long, default_value_t = 10)]
        seconds: u64,
        /// Concurrent connections.
        #[arg(long, default_value_t = 64)]
        connections: usize,
        /// Size of each event's JSON, in bytes.
        #[arg(long, default_value_t = 1024)]
        event_bytes: usize,
        /// Subscriptions on the hub (every event matches one in a hundred).
        #[arg(long, default_value_t = 10_000)]
        subscriptions: usize,
        /// Catalog entries (100 cover the bench's event types).
        #[arg(long, default_value_t = 1000)]
        entries: usize,
        /// Each configuration is measured this many times, alternating.
        #[arg(long, default_value_t = 2)]
        rounds: usize,
        /// Seconds of load first, not counted.
        #[arg(long, default_value_t = 3)]
        warmup_seconds: u64,
    },
    /// What authenticating publishers costs: ingest with a token the hub issued, an ES256
    /// and an RS256 access token of trusted issuers (a JWKS served here), one hub.
    Identity {
        /// How long each measurement runs.
        #[arg(long, default_value_t = 10)]
        seconds: u64,
        /// Concurrent connections.
        #[arg(long, default_value_t = 64)]
        connections: usize,
        /// Size of each event's JSON, in bytes.
        #[arg(long, default_value_t = 1024)]
        event_bytes: usize,
        /// Subscriptions on the hub (every event matches one of them).
        #[arg(long, default_value_t = 100)]
        subscriptions: usize,
        /// Seconds of load first, not counted.
        #[arg(long, default_value_t = 3)]
        warmup_seconds: u64,
    },
    /// Pull delivery: events received and acknowledged by 1, 4 and 16 consumers of a pull
    /// subscription while a publisher publishes, next to push delivery to one sink in the
    /// same run; then the latency of a waiting receive when caught up.
    Pull {
        /// How long each measurement runs.
        #[arg(long, default_value_t = 10)]
        seconds: u64,
        /// Concurrent publishing connections.
        #[arg(long, default_value_t = 16)]
        connections: usize,
        /// Size of each event's JSON, in bytes.
        #[arg(long, default_value_t = 1024)]
        event_bytes: usize,
        /// Events published one at a time for the caught-up latency.
        #[arg(long, default_value_t = 500)]
        trickle_events: usize,
    },
    /// Ingest and deliver against one and two hubs sharing a PostgreSQL database (a
    /// throwaway cluster started here; Debian's postgresql package), next to one hub on the
    /// embedded store, in the same run.
    Postgres {
        /// How long each measurement runs.
        #[arg(long, default_value_t = 10)]
        seconds: u64,
        /// Concurrent connections (spread over the hubs).
        #[arg(long, default_value_t = 64)]
        connections: usize,
        /// Size of each event's JSON, in bytes.
        #[arg(long, default_value_t = 1024)]
        event_bytes: usize,
        /// Subscriptions for the ingest measurement (every event matches one of them).
        #[arg(long, default_value_t = 100)]
        subscriptions: usize,
        /// Sinks (and subscriptions) for the deliver measurement.
        #[arg(long, default_value_t = 4)]
        sinks: usize,
        /// Seconds of load first, not counted.
        #[arg(long, default_value_t = 3)]
        warmup_seconds: u64,
        /// Server settings for the database (`name=value`, repeatable), e.g. the WAL and
        /// checkpoint settings of a write-heavy installation; PostgreSQL's defaults if none.
        #[arg(long = "pg-setting")]
        pg_settings: Vec<String>,
        /// Pin the database to the last core and everything else (the hubs, the sinks, the
        /// publisher) to the others (taskset), to see how the hub does when the database
        /// does not share its CPU. The embedded store is measured on the same cores.
        #[arg(long)]
        pin_database: bool,
        /// After each PostgreSQL measurement, print the statements that took the database
        /// the most time (pg_stat_statements, loaded for the run).
        #[arg(long)]
        statements: bool,
        /// Then a backlog of this many deliveries of one subscription, queued in a burst on
        /// a fresh store after a few deliveries, drained by leases of 64 and their results
        /// through the store alone (0: not measured).
        #[arg(long, default_value_t = 50_000)]
        backlog: usize,
        /// Events per second the deliver measurement publishes, on every store alike, to
        /// compare delivery at one offered load (0: as fast as each is acknowledged, so a
        /// store that accepts faster is also given more to deliver).
        #[arg(long, default_value_t = 0)]
        publish_rate: u64,
    },
    /// End to end: 1 KiB events published to a hub with one subscription per sink, each
    /// delivered to its own sink; delivered events/s and publish-to-delivery latency, next
    /// to a plain HTTP forwarding hop (receive, POST to every sink, answer) in the same run.
    Deliver {
        /// How long each measurement publishes.
        #[arg(long, default_value_t = 10)]
        seconds: u64,
        /// Concurrent publishing connections.
        #[arg(long, default_value_t = 16)]
        connections: usize,
        /// Sinks (and subscriptions): every event is delivered to each.
        #[arg(long, default_value_t = 4)]
        sinks: usize,
        /// Size of each event's JSON, in bytes.
        #[arg(long, default_value_t = 1024)]
        event_bytes: usize,
        /// Also measure both at this fraction of the rate the hop was published at (e.g.
        /// 0.5): a fixed rate, for the latency when the hub is not saturated.
        #[arg(long)]
        hop_fraction: Option<f64>,
    },
    /// Delivery to an MQTT 5 broker (Debian's Mosquitto) next to `mosquitto_pub`, in the
    /// same run: deliveries/s and the hub's CPU per delivery (see `brokers`).
    Mqtt(brokers::mqtt::Args),
    /// Delivery to an AMQP 1.0 broker (Debian's RabbitMQ) next to Apache Qpid Proton.
    Amqp(brokers::Shape),
    /// Delivery to a NATS server (Debian's nats-server, JetStream on) next to nats-py.
    Nats(brokers::nats::Args),
    /// Fan-out: one event matched by many subscriptions (ordered, the default), spread over
    /// a few loopback sinks; the time until every delivery arrived and the hub's peak
    /// resident memory (the hub runs in a child process).
    Fanout {
        /// Subscriptions, every one matching the event.
        #[arg(long, default_value_t = 10_000)]
        subscriptions: usize,
        /// Sink servers the subscriptions are spread over (one path each).
        #[arg(long, default_value_t = 50)]
        sinks: usize,
        /// Size of the event's JSON, in bytes.
        #[arg(long, default_value_t = 1024)]
        event_bytes: usize,
        /// Give up after this many seconds.
        #[arg(long, default_value_t = 180)]
        limit_seconds: u64,
    },
    /// Memory per pending delivery: a pull subscription nobody pulls collects this many
    /// deliveries; the hub's resident memory after a restart, against the same hub with
    /// only the subscription (the hub runs in a child process).
    Pending {
        /// Pending deliveries (one per event).
        #[arg(long, default_value_t = 1_000_000)]
        events: u64,
        /// Events per published batch.
        #[arg(long, default_value_t = 500)]
        batch: u64,
    },
    /// Outage isolation: events at a steady rate to two sinks, first both up, then one
    /// answering 503; the healthy one's latency and the attempts at the failing one.
    Outage {
        /// How long each phase publishes.
        #[arg(long, default_value_t = 30)]
        seconds: u64,
        /// Events per second to each subscription.
        #[arg(long, default_value_t = 100)]
        rate: u64,
        /// Also run the hub with its breaker disabled, as a comparison.
        #[arg(long)]
        compare_without_breaker: bool,
    },
    /// Run a hub on a fresh store in the given directory, print its base URL and serve
    /// until killed (the `fanout` workload's hub process).
    HubProcess {
        #[arg(long)]
        data: std::path::PathBuf,
        /// Failures in a row that open a sink's breaker (a huge number disables it).
        #[arg(long, default_value_t = 5)]
        breaker_failures: u32,
    },
    /// Generate load against a URL and print a JSON summary. The `ingest` workload runs this
    /// as a child process, so that the client never shares a runtime with the servers.
    Load {
        #[arg(long)]
        url: String,
        #[arg(long)]
        seconds: u64,
        #[arg(long)]
        connections: usize,
        #[arg(long)]
        event_bytes: usize,
        /// Bearer token to send.
        #[arg(long)]
        token: Option<String>,
        /// The status that counts as acknowledged.
        #[arg(long)]
        expect: u16,
        /// Put the send time (microseconds since the Unix epoch) in each event's `subject`.
        #[arg(long)]
        stamp: bool,
        /// Requests per second over all connections (fixed rate); as fast as answered
        /// when absent.
        #[arg(long)]
        rate: Option<f64>,
    },
    /// This working tree's bench against `reference`'s (a commit, branch or tag), built into
    /// a target directory of its own and run interleaved on this machine: both outputs, the
    /// ratio of every figure they share, and the CPU each run used. Build this one with
    /// `cargo build --release -p knooppunt-bench` first.
    Compare {
        /// The commit to compare with (the one the issue started from).
        reference: String,
        /// The workloads, comma-separated. `ingest-one-client`: each side's hub (with
        /// `--subscriptions`, 100 by default), then trivial axum, under this tree's load
        /// client, every event new (older clients repeated their warm-up's event ids, so
        /// part of what they measured were duplicates); with `--rate`, each hub is offered
        /// that many events/s and its CPU per event is the figure to compare (steadier on a
        /// busy machine than a rate at saturation). `deliver-one-client`: each side's
        /// hub with `--sinks` subscriptions (16 by default) to sinks in a process of this tree,
        /// under this tree's client (`--rate` events/s if given), `--ordering unordered`
        /// (the default) or `ordered`: the time and the hub's CPU to deliver all of
        /// `--seconds` of publishing, whatever each hub's pacing.
        #[arg(
            long,
            default_value = "ingest-one-client,deliver",
            value_delimiter = ','
        )]
        workloads: Vec<String>,
        /// How many times each runs with each binary, alternately.
        #[arg(long, default_value_t = 2)]
        rounds: usize,
        /// Arguments passed on to every workload (after `--`).
        #[arg(last = true)]
        extra: Vec<String>,
    },
    /// Whether other principals' costly filters slow a principal's events: the publish
    /// latency of events with a large subject, alone, next to `noisy` other principals'
    /// `costly` subscriptions each whose LIKE scans the subject, under the default budgets
    /// (per principal and per event), without the per-event one, and without either.
    Tenants {
        /// How many other principals have costly subscriptions.
        #[arg(long, default_value_t = 1)]
        noisy: usize,
        /// Each other principal's costly subscriptions.
        #[arg(long, default_value_t = 1000)]
        costly: usize,
        /// The CESQL filter of each costly subscription (it must not match the events:
        /// `LOWER(subject) LIKE '%y%z%'` costs more time per unit than the default).
        #[arg(long, default_value = "subject LIKE '%y%z%'")]
        filter: String,
        /// Events published (one at a time) per measurement.
        #[arg(long, default_value_t = 20)]
        events: usize,
        /// The events' subject, in bytes.
        #[arg(long, default_value_t = 1_000_000)]
        subject_bytes: usize,
    },
    /// Sinks in a process of their own, for `compare`'s `deliver-one-client`: they answer
    /// every delivery 204 and count it; the control address printed first answers `GET /`
    /// with the count so far and `GET /sinks` with the sinks' URLs. Serves until killed.
    SinkProcess {
        #[arg(long, default_value_t = 16)]
        sinks: usize,
    },
    /// Run the trivial axum server (POST / answers 204) alone, until interrupted, to load it
    /// from another process (wrk, say) next to `knooppunt serve`.
    TrivialServer {
        /// Where to listen.
        #[arg(long, default_value = "127.0.0.1:18091")]
        listen: std::net::SocketAddr,
    },
}

const TOKEN: &str = "bench-token";

/// Event `n` of load run `run` (every run its own ids: a warm-up's events are no duplicates
/// of the measurement's), `size` bytes of JSON.
fn event_body(run: u64, n: u64, size: usize, subject: u64) -> String {
    let head = format!(
        r#"{{"specversion":"1.0","id":"bench-{run:x}-{n}","source":"urn:nld:oin:00000001823288444000:systeem:bench","type":"nl.bench.type{}","subject":"{subject}","data":{{"filler":""#,
        n % 100
    );
    let tail = "\"}}";
    let filler = size.saturating_sub(head.len() + tail.len());
    format!("{head}{}{tail}", "x".repeat(filler))
}

fn print(name: &str, summary: &Summary) {
    println!(
        "{name:<28} {:>10.0}/s {:>9.2} ms {:>9.2} ms {:>8} {:>6} {:>8.1} µs",
        summary.rate,
        summary.p50_ms,
        summary.p99_ms,
        summary.acknowledged,
        summary.failed,
        summary.server_cpu_us
    );
}

/// The settings every load run shares.
#[derive(Debug, Clone, Copy)]
struct Shape {
    seconds: u64,
    connections: usize,
    event_bytes: usize,
}

/// Warms a server up for `warmup` seconds, then measures it.
async fn measure(
    shape: Shape,
    warmup: u64,
    url: &str,
    token: Option<&str>,
    expect: u16,
) -> anyhow::Result<Summary> {
    if warmup > 0 {
        let warm = Shape {
            seconds: warmup,
            ..shape
        };
        load_from_child(warm, url, token, expect).await?;
    }
    load_from_child(shape, url, token, expect).await
}

/// Runs `knooppunt-bench load` as a child process and reads its summary.
async fn load_from_child(
    shape: Shape,
    url: &str,
    token: Option<&str>,
    expect: u16,
) -> anyhow::Result<Summary> {
    load_child(shape, url, token, expect, false, None).await
}

async fn load_child(
    shape: Shape,
    url: &str,
    token: Option<&str>,
    expect: u16,
    stamp: bool,
    rate: Option<f64>,
) -> anyhow::Result<Summary> {
    // Like `taskset -c <last core> wrk -t1`: the client keeps to one core, where it exists.
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let pinned = cores > 1 && std::path::Path::new("/usr/bin/taskset").exists();
    let mut command = if pinned {
        let mut command = tokio::process::Command::new("/usr/bin/taskset");
        command.args(["-c", &(cores - 1).to_string()]);
        command.arg(std::env::current_exe()?);
        command
    } else {
        tokio::process::Command::new(std::env::current_exe()?)
    };
    command.args([
        "load",
        "--url",
        url,
        "--seconds",
        &shape.seconds.to_string(),
        "--connections",
        &shape.connections.to_string(),
        "--event-bytes",
        &shape.event_bytes.to_string(),
        "--expect",
        &expect.to_string(),
    ]);
    if let Some(token) = token {
        command.args(["--token", token]);
    }
    if stamp {
        command.arg("--stamp");
    }
    if let Some(rate) = rate {
        command.args(["--rate", &rate.to_string()]);
    }
    let before = own_cpu_seconds();
    let output = command.output().await?;
    let cpu = own_cpu_seconds() - before;
    anyhow::ensure!(
        output.status.success(),
        "the load generator failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let mut summary: Summary = serde_json::from_slice(&output.stdout)?;
    if summary.acknowledged > 0 {
        summary.server_cpu_us = cpu * 1e6 / summary.acknowledged as f64;
    }
    Ok(summary)
}

/// The CPU time (user + system, seconds) this process has used, from `/proc/self/stat`
/// (0 where there is none): the servers of a workload run here, their load elsewhere.
fn own_cpu_seconds() -> f64 {
    proc_self_cpu(14)
}

/// Two adjacent tick counts of `/proc/self/stat` from field `first` (1-based: 14 is
/// utime and stime, 16 cutime and cstime) added up, in seconds; 0 where there is none.
fn proc_self_cpu(first: usize) -> f64 {
    proc_cpu("/proc/self/stat", first)
}

/// As [`proc_self_cpu`], of the process whose `stat` file is `path`.
pub(crate) fn proc_cpu(path: &str, first: usize) -> f64 {
    let Ok(stat) = std::fs::read_to_string(path) else {
        return 0.0;
    };
    // The fields after the command name, which is in parentheses and may hold spaces.
    let rest = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // `rest` starts at field 3.
    let ticks = |n: usize| {
        fields
            .get(n - 3)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (ticks(first) + ticks(first + 1)) / 100.0
}

fn trivial_router() -> axum::Router {
    axum::Router::new()
        .route("/", post(|| async { axum::http::StatusCode::NO_CONTENT }))
        .route(
            "/read",
            post(|body: axum::body::Bytes| async move {
                let receipt = serde_json::json!({"received": body.len(), "duplicate": false});
                (axum::http::StatusCode::ACCEPTED, axum::Json(receipt))
            }),
        )
}

async fn trivial_server() -> anyhow::Result<String> {
    let router = trivial_router();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/", listener.local_addr()?);
    tokio::spawn(async move { axum::serve(listener, router).await });
    Ok(url)
}

async fn hub(data: &std::path::Path, subscriptions: usize) -> anyhow::Result<String> {
    hub_with(data, ingest_subscriptions(subscriptions)).await
}

/// The `ingest` workload's subscriptions: each event matches one; their sink never answers,
/// so nothing is delivered.
fn ingest_subscriptions(count: usize) -> Vec<serde_json::Value> {
    (0..count)
        .map(|i| {
            serde_json::json!({"sink": "http://127.0.0.1:9/", "protocol": "HTTP",
                               "types": [format!("nl.bench.type{}", i % 100)]})
        })
        .collect()
}

/// The `deliver` workload's subscriptions: one per sink, every event matching each,
/// unordered.
pub(crate) fn deliver_subscriptions(urls: &[String]) -> Vec<serde_json::Value> {
    ordering_subscriptions(urls, "unordered")
}

/// One subscription per sink, every event matching each, with this `ordering`.
pub(crate) fn ordering_subscriptions(urls: &[String], ordering: &str) -> Vec<serde_json::Value> {
    urls.iter()
        .map(|url| {
            serde_json::json!({"sink": url, "protocol": "HTTP",
                               "filters": [{"prefix": {"type": "nl.bench."}}],
                               "config": {"ordering": ordering}})
        })
        .collect()
}

/// Publishes to `url` (several, comma-separated) for the shape's time, waits up to `drain`
/// for the deliveries to `sinks` sinks, prints a line and returns the deliveries per second
/// that arrived while publishing, and the events per second published; at `rate` events
/// per second when given.
async fn measure_delivery(
    name: &str,
    shape: Shape,
    sinks: usize,
    (url, token): (&str, Option<&str>),
    record: &deliver::Record,
    drain: Duration,
    rate: Option<f64>,
) -> anyhow::Result<(f64, f64)> {
    record.start();
    let published = load_child(shape, url, token, 202, true, rate).await?;
    let in_window = record.delivered();
    let expected = published.acknowledged * sinks as u64;
    deliver::drain(record, expected, drain).await;
    record.stop();
    let (p50, p99) = record.percentiles();
    println!(
        "{name:<30} {:>9.0}/s {:>11.0}/s {:>7.2} ms {:>7.2} ms {:>9}",
        published.rate,
        in_window as f64 / shape.seconds as f64,
        p50,
        p99,
        expected.saturating_sub(record.delivered())
    );
    Ok((in_window as f64 / shape.seconds as f64, published.rate))
}

/// The hub's default settings with the bench principal.
/// The organisation whose source space (`urn:nld:oin:<OIN>:`) the bench's events are in.
const BENCH_OIN: &str = "00000001823288444000";

fn hub_options() -> HubOptions {
    let principal = Principal {
        name: "bench".into(),
        roles: [Role::Publisher, Role::Subscriber, Role::Admin].into(),
        subscribe_type_prefixes: Vec::new(),
        publish_source_prefixes: Vec::new(),
        oin: None,
    };
    let mut options = HubOptions::new(Authentication::tokens([(hash_token(TOKEN), principal)]));
    // The bench's sinks are on loopback.
    options.delivery.sink_networks =
        knooppunt_broker::SinkNetworks::parse(&["127.0.0.0/8".into()]).expect("a CIDR");
    // One principal owns every subscription of a workload (`fanout` makes 10,000 and more):
    // the per-principal quotas are lifted, as an operator would for such a principal.
    options.quotas = knooppunt_broker::Quotas {
        max_subscriptions: 1_000_000,
        max_filter_bytes: 1 << 30,
    };
    options
}

/// A hub on a fresh store with these subscriptions (created through the API).
async fn hub_with(
    data: &std::path::Path,
    subscriptions: Vec<serde_json::Value>,
) -> anyhow::Result<String> {
    hub_with_options(data, subscriptions, hub_options()).await
}

async fn hub_with_options(
    data: &std::path::Path,
    subscriptions: Vec<serde_json::Value>,
    options: HubOptions,
) -> anyhow::Result<String> {
    let store = EmbeddedStore::open(data)?;
    hub_on(Arc::new(store), subscriptions, options).await
}

/// A hub on `store` with these subscriptions (created through its API).
/// The hubs this process serves (their stop signal and task), so that a workload can stop
/// them between measurements: a hub left running keeps working (retries, measurements,
/// sweeps) on the CPU the next measurement needs.
type Running = Vec<(
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<std::io::Result<()>>,
)>;
static RUNNING: std::sync::Mutex<Running> = std::sync::Mutex::new(Vec::new());

/// Stops every hub started so far and waits (up to 30 s each) until it stopped.
async fn stop_hubs() {
    let running = std::mem::take(&mut *RUNNING.lock().expect("hubs lock"));
    for (stop, served) in running {
        let _ = stop.send(());
        let _ = tokio::time::timeout(Duration::from_secs(30), served).await;
    }
}

async fn hub_on(
    store: Arc<dyn knooppunt_store::Store>,
    subscriptions: Vec<serde_json::Value>,
    options: HubOptions,
) -> anyhow::Result<String> {
    let hub = Hub::open(store, options).await?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let served = tokio::spawn(knooppunt_broker::serve(listener, hub, async {
        let _ = stopped.await;
    }));
    RUNNING.lock().expect("hubs lock").push((stop, served));
    let client = reqwest::Client::new();
    for body in subscriptions {
        let status = client
            .post(format!("{base}/v1/subscriptions"))
            .bearer_auth(TOKEN)
            .json(&body)
            .send()
            .await?
            .status();
        anyhow::ensure!(status == 201, "creating a subscription answered {status}");
    }
    Ok(base)
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    // The load generator takes one thread, like `wrk -t1`; the servers (the hub, the
    // trivial axum server and the sinks alike) run on the runtime `knooppunt serve` has
    // (`TOKIO_WORKER_THREADS` is not read: set threads for `knooppunt serve` in its
    // configuration).
    let runtime = match cli.workload {
        Workload::Load { .. } => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?,
        _ => knooppunt_broker::runtime(None)?,
    };
    let outcome = runtime.block_on(async {
        match cli.workload {
            Workload::SinkProcess { sinks } => deliver::sink_process(sinks).await?,
            Workload::TrivialServer { listen } => {
                let listener = tokio::net::TcpListener::bind(listen).await?;
                println!("trivial server on http://{listen}/ (POST / → 204, POST /read → 202)");
                axum::serve(listener, trivial_router()).await?;
            }
            Workload::Ingest {
                seconds,
                connections,
                event_bytes,
                subscriptions,
                skip_baseline,
                warmup_seconds,
            } => {
                let shape = Shape {
                    seconds,
                    connections,
                    event_bytes,
                };
                println!(
                    "ingest: {connections} connections, {event_bytes}-byte events, {seconds} s each \
                     after {warmup_seconds} s of warm-up, {subscriptions} subscriptions, {} cores; \
                     the client runs in its own process",
                    std::thread::available_parallelism().map_or(0, |n| n.get())
                );
                println!(
                    "{:<28} {:>12} {:>12} {:>12} {:>8} {:>6} {:>11}",
                    "", "rate", "p50", "p99", "acked", "failed", "CPU/event"
                );
                let baseline = if skip_baseline {
                    None
                } else {
                    let trivial = trivial_server().await?;
                    let baseline = measure(shape, warmup_seconds, &trivial, None, 204).await?;
                    print("trivial axum (204)", &baseline);
                    let reading = format!("{trivial}read");
                    let reading = measure(shape, warmup_seconds, &reading, None, 202).await?;
                    print("axum reading body (202 JSON)", &reading);
                    Some(baseline)
                };
                let data = tempfile::tempdir()?;
                let base = hub(data.path(), subscriptions).await?;
                let url = format!("{base}/v1/events");
                let ingest = measure(shape, warmup_seconds, &url, Some(TOKEN), 202).await?;
                print("knooppunt durable ingest", &ingest);
                if let Some(baseline) = &baseline {
                    println!(
                        "durable ingest / trivial server: {:.0}%",
                        100.0 * ingest.rate / baseline.rate
                    );
                }
            }
            Workload::Compare {
                reference,
                workloads,
                rounds,
                extra,
            } => {
                compare::compare(&reference, &workloads, rounds, &extra)?;
            }
            Workload::Tenants {
                noisy,
                costly,
                filter,
                events,
                subject_bytes,
            } => {
                tenants::run((noisy, costly, &filter), events, subject_bytes).await?;
            }
            Workload::Approvals {
                seconds,
                connections,
                event_bytes,
                subscriptions,
                entries,
                rounds,
                warmup_seconds,
            } => {
                let shape = Shape {
                    seconds,
                    connections,
                    event_bytes,
                };
                approvals::run(shape, warmup_seconds, subscriptions, entries, rounds).await?;
            }
            Workload::Identity {
                seconds,
                connections,
                event_bytes,
                subscriptions,
                warmup_seconds,
            } => {
                let shape = Shape {
                    seconds,
                    connections,
                    event_bytes,
                };
                identity::run(shape, warmup_seconds, subscriptions).await?;
            }
            Workload::Postgres {
                seconds,
                connections,
                event_bytes,
                subscriptions,
                sinks,
                warmup_seconds,
                pg_settings,
                pin_database,
                statements,
                backlog,
                publish_rate,
            } => {
                let shape = Shape {
                    seconds,
                    connections,
                    event_bytes,
                };
                let setup = postgres::Setup {
                    settings: pg_settings,
                    pin_database,
                    statements,
                    backlog,
                    publish_rate,
                };
                postgres::run(shape, warmup_seconds, subscriptions, sinks, &setup).await?;
            }
            Workload::Deliver {
                seconds,
                connections,
                sinks,
                event_bytes,
                hop_fraction,
            } => {
                let shape = Shape {
                    seconds,
                    connections,
                    event_bytes,
                };
                run_deliver(shape, sinks, hop_fraction).await?;
            }
            Workload::Pull {
                seconds,
                connections,
                event_bytes,
                trickle_events,
            } => {
                let shape = Shape {
                    seconds,
                    connections,
                    event_bytes,
                };
                pull::run(shape, trickle_events).await?;
            }
            Workload::Fanout {
                subscriptions,
                sinks,
                event_bytes,
                limit_seconds,
            } => {
                fanout::run(
                    subscriptions,
                    sinks,
                    event_bytes,
                    Duration::from_secs(limit_seconds),
                )
                .await?;
            }
            Workload::Mqtt(args) => {
                tokio::task::spawn_blocking(move || brokers::mqtt::run(args)).await??;
            }
            Workload::Amqp(shape) => {
                tokio::task::spawn_blocking(move || brokers::amqp::run(shape)).await??;
            }
            Workload::Nats(args) => {
                tokio::task::spawn_blocking(move || brokers::nats::run(args)).await??;
            }
            Workload::Pending { events, batch } => {
                pending::run(events, batch).await?;
            }
            Workload::Outage {
                seconds,
                rate,
                compare_without_breaker,
            } => {
                if compare_without_breaker {
                    outage::run(seconds, rate, u32::MAX).await?;
                }
                outage::run(seconds, rate, 5).await?;
            }
            Workload::HubProcess {
                data,
                breaker_failures,
            } => {
                let mut options = hub_options();
                options.delivery.connections.breaker_failures = breaker_failures;
                let base = hub_with_options(&data, Vec::new(), options).await?;
                println!("{base}");
                std::future::pending::<()>().await;
            }
            Workload::Load {
                url,
                seconds,
                connections,
                event_bytes,
                token,
                expect,
                stamp,
                rate,
            } => {
                let run = deliver::now_us();
                let report = load::run(
                    Request {
                        url,
                        content_type: "application/cloudevents+json",
                        token,
                        body: Arc::new(move |n| {
                            let subject = if stamp { deliver::now_us() } else { n };
                            event_body(run, n, event_bytes, subject)
                        }),
                        expect,
                        rate,
                    },
                    connections,
                    Duration::from_secs(seconds),
                )
                .await;
                println!("{}", serde_json::to_string(&report.summary())?);
            }
        }
        anyhow::Ok(())
    });
    // The workloads' hubs are dropped with the runtime. Closing a store whose receipt
    // writer is flushing sled has hung there (sled 0.34's flush waiting for a write that
    // never comes; `deliver --seconds 1 --sinks 1`, most runs, the hub stopped first or
    // not). The store gives up on it after 10 s (`receipts::CLOSE_WAIT`); the bench does
    // not wait that long.
    runtime.shutdown_timeout(Duration::from_secs(5));
    outcome
}

/// The `deliver` workload: the forwarding hop first, then the hub, each with fresh sinks.
async fn run_deliver(shape: Shape, sinks: usize, hop_fraction: Option<f64>) -> anyhow::Result<()> {
    println!(
        "deliver: {} publishing connections, {}-byte events, {} s each, {sinks} sinks (every event \
         to each), {} cores; the publisher runs in its own process",
        shape.connections,
        shape.event_bytes,
        shape.seconds,
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!(
        "{:<30} {:>11} {:>13} {:>10} {:>10} {:>9}",
        "", "published", "delivered", "p50", "p99", "backlog"
    );
    let drain = Duration::from_secs(30);
    let mut rates = vec![None];
    let mut hop_published = 0.0;
    let mut results = Vec::new();
    while let Some(rate) = rates.pop() {
        let label = |what: &str| match rate {
            Some(rate) => format!("{what} at {rate:.0}/s"),
            None => what.to_owned(),
        };
        let record = Arc::new(deliver::Record::default());
        let urls = deliver::sinks(sinks, &record).await?;
        let hop = deliver::forwarder(urls).await?;
        let (baseline, published) = measure_delivery(
            &label("plain forwarding hop"),
            shape,
            sinks,
            (&hop, None),
            &record,
            drain,
            rate,
        )
        .await?;
        if rate.is_none() {
            hop_published = published;
        }
        let record = Arc::new(deliver::Record::default());
        let urls = deliver::sinks(sinks, &record).await?;
        let data = tempfile::tempdir()?;
        let base = hub_with(data.path(), deliver_subscriptions(&urls)).await?;
        let (hub, _) = measure_delivery(
            &label("knooppunt (durable, unordered)"),
            shape,
            sinks,
            (&format!("{base}/v1/events"), Some(TOKEN)),
            &record,
            drain,
            rate,
        )
        .await?;
        results.push(100.0 * hub / baseline.max(1.0));
        if let (None, Some(fraction)) = (rate, hop_fraction) {
            rates.push(Some(hop_published * fraction));
        }
    }
    println!(
        "delivered: knooppunt / forwarding hop: {:.0}%{}",
        results[0],
        results
            .get(1)
            .map(|r| format!(" (at the fixed rate: {r:.0}%)"))
            .unwrap_or_default()
    );
    Ok(())
}
