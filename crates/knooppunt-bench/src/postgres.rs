//! The `postgres` workload: the ingest and deliver workloads against one and two hubs on a
//! PostgreSQL database (a throwaway cluster on this machine), next to one hub on the
//! embedded store, in the same run. With two hubs the client spreads its connections over
//! both, as a load balancer would. Each measurement's hubs are stopped before the next.

use std::sync::Arc;
use std::time::Duration;

use knooppunt_store::Store;
use knooppunt_store_postgres::{PgOptions, PgStore};
use knooppunt_test_postgres::Cluster;

use crate::{Shape, TOKEN, deliver, hub_on, hub_options, measure, print};

/// Hubs on one fresh database, each with its own store; the subscriptions are created
/// through the first. Returns their base URLs.
async fn hubs_on_postgres(
    cluster: &Cluster,
    database: &str,
    hubs: usize,
    subscriptions: Vec<serde_json::Value>,
) -> anyhow::Result<Vec<String>> {
    let url = cluster.create_database(database);
    let mut bases = Vec::new();
    for n in 0..hubs {
        let mut options = PgOptions::new(url.clone());
        options.pool_size = 16;
        let store: Arc<dyn Store> = Arc::new(PgStore::connect(&options).await?);
        let subscriptions = if n == 0 {
            subscriptions.clone()
        } else {
            Vec::new()
        };
        bases.push(hub_on(store, subscriptions, hub_options()).await?);
    }
    // The other hubs load the subscriptions (they are told at once; this is a margin).
    tokio::time::sleep(Duration::from_millis(1500)).await;
    Ok(bases)
}

/// Drops a measurement's database once its hubs stopped, so that autovacuum does not clean
/// up after it during the next measurement (it did: a `VACUUM ANALYZE` of the ingest's
/// 450,000 events ran through the deliver measurements that followed).
fn drop_database(cluster: &Cluster, database: &str) {
    cluster.psql(
        "postgres",
        &format!("DROP DATABASE {database} WITH (FORCE)"),
    );
}

fn events_urls(bases: &[String]) -> String {
    bases
        .iter()
        .map(|base| format!("{base}/v1/events"))
        .collect::<Vec<_>>()
        .join(",")
}

/// How the database runs.
pub(crate) struct Setup {
    /// Server settings (`name=value`).
    pub(crate) settings: Vec<String>,
    /// The database on the last core, the rest of the bench on the others.
    pub(crate) pin_database: bool,
    /// Print the costliest statements after each PostgreSQL measurement.
    pub(crate) statements: bool,
    /// Deliveries of the drain measurement (0: none).
    pub(crate) backlog: usize,
    /// Events per second the deliver measurement publishes (0: as fast as acknowledged).
    pub(crate) publish_rate: u64,
}

/// The statements that took the database the most time in `database` since the last call
/// (pg_stat_statements), printed; then forgotten.
fn print_statements(cluster: &Cluster, database: &str) {
    cluster.psql(
        database,
        "CREATE EXTENSION IF NOT EXISTS pg_stat_statements",
    );
    let top = cluster.psql(
        database,
        "SELECT round(s.total_exec_time)::text || ' ms', s.calls::text, \
           round((s.total_exec_time / greatest(s.calls, 1))::numeric, 3)::text || ' ms/call', \
           left(regexp_replace(s.query, '\\s+', ' ', 'g'), 110) \
         FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid \
         WHERE d.datname = current_database() \
         ORDER BY s.total_exec_time DESC LIMIT 12",
    );
    println!("  costliest statements in {database} (total, calls, per call, statement):");
    for line in top.lines() {
        println!("    {}", line.replace('|', "  "));
    }
    cluster.psql(database, "SELECT pg_stat_statements_reset()");
}

