//! `knooppunt serve`: the hub from the configuration.

use std::io::IsTerminal;
use std::sync::Arc;

use anyhow::Context;
use knooppunt_broker::{Authentication, Hub};
use knooppunt_store::Store;
use knooppunt_store_embedded::EmbeddedStore;
use knooppunt_store_postgres::PgStore;

use crate::config::{Config, LogFormat};

pub(crate) fn run(config: Config, dev_no_auth: bool) -> anyhow::Result<()> {
    let filter = tracing_subscriber::EnvFilter::try_new(&config.log.level).with_context(|| {
        format!(
            "log.level: `{}` is not a level (error, warn, info, debug, trace) or a filter",
            config.log.level
        )
    })?;
    let build = crate::build();
    let traces = if crate::traces::wanted(|name| std::env::var(name).ok())? {
        Some(crate::traces::provider(&build.version)?)
    } else {
        None
    };
    match &traces {
        // Without traces, the log's filter is the process's: disabled spans cost nothing.
        None => {
            // A closed stderr loses log lines, never the hub: no report of the failed write
            // (tracing's own `eprintln!` would panic on the same closed stderr).
            let logs = tracing_subscriber::fmt()
                .with_env_filter(filter)
                .with_writer(std::io::stderr)
                .log_internal_errors(false);
            match config.log.format {
                LogFormat::Pretty => logs.with_ansi(std::io::stderr().is_terminal()).init(),
                LogFormat::Json => logs.json().flatten_event(true).init(),
            }
        }
        Some(provider) => {
            use tracing_subscriber::Layer as _;
            use tracing_subscriber::layer::SubscriberExt as _;
            use tracing_subscriber::util::SubscriberInitExt as _;
            let logs = tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .log_internal_errors(false);
            let logs = match config.log.format {
                LogFormat::Pretty => logs.with_ansi(std::io::stderr().is_terminal()).boxed(),
                LogFormat::Json => logs.json().flatten_event(true).boxed(),
            };
            tracing_subscriber::registry()
                .with(logs.with_filter(filter))
                .with(crate::traces::layer(provider))
                .init();
            knooppunt_broker::trace::enable();
        }
    }
    tracing::info!(
        version = %build.version,
        commit = %build.commit,
        configuration = %config.source,
        "Knooppunt is starting."
    );
    for variable in &config.unknown_variables {
        tracing::warn!(
            variable = %variable,
            sections = %crate::config::ENV_SECTIONS.join(", "),
            "{variable} is not a setting: after KNOOPPUNT_ it names no section of the \
             configuration. Fix its name (KNOOPPUNT_<SECTION>_<KEY>) or remove it; it is \
             left alone."
        );
    }
    if !config.ignored_variables.is_empty() {
        tracing::debug!(
            variables = %config.ignored_variables.join(", "),
            "Environment variables starting with KNOOPPUNT_ that are not settings (such as a \
             Kubernetes Service's links) are left alone."
        );
    }
    let runtime = knooppunt_broker::runtime(config.server.worker_threads()?)
        .context("cannot start the async runtime")?;
    let served = runtime.block_on(serve(config, dev_no_auth));
    if let Some(provider) = traces {
        // The spans still batched are sent before the process ends.
        if let Err(error) = provider.shutdown() {
            tracing::warn!(%error, "The last spans could not be exported.");
        }
    }
    served
}

async fn serve(config: Config, dev_no_auth: bool) -> anyhow::Result<()> {
    let authentication = if dev_no_auth {
        for _ in 0..3 {
            tracing::warn!(
                "AUTHENTICATION IS DISABLED (--dev-no-auth): every request acts as an admin. \
                 Never run a hub like this where others can reach it."
            );
        }
        Authentication::Disabled
    } else {
        Authentication::tokens(config.principals()).with_issuers(config.issuers()?)
    };
    let mut options = config.hub_options(authentication)?;
    options.build = crate::build();
    // The checkpoint of the audit trail's head lives beside the hub, not in the store.
    let data_dir = &config.server.data_dir;
    match std::fs::create_dir_all(data_dir) {
        Ok(()) => options.audit_checkpoint = Some(data_dir.join("audit-head")),
        Err(error) => tracing::warn!(
            %error, data_dir = %data_dir.display(),
            "The audit trail's checkpoint cannot be kept in server.data_dir; the log and \
             /v1/audit/head still anchor its head."
        ),
    }
    let transport = config.transport()?;
    let scheme = match &transport.tls {
        None => "http",
        Some(_) if config.server.tls_client_ca.is_some() => "https, client certificates",
        Some(_) => "https",
    };
    raise_descriptor_limit(&options, &transport)?;
    let (store, location) = open_store(&config).await?;
    let hub = Hub::open_with(store, options, transport).await?;
    if !dev_no_auth && hub.principal_count() == 0 && config.issuers.is_empty() {
        tracing::warn!(
            "There are no principals and no token issuers, so every API request will be \
             refused with 401. Add a [[principals]] admin to the configuration (see \
             `knooppunt hash-token`); it can then create the others at runtime."
        );
    }
    let listener = knooppunt_broker::listen(config.server.listen)
        .with_context(|| format!("cannot listen on {}", config.server.listen))?;
    let address = listener.local_addr()?;
    if let Some(metrics) = config.server.metrics_listen {
        let listener = knooppunt_broker::listen(metrics)
            .with_context(|| format!("server.metrics_listen: cannot listen on {metrics}"))?;
        let metrics_address = listener.local_addr()?;
        tracing::info!(%metrics_address, "Metrics are served without a token.");
        // Ends with the process.
        tokio::spawn(knooppunt_broker::serve_metrics(
            listener,
            hub.clone(),
            std::future::pending(),
        ));
    }
    // Installed before the address is announced: a signal sent as soon as the hub listens
    // stops it cleanly instead of killing it.
    let stop = shutdown_signal()?;
    let task_threads = tokio::runtime::Handle::current().metrics().num_workers();
    tracing::info!(
        %address,
        scheme,
        store = %location,
        task_threads,
        "Knooppunt is listening."
    );
    knooppunt_broker::serve(listener, hub, stop).await?;
    tracing::info!("Knooppunt stopped.");
    Ok(())
}

