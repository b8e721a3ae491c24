//! The `knooppunt` command: runs the hub and offers tools around it.

#![allow(clippy::print_stdout)]

mod check;
mod config;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use knooppunt_event::ProfileLevel;

/// Knooppunt: a CloudEvents 1.0 event hub for the Dutch government (NL GOV profile).
#[derive(Debug, Parser)]
#[command(name = "knooppunt", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

const DEFAULT_CONFIG: &str = "config/knooppunt.toml";

#[derive(Debug, Subcommand)]
enum Command {
    /// Start the hub. NOT BUILT YET: this release has the event core only, so `serve` checks
    /// the configuration, says so and exits.
    Serve {
        /// The configuration file.
        #[arg(long, default_value = DEFAULT_CONFIG)]
        config: PathBuf,
    },
    /// Check CloudEvents in the JSON format against the CloudEvents core specification and
    /// the NL GOV profile, and list every problem found.
    ///
    /// Each FILE holds one event (a JSON object) or a batch (a JSON array); `-` reads
    /// standard input. Exits with 1 when an event is invalid at the chosen profile level.
    Check {
        /// Files with events in the JSON format.
        #[arg(required = true, value_name = "FILE")]
        files: Vec<PathBuf>,
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
            eprintln!("knooppunt: {error:#}");
            ExitCode::from(2)
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Serve { config } => {
            config::Config::load(&config, config.as_os_str() != DEFAULT_CONFIG)?;
            eprintln!(
                "knooppunt serve: the hub is not built yet. This release contains the CloudEvents \
                 core (model, JSON format, HTTP binding, validation); the HTTP API arrives with \
                 the subscriptions work. Try `knooppunt check <event.json>` meanwhile."
            );
            Ok(ExitCode::from(2))
        }
        Command::Check {
            files,
            profile,
            config,
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
