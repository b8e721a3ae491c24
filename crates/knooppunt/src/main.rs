//! The `knooppunt` command: runs the hub and offers tools around it.

#![allow(clippy::print_stdout)]

#[macro_use]
mod output;
mod check;
mod client;
mod config;
mod serve;
mod traces;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use knooppunt_event::ProfileLevel;

/// mimalloc: the hub allocates and frees small buffers on every request from several
/// threads, where glibc's allocator showed up at ~12% of the ingest profile.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Knooppunt: a CloudEvents 1.0 event hub for the Dutch government (NL GOV profile).
///
/// Publishers POST events; subscribers register webhooks through the Subscriptions API (the
/// hub delivers every matching event) or pull them, read a subscription's stream and replay
/// it. The API is described at /v1/openapi.json; ZGW components use the Notificaties API
/// 1.0 at /api/v1 (/api/v1/schema/openapi.yaml); people use the web pages at /console
/// (sign in with a principal's token or a client certificate).
///
/// `serve` runs the hub. The other commands but `check`, `hash-token` and `import`
/// (`publish`, `subscriptions`, `eventtypes`, `approvals`, `audit`, `dead-letters`, `pull`,
/// `principals`, `backup`) talk to a running hub over its API: give its URL with --url or KNOOPPUNT_URL (default
/// http://127.0.0.1:8080) and a principal's token with KNOOPPUNT_TOKEN (or --token), or a
/// client certificate with KNOOPPUNT_IDENTITY_FILE (or --identity-file).
#[derive(Debug, Parser)]
#[command(name = "knooppunt", version = VERSION)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// The release and the commit (`build.rs`), as `--version` prints them.
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("KNOOPPUNT_COMMIT"),
    ")"
);

/// What the hub says it is: in its start-up log, `/v1/status` and `knooppunt_build_info`.
fn build() -> knooppunt_broker::Build {
    knooppunt_broker::Build {
        version: env!("CARGO_PKG_VERSION").into(),
        commit: env!("KNOOPPUNT_COMMIT").into(),
    }
}

const DEFAULT_CONFIG: &str = "config/knooppunt.toml";

