//! `knooppunt dead-letters`: list a subscription's dead letters and send them again.

use std::process::ExitCode;

use reqwest::Method;
use reqwest::header::HeaderMap;
use serde_json::Value;

use super::{Client, Connection, Outcome, Output, print_json, refused, segment};

/// Inspect and redeliver the events the hub gave up on (owner of the subscription or admin).
#[derive(Debug, clap::Subcommand)]
pub(crate) enum DeadLettersCommand {
    /// List a subscription's dead letters, oldest first, with why each was given up.
    List {
        /// The subscription's id.
        subscription: String,
        #[command(flatten)]
        connection: Connection,
        #[command(flatten)]
        output: Output,
    },
    /// Put a dead letter back in its subscription's queue, with fresh attempts.
    Redeliver {
        /// The subscription's id.
        subscription: String,
        /// The dead letter's id (as `list` shows it).
        dead_letter: String,
        #[command(flatten)]
        connection: Connection,
    },
}

pub(crate) async fn run(command: DeadLettersCommand) -> Outcome {
    match command {
        DeadLettersCommand::List {
            subscription,
            connection,
            output,
        } => {
            let client = Client::new(&connection)?;
            let path = format!("/v1/subscriptions/{}/dead-letters", segment(&subscription));
            let items = match client.all_pages(&path).await? {
                Ok(items) => items,
                Err(answer) => return Ok(refused(&answer)),
            };
            if output.json {
                print_json(&Value::Array(items));
            } else if items.is_empty() {
                say!("No dead letters for {subscription}.");
            } else {
                say!(
                    "{:<10}  {:>8}  {:<24}  REASON",
                    "ID",
                    "ATTEMPTS",
                    "GIVEN UP AT"
                );
                for item in &items {
                    let mut reason = item["reason"].as_str().unwrap_or("?").to_owned();
                    match (item["lastStatusCode"].as_u64(), item["lastError"].as_str()) {
                        (_, Some(error)) => reason.push_str(&format!("; last: {error}")),
                        (Some(status), None) => reason.push_str(&format!("; last: HTTP {status}")),
                        (None, None) => {}
                    }
                    say!(
                        "{:<10}  {:>8}  {:<24}  {reason}",
                        item["id"].as_str().unwrap_or("?"),
                        item["attempts"].to_string(),
                        item["deadLetterTime"].as_str().unwrap_or("?"),
                    );
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        DeadLettersCommand::Redeliver {
            subscription,
            dead_letter,
            connection,
        } => {
            let client = Client::new(&connection)?;
            let path = format!(
                "/v1/subscriptions/{}/dead-letters/{}/redeliver",
                segment(&subscription),
                segment(&dead_letter)
            );
            let answer = client
                .send(Method::POST, &path, HeaderMap::new(), None)
                .await?;
            if !answer.status.is_success() {
                return Ok(refused(&answer));
            }
            say!("dead letter {dead_letter} of {subscription} is queued for delivery again");
            Ok(ExitCode::SUCCESS)
        }
    }
}