/// Opens the configured store; also says where it is, for the log.
pub(crate) async fn open_store(config: &Config) -> anyhow::Result<(Arc<dyn Store>, String)> {
    if let Some(options) = config.store.postgres()? {
        let store = PgStore::connect(&options)
            .await
            .context("store.url: cannot use the PostgreSQL database")?;
        let location = format!("postgres (schema {})", store.schema_version().await?);
        return Ok((Arc::new(store), location));
    }
    let data_dir = &config.server.data_dir;
    std::fs::create_dir_all(data_dir)
        .with_context(|| format!("cannot create the data directory {}", data_dir.display()))?;
    let store = EmbeddedStore::open(data_dir)?;
    let location = format!(
        "{} (format {})",
        data_dir.display(),
        knooppunt_store_embedded::FORMAT_VERSION
    );
    Ok((Arc::new(store), location))
}

/// `knooppunt check --store`: opens the configured store once and reports it.
pub(crate) fn check_store(config: &Config) -> anyhow::Result<std::process::ExitCode> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async {
        match open_store(config).await {
            Ok((store, location)) => {
                let checked = store.check().await;
                let subscriptions = store.subscriptions().await.map(|s| s.len());
                match (checked, subscriptions) {
                    (Ok(()), Ok(count)) => {
                        say!("store: {location}: reachable, {count} subscriptions");
                        if let Ok(usage) = store.disk_usage().await {
                            say!(
                                "  disk: {} MiB, of which events {} MiB (kept {} after delivery: \
                                 ingest.retention; {} as a dead letter: \
                                 backlog.dead_letter_retention)",
                                usage.total_bytes / (1024 * 1024),
                                usage.event_bytes / (1024 * 1024),
                                config.ingest.retention,
                                config.backlog.dead_letter_retention
                            );
                        }
                        let options = config.hub_options(Authentication::Disabled)?;
                        let problems = knooppunt_broker::catalog_problems(store, &options)
                            .await
                            .context("cannot read the catalog and the principals")?;
                        if problems.is_empty() {
                            return Ok(std::process::ExitCode::SUCCESS);
                        }
                        for problem in problems {
                            say!("  {problem}: delete or narrow it");
                        }
                        Ok(std::process::ExitCode::FAILURE)
                    }
                    (Err(error), _) | (_, Err(error)) => {
                        say!("store: {location}: NOT USABLE: {error}");
                        Ok(std::process::ExitCode::FAILURE)
                    }
                }
            }
            Err(error) => {
                say!("store: NOT USABLE: {error:#}");
                Ok(std::process::ExitCode::FAILURE)
            }
        }
    })
}

/// Descriptors kept beyond the connection limits: the store's files, sled, the listener,
/// standard streams, DNS lookups.
const RESERVED_DESCRIPTORS: u64 = 256;

/// Makes sure the process may open every descriptor its connection limits allow plus
/// [`RESERVED_DESCRIPTORS`], so that running out of descriptors never stops the API from
/// answering: raises the soft limit when it is lower (up to the hard limit), and refuses to
/// start, naming what to change, when even the hard limit is too low.
fn raise_descriptor_limit(
    options: &knooppunt_broker::HubOptions,
    transport: &knooppunt_broker::Transport,
) -> anyhow::Result<()> {
    let needed = (transport.limits.max_connections + options.delivery.connections.max_sockets())
        as u64
        + RESERVED_DESCRIPTORS;
    let (soft, hard) = rlimit::getrlimit(rlimit::Resource::NOFILE)
        .context("cannot read the open-file limit (RLIMIT_NOFILE)")?;
    if soft >= needed {
        tracing::debug!(soft, needed, "The open-file limit suffices.");
        return Ok(());
    }
    if hard < needed {
        anyhow::bail!(
            "the open-file limit is {hard} but the connection limits need {needed} descriptors \
             (server.max_connections + delivery.max_connections + 2 × delivery.max_idle_sinks × \
             delivery.max_idle_per_sink + {RESERVED_DESCRIPTORS}): raise the limit (ulimit -n, \
             LimitNOFILE= for systemd, --ulimit nofile= for Docker) or lower those settings"
        );
    }
    rlimit::setrlimit(rlimit::Resource::NOFILE, needed, hard)
        .context("cannot raise the open-file limit (RLIMIT_NOFILE)")?;
    tracing::info!(from = soft, to = needed, "Raised the open-file limit.");
    Ok(())
}

/// Installs the SIGINT and SIGTERM handlers now; the future completes on either signal.
fn shutdown_signal() -> anyhow::Result<impl Future<Output = ()>> {
    #[cfg(unix)]
    let (mut interrupt, mut terminate) = {
        use tokio::signal::unix::{SignalKind, signal};
        (
            signal(SignalKind::interrupt()).context("cannot handle SIGINT")?,
            signal(SignalKind::terminate()).context("cannot handle SIGTERM")?,
        )
    };
    Ok(async move {
        #[cfg(unix)]
        tokio::select! {
            _ = interrupt.recv() => {}
            _ = terminate.recv() => {}
        }
        #[cfg(not(unix))]
        let _ = tokio::signal::ctrl_c().await;
        tracing::info!("Shutting down: finishing the requests in flight.");
    })
}