#[derive(Debug, Subcommand)]
enum Command {
    /// Start the hub: open the store, load the subscriptions and serve the API (and the web
    /// pages at /console) until SIGINT or SIGTERM.
    Serve {
        /// The configuration file.
        #[arg(long, default_value = DEFAULT_CONFIG)]
        config: PathBuf,
        /// Listen here instead of `server.listen` (port 0 picks a free port).
        #[arg(long)]
        listen: Option<SocketAddr>,
        /// Keep the store here instead of `server.data_dir`.
        #[arg(long)]
        data_dir: Option<PathBuf>,
        /// DEVELOPMENT ONLY: accept every request without a token, as an admin. Never use
        /// this on a hub others can reach.
        #[arg(long)]
        dev_no_auth: bool,
    },
    /// Make a new random bearer token (or hash a given one) and print the `token_sha256` to
    /// put in a principal of the configuration.
    HashToken {
        /// The token to hash; a new random one is made when absent.
        token: Option<String>,
    },
    /// Publish an event to a running hub (needs the `publisher` role).
    ///
    /// Give a file with the event in the JSON format (or a JSON array of events, sent as one
    /// batch), or make the event from flags. A file is sent exactly as written. The hub
    /// answers once the event is on disk; a duplicate `source` + `id` is acknowledged but not
    /// delivered again.
    ///
    /// Examples:
    ///   knooppunt publish --file event.json
    ///   knooppunt publish --source urn:nld:oin:00000001823288444000:systeem:BRP \
    ///       --type nl.brp.persoon-verhuisd --subject 999990342 --data '{"bsn": "999990342"}'
    #[command(verbatim_doc_comment)]
    Publish(client::publish::PublishArgs),
    /// List, show, create and delete subscriptions on a running hub.
    #[command(subcommand)]
    Subscriptions(client::subscriptions::SubscriptionsCommand),
    /// List, show, create and delete the event type catalog's entries on a running hub.
    #[command(subcommand)]
    Eventtypes(client::eventtypes::EventTypesCommand),
    /// List and decide the data owners' approvals on a running hub.
    #[command(subcommand)]
    Approvals(client::approvals::ApprovalsCommand),
    /// Copy a running hub's embedded store into a data directory, while it serves (admin;
    /// a hub on PostgreSQL is backed up with pg_dump).
    Backup(client::backup::BackupCommand),
    /// Read, export and verify the audit trail (a running hub's, or an export).
    #[command(subcommand)]
    Audit(client::audit::AuditCommand),
    /// List and redeliver a subscription's dead letters on a running hub.
    #[command(subcommand)]
    DeadLetters(client::dead_letters::DeadLettersCommand),
    /// Receive the events of a pull subscription and acknowledge, release, reject or renew
    /// them; read a subscription's event stream; replay a window of its events.
    #[command(subcommand)]
    Pull(client::pull::PullCommand),
    /// List, create, change and delete the principals that may call a running hub (needs
    /// the `admin` role).
    #[command(subcommand)]
    Principals(client::principals::PrincipalsCommand),
    /// Move over from another event hub: read its subscriptions and make them here.
    #[command(subcommand)]
    Import(client::import::ImportCommand),
    /// Check CloudEvents in the JSON format against the CloudEvents core specification and
    /// the NL GOV profile, and list every problem found; or, with --store, check the
    /// configuration and that the hub can use its store.
    ///
    /// Each FILE holds one event (a JSON object) or a batch (a JSON array); `-` reads
    /// standard input. Exits with 1 when an event is invalid at the chosen profile level.
    /// With --store: reads the configuration, opens the store (for PostgreSQL: connects,
    /// creates or migrates the schema) and reports it; exits with 1 when it cannot.
    /// With --health: asks a running hub's /healthz (a container's HEALTHCHECK); exits with
    /// 1, saying why, when it does not answer 200 within 5 seconds.
    ///
    /// Examples:
    ///   knooppunt check event.json
    ///   knooppunt check --store --config /etc/knooppunt/knooppunt.toml
    ///   knooppunt check --health http://127.0.0.1:8080
    #[command(verbatim_doc_comment)]
    Check {
        /// Files with events in the JSON format.
        #[arg(required_unless_present_any = ["store", "health"], value_name = "FILE")]
        files: Vec<PathBuf>,
        /// Check the configuration and the store instead of events.
        #[arg(long, conflicts_with = "health")]
        store: bool,
        /// Check that the hub at this URL is up: its /healthz (or the URL's own path, when it
        /// has one) must answer 200. Over HTTPS, the hub's certificate is checked against
        /// the system's roots; a hub with a private certificate is checked on
        /// server.metrics_listen, which also serves /healthz.
        #[arg(
            long,
            value_name = "URL",
            num_args = 0..=1,
            default_missing_value = "http://127.0.0.1:8080",
            conflicts_with = "files"
        )]
        health: Option<String>,
        /// Profile level (`off`, `warn`, `enforce`); defaults to `validation.profile` from
        /// the configuration file.
        #[arg(long)]
        profile: Option<ProfileLevel>,
        /// The configuration file.
        #[arg(long)]
        config: Option<PathBuf>,
    },
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(code) => code,
        Err(error) => {
            tell!("knooppunt: {error:#}");
            ExitCode::from(2)
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Serve {
            config,
            listen,
            data_dir,
            dev_no_auth,
        } => {
            let explicit = config.as_os_str() != DEFAULT_CONFIG;
            let mut config = config::Config::load(&config, explicit)?;
            if let Some(listen) = listen {
                config.server.listen = listen;
            }
            if let Some(data_dir) = data_dir {
                config.server.data_dir = data_dir;
            }
            serve::run(config, dev_no_auth)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::HashToken { token } => {
            let token = token.unwrap_or_else(|| {
                format!(
                    "{}{}",
                    uuid::Uuid::new_v4().simple(),
                    uuid::Uuid::new_v4().simple()
                )
            });
            say!("token:        {token}");
            say!("token_sha256: {}", knooppunt_broker::hash_token(&token));
            say!();
            say!("Give the token to the principal; put the hash in its [[principals]] entry.");
            Ok(ExitCode::SUCCESS)
        }
        Command::Publish(args) => client::run(client::publish::run(args)),
        Command::Subscriptions(command) => client::run(client::subscriptions::run(command)),
        Command::DeadLetters(command) => client::run(client::dead_letters::run(command)),
        Command::Pull(command) => client::run(client::pull::run(command)),
        Command::Eventtypes(command) => client::run(client::eventtypes::run(command)),
        Command::Approvals(command) => client::run(client::approvals::run(command)),
        Command::Audit(command) => client::run(client::audit::run(command)),
        Command::Principals(command) => client::run(client::principals::run(command)),
        Command::Backup(command) => client::run(client::backup::run(command)),
        Command::Import(command) => client::import::run(command),
        Command::Check {
            health: Some(url), ..
        } => Ok(check::health(&url)),
        Command::Check {
            store: true,
            config,
            ..
        } => {
            let explicit = config.is_some();
            let path = config.unwrap_or_else(|| PathBuf::from(DEFAULT_CONFIG));
            let config = config::Config::load(&path, explicit)?;
            serve::check_store(&config)
        }
        Command::Check {
            files,
            profile,
            config,
            ..
        } => {
            let level = match profile {
                Some(level) => level,
                None => {
                    let explicit = config.is_some();
                    let path = config.unwrap_or_else(|| PathBuf::from(DEFAULT_CONFIG));
                    config::Config::load(&path, explicit)?.validation.profile
                }
            };
            check::run(&files, level)
        }
    }
}
