//! `knooppunt pull`: receive a pull subscription's events and settle them.

use std::process::ExitCode;

use reqwest::Method;
use reqwest::header::HeaderMap;
use serde_json::{Value, json};

use super::{Client, Connection, Outcome, Output, print_json, refused, segment};

/// Receive the events of a pull subscription (`config.delivery` `pull`) and acknowledge,
/// release, reject or renew them by their lock tokens.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum PullCommand {
    /// Receive events, each locked to you for the subscription's lockDuration: prints each
    /// one's lock token, delivery count and the event (with --json: the event as published).
    Receive {
        /// The subscription's id.
        subscription: String,
        /// How many events at most (1 to 100).
        #[arg(long, default_value_t = 10)]
        max: u32,
        /// How long to wait while none is due (ISO 8601 duration, at most PT50S here).
        #[arg(long, default_value = "PT30S")]
        wait: String,
        #[command(flatten)]
        connection: Connection,
        #[command(flatten)]
        output: Output,
    },
    /// The events were processed: they are delivered.
    Acknowledge {
        subscription: String,
        /// Lock tokens from `receive`.
        #[arg(required = true)]
        tokens: Vec<String>,
        #[command(flatten)]
        connection: Connection,
    },
    /// Give the events back: they are handed out again after --delay.
    Release {
        subscription: String,
        #[arg(required = true)]
        tokens: Vec<String>,
        /// ISO 8601 duration, PT0S to PT1H.
        #[arg(long, default_value = "PT0S")]
        delay: String,
        #[command(flatten)]
        connection: Connection,
    },
    /// The events cannot be processed: they become dead letters with --reason.
    Reject {
        subscription: String,
        #[arg(required = true)]
        tokens: Vec<String>,
        /// Why (kept with the dead letters).
        #[arg(long)]
        reason: String,
        #[command(flatten)]
        connection: Connection,
    },
    /// You need longer: the locks last another lockDuration from now.
    Renew {
        subscription: String,
        #[arg(required = true)]
        tokens: Vec<String>,
        #[command(flatten)]
        connection: Connection,
    },
}

pub(crate) async fn run(command: PullCommand) -> Outcome {
    let (subscription, operation, tokens, extra, connection) = match command {
        PullCommand::Receive {
            subscription,
            max,
            wait,
            connection,
            output,
        } => return receive(&subscription, max, &wait, &connection, &output).await,
        PullCommand::Acknowledge {
            subscription,
            tokens,
            connection,
        } => (subscription, "acknowledge", tokens, json!({}), connection),
        PullCommand::Release {
            subscription,
            tokens,
            delay,
            connection,
        } => (
            subscription,
            "release",
            tokens,
            json!({"delay": delay}),
            connection,
        ),
        PullCommand::Reject {
            subscription,
            tokens,
            reason,
            connection,
        } => (
            subscription,
            "reject",
            tokens,
            json!({"reason": reason}),
            connection,
        ),
        PullCommand::Renew {
            subscription,
            tokens,
            connection,
        } => (subscription, "renew", tokens, json!({}), connection),
    };
    let client = Client::new(&connection)?;
    let mut body = extra;
    body["lockTokens"] = json!(tokens);
    let path = format!("/v1/subscriptions/{}/{operation}", segment(&subscription));
    let answer = client.send_json(Method::POST, &path, &body).await?;
    if !answer.status.is_success() {
        return Ok(refused(&answer));
    }
    let succeeded = answer.body["succeeded"].as_array().map_or(0, Vec::len);
    println!("{operation}: {succeeded} of {} succeeded", tokens.len());
    let failed = answer.body["failed"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    for failure in &failed {
        eprintln!(
            "  {}: {} ({})",
            failure["lockToken"].as_str().unwrap_or("?"),
            failure["error"].as_str().unwrap_or("?"),
            failure["detail"].as_str().unwrap_or("")
        );
    }
    Ok(if failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

async fn receive(
    subscription: &str,
    max: u32,
    wait: &str,
    connection: &Connection,
    output: &Output,
) -> Outcome {
    let client = Client::new(connection)?;
    let path = format!(
        "/v1/subscriptions/{}/receive?maxEvents={max}&maxWait={}",
        segment(subscription),
        segment(wait)
    );
    let answer = client
        .send(Method::POST, &path, HeaderMap::new(), None)
        .await?;
    if !answer.status.is_success() {
        return Ok(refused(&answer));
    }
    let list = |name: &str| -> Vec<String> {
        answer
            .headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(|v| v.split(", ").map(str::to_owned).collect())
            .unwrap_or_default()
    };
    let (tokens, counts) = (
        list("knooppunt-lock-tokens"),
        list("knooppunt-delivery-counts"),
    );
    let events = answer.body.as_array().cloned().unwrap_or_default();
    if output.json {
        let held: Vec<Value> = events
            .into_iter()
            .zip(tokens.iter().zip(&counts))
            .map(|(event, (token, count))| {
                json!({"lockToken": token, "deliveryCount": count.parse::<u64>().unwrap_or(0), "event": event})
            })
            .collect();
        print_json(&Value::Array(held));
    } else if events.is_empty() {
        println!("No events for {subscription} within {wait}.");
    } else {
        println!("{:<24}  {:>5}  {:<36}  TYPE", "LOCK TOKEN", "COUNT", "ID");
        for (event, (token, count)) in events.iter().zip(tokens.iter().zip(&counts)) {
            println!(
                "{token:<24}  {count:>5}  {:<36}  {}",
                event["id"].as_str().unwrap_or("?"),
                event["type"].as_str().unwrap_or("?"),
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
