//! `knooppunt serve`: the hub from the configuration.

use std::io::IsTerminal;
use std::sync::Arc;

use anyhow::Context;
use knooppunt_broker::{Authentication, Hub};
use knooppunt_store::SledStore;

use crate::config::Config;

pub(crate) fn run(config: Config, dev_no_auth: bool) -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("KNOOPPUNT_LOG")
                .unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(serve(config, dev_no_auth))
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
        if config.principals.is_empty() {
            tracing::warn!(
                "No principals are configured, so every API request will be refused with 401. \
                 Add [[principals]] to the configuration (see `knooppunt hash-token`)."
            );
        }
        Authentication::tokens(config.principals())
    };
    let data_dir = &config.server.data_dir;
    std::fs::create_dir_all(data_dir)
        .with_context(|| format!("cannot create the data directory {}", data_dir.display()))?;
    let store = SledStore::open(data_dir)?;
    let options = config.hub_options(authentication)?;
    let hub = Hub::open(Arc::new(store), options).await?;
    let listener = tokio::net::TcpListener::bind(config.server.listen)
        .await
        .with_context(|| format!("cannot listen on {}", config.server.listen))?;
    let address = listener.local_addr()?;
    tracing::info!(%address, data_dir = %data_dir.display(), "Knooppunt is listening.");
    knooppunt_broker::serve(listener, hub, shutdown_signal()).await?;
    tracing::info!("Knooppunt stopped.");
    Ok(())
}

/// Completes on SIGINT or SIGTERM.
async fn shutdown_signal() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut terminate =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                .expect("the SIGTERM handler installs");
        tokio::select! {
            _ = interrupt => {}
            _ = terminate.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = interrupt.await;
    }
    tracing::info!("Shutting down: finishing the requests in flight.");
}