/// Runs `taskset` with these arguments; says what failed.
fn taskset(args: &[String]) -> anyhow::Result<()> {
    let output = std::process::Command::new("taskset").args(args).output()?;
    anyhow::ensure!(
        output.status.success(),
        "taskset {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(())
}

/// Pins the cluster's server processes (the postmaster and its children; backends it
/// starts later inherit it) to core `database`, and this process (all its threads, and
/// the publishers it starts later) to cores `rest`.
fn pin(cluster: &Cluster, database: usize, rest: &str) -> anyhow::Result<()> {
    let pid_file = std::fs::read_to_string(cluster.path().join("data/postmaster.pid"))?;
    let postmaster = pid_file
        .lines()
        .next()
        .unwrap_or_default()
        .trim()
        .to_owned();
    let children = std::process::Command::new("pgrep")
        .args(["-P", &postmaster])
        .output()?;
    let mut pids = vec![postmaster];
    pids.extend(
        String::from_utf8_lossy(&children.stdout)
            .split_whitespace()
            .map(str::to_owned),
    );
    for pid in pids {
        taskset(&[
            "-a".into(),
            "-p".into(),
            "-c".into(),
            database.to_string(),
            pid,
        ])?;
    }
    let me = std::process::id().to_string();
    taskset(&["-a".into(), "-p".into(), "-c".into(), rest.into(), me])
}

pub(crate) async fn run(
    shape: Shape,
    warmup: u64,
    subscriptions: usize,
    sinks: usize,
    setup: &Setup,
) -> anyhow::Result<()> {
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let mut settings: Vec<&str> = setup.settings.iter().map(String::as_str).collect();
    if setup.statements {
        settings.push("shared_preload_libraries=pg_stat_statements");
    }
    let cluster = Cluster::start_with(&settings);
    let sharing = if setup.pin_database {
        anyhow::ensure!(cores >= 2, "--pin-database needs at least 2 cores");
        let rest = if cores == 2 {
            "0".to_owned()
        } else {
            format!("0-{}", cores - 2)
        };
        pin(&cluster, cores - 1, &rest)?;
        format!(
            "the database pinned to core {} and the hubs and the client to core(s) {rest}",
            cores - 1
        )
    } else {
        format!("{cores} cores shared by the database, the hubs and the client")
    };
    println!(
        "postgres: PostgreSQL {} on this machine (synchronous_commit on; settings: {}); \
         {sharing}",
        cluster.psql("postgres", "SHOW server_version"),
        if settings.is_empty() {
            "the defaults".to_owned()
        } else {
            settings.join(" ")
        }
    );

    println!(
        "\ningest: {} connections, {}-byte events, {} s after {warmup} s of warm-up, \
         {subscriptions} subscriptions",
        shape.connections, shape.event_bytes, shape.seconds
    );
    println!(
        "{:<30} {:>12} {:>12} {:>12} {:>8} {:>6} {:>11}",
        "", "rate", "p50", "p99", "acked", "failed", "CPU/event"
    );
    let bodies = crate::ingest_subscriptions(subscriptions);
    let data = tempfile::tempdir()?;
    let base = crate::hub_with(data.path(), bodies.clone()).await?;
    let embedded = measure(
        shape,
        warmup,
        &format!("{base}/v1/events"),
        Some(TOKEN),
        202,
    )
    .await?;
    print("embedded store, 1 hub", &embedded);
    crate::stop_hubs().await;
    for hubs in [1, 2] {
        let bases =
            hubs_on_postgres(&cluster, &format!("ingest{hubs}"), hubs, bodies.clone()).await?;
        let summary = measure(shape, warmup, &events_urls(&bases), Some(TOKEN), 202).await?;
        print(
            &format!("postgres, {hubs} hub{}", if hubs == 1 { "" } else { "s" }),
            &summary,
        );
        if setup.statements {
            print_statements(&cluster, &format!("ingest{hubs}"));
        }
        crate::stop_hubs().await;
        drop_database(&cluster, &format!("ingest{hubs}"));
    }

    let rate = (setup.publish_rate > 0).then_some(setup.publish_rate as f64);
    println!(
        "\ndeliver: {} publishing connections, {}-byte events, {} s, {sinks} sinks (every event \
         to each, unordered), {}",
        shape.connections,
        shape.event_bytes,
        shape.seconds,
        rate.map_or("as fast as acknowledged".to_owned(), |r| format!(
            "{r:.0} events/s offered"
        ))
    );
    println!(
        "{:<30} {:>11} {:>13} {:>10} {:>10} {:>9}",
        "", "published", "delivered", "p50", "p99", "backlog"
    );
    for (name, hubs) in [
        ("embedded store, 1 hub", 0),
        ("postgres, 1 hub", 1),
        ("postgres, 2 hubs", 2),
    ] {
        let record = Arc::new(deliver::Record::default());
        let urls = deliver::sinks(sinks, &record).await?;
        let bodies = crate::deliver_subscriptions(&urls);
        let data = tempfile::tempdir()?;
        let bases = if hubs == 0 {
            vec![crate::hub_with(data.path(), bodies).await?]
        } else {
            hubs_on_postgres(&cluster, &format!("deliver{hubs}"), hubs, bodies).await?
        };
        let url = events_urls(&bases);
        let drain = Duration::from_secs(60);
        let target = (url.as_str(), Some(TOKEN));
        crate::measure_delivery(name, shape, sinks, target, &record, drain, rate).await?;
        if setup.statements && hubs > 0 {
            print_statements(&cluster, &format!("deliver{hubs}"));
        }
        crate::stop_hubs().await;
        if hubs > 0 {
            drop_database(&cluster, &format!("deliver{hubs}"));
        }
    }
    if setup.backlog > 0 {
        println!(
            "\ndrain: {} deliveries of one subscription queued in a burst on a fresh store \
             (after 12 single ones), leased 64 at a time and recorded delivered, store alone",
            setup.backlog
        );
        let data = tempfile::tempdir()?;
        let embedded: Arc<dyn Store> =
            Arc::new(knooppunt_store_embedded::EmbeddedStore::open(data.path())?);
        let rate = drain(embedded.as_ref(), setup.backlog).await?;
        println!("{:<30} {rate:>10.0} deliveries/s", "embedded store");
        let url = cluster.create_database("drain");
        let store: Arc<dyn Store> = Arc::new(PgStore::connect(&PgOptions::new(url)).await?);
        let rate = drain(store.as_ref(), setup.backlog).await?;
        println!("{:<30} {rate:>10.0} deliveries/s", "postgres");
        if setup.statements {
            print_statements(&cluster, "drain");
        }
    }
    Ok(())
}

/// Queues `backlog` deliveries of one unordered subscription in a burst (after a few
/// single ones, as a fresh hub sees them), then leases and records them until none is
/// left; deliveries drained per second.
async fn drain(store: &dyn Store, backlog: usize) -> anyhow::Result<f64> {
    use knooppunt_store::{Attempt, DeliveryChange, NewEvent, Verdict};
    const HOUR: u64 = 3_600_000;
    // Leased as an unordered subscription's are (the store takes the ordering per lease).
    store
        .insert_subscription(&knooppunt_store_conformance::subscription("drain"))
        .await?;
    let event = |id: String| {
        let json = format!(
            r#"{{"specversion":"1.0","id":"{id}","source":"urn:nld:drain","type":"t","data":"{}"}}"#,
            "x".repeat(900)
        );
        NewEvent {
            source: "urn:nld:drain".into(),
            id,
            json,
            extension_types: None,
            subscriptions: vec!["drain".into()],
        }
    };
    let mut now = knooppunt_store::now_ms();
    let take = async |limit: usize, now: u64| -> anyhow::Result<usize> {
        let leased = store.lease("drain", now, 60_000, limit, false).await?;
        let results = leased
            .iter()
            .map(|d| {
                DeliveryChange::Attempted(Attempt {
                    subscription: d.subscription.clone(),
                    seq: d.seq,
                    lease: d.lease,
                    at: now,
                    status: Some(204),
                    error: None,
                    verdict: Verdict::Delivered,
                    receipt: true,
                })
            })
            .collect();
        store.record_results(results).await?;
        Ok(leased.len())
    };
    for n in 0..12 {
        store
            .append_events(vec![event(format!("single-{n}"))], now, HOUR)
            .await?;
        take(1, now).await?;
    }
    for chunk in 0..backlog.div_ceil(1000) {
        let events = (0..1000.min(backlog - chunk * 1000))
            .map(|n| event(format!("burst-{chunk}-{n}")))
            .collect();
        store.append_events(events, now, HOUR).await?;
    }
    let started = std::time::Instant::now();
    let mut drained = 0;
    while drained < backlog {
        now += 1;
        let taken = take(64, now).await?;
        anyhow::ensure!(
            taken > 0,
            "the backlog ran dry after {drained} of {backlog}"
        );
        drained += taken;
    }
    Ok(drained as f64 / started.elapsed().as_secs_f64())
}
