//! `knooppunt pull`: receive a pull subscription's events and settle them, read a
//! subscription's stream, and replay a window of its events.

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
    /// Read a subscription's retained events after a cursor (no locks; any subscription):
    /// prints the events as JSON lines and, on standard error, the cursor to go on from.
    Stream {
        subscription: String,
        /// The cursor to read on from (as an earlier `stream` printed it); left out, the
        /// oldest retained event.
        #[arg(long)]
        after: Option<String>,
        /// How many events at most (1 to 1000).
        #[arg(long, default_value_t = 100)]
        limit: u32,
        #[command(flatten)]
        connection: Connection,
    },
    /// Replay a window of a subscription's retained events (queued for it again), or follow
    /// and cancel replays.
    #[command(subcommand)]
    Replay(ReplayCommand),
}

/// `knooppunt pull replay ...`
#[derive(Debug, clap::Subcommand)]
pub(crate) enum ReplayCommand {
    /// Start a replay of the events accepted from --from until --until (default: now).
    Start {
        subscription: String,
        /// RFC 3339, e.g. 2026-11-20T08:00:00Z.
        #[arg(long)]
        from: String,
        #[arg(long)]
        until: Option<String>,
        #[command(flatten)]
        connection: Connection,
        #[command(flatten)]
        output: Output,
    },
    /// List a subscription's replays, newest first.
    List {
        subscription: String,
        #[command(flatten)]
        connection: Connection,
        #[command(flatten)]
        output: Output,
    },
    /// Show one replay's state and progress.
    Get {
        subscription: String,
        replay: String,
        #[command(flatten)]
        connection: Connection,
        #[command(flatten)]
        output: Output,
    },
    /// Cancel a running replay.
    Cancel {
        subscription: String,
        replay: String,
        #[command(flatten)]
        connection: Connection,
        #[command(flatten)]
        output: Output,
    },
}

fn print_replay(replay: &Value) {
    say!(
        "{}  {:<9}  {} .. {}  {} queued{}",
        replay["id"].as_str().unwrap_or("?"),
        replay["state"].as_str().unwrap_or("?"),
        replay["from"].as_str().unwrap_or("?"),
        replay["until"].as_str().unwrap_or("?"),
        replay["eventsQueued"],
        replay["error"]
            .as_str()
            .map(|e| format!(" ({e})"))
            .unwrap_or_default()
    );
}

async fn replay(command: ReplayCommand) -> Outcome {
    let (connection, output, method, path, body) = match command {
        ReplayCommand::Start {
            subscription,
            from,
            until,
            connection,
            output,
        } => {
            let mut body = json!({"from": from});
            if let Some(until) = until {
                body["until"] = json!(until);
            }
            let path = format!("/v1/subscriptions/{}/replays", segment(&subscription));
            (connection, output, Method::POST, path, Some(body))
        }
        ReplayCommand::List {
            subscription,
            connection,
            output,
        } => {
            let path = format!("/v1/subscriptions/{}/replays", segment(&subscription));
            (connection, output, Method::GET, path, None)
        }
        ReplayCommand::Get {
            subscription,
            replay,
            connection,
            output,
        } => {
            let path = format!(
                "/v1/subscriptions/{}/replays/{}",
                segment(&subscription),
                segment(&replay)
            );
            (connection, output, Method::GET, path, None)
        }
        ReplayCommand::Cancel {
            subscription,
            replay,
            connection,
            output,
        } => {
            let path = format!(
                "/v1/subscriptions/{}/replays/{}/cancel",
                segment(&subscription),
                segment(&replay)
            );
            (connection, output, Method::POST, path, None)
        }
    };
    let client = Client::new(&connection)?;
    let answer = match body {
        Some(body) => client.send_json(method, &path, &body).await?,
        None => client.send(method, &path, HeaderMap::new(), None).await?,
    };
    if !answer.status.is_success() {
        return Ok(refused(&answer));
    }
    if output.json {
        print_json(&answer.body);
    } else if let Some(list) = answer.body.as_array() {
        if list.is_empty() {
            say!("No replays.");
        }
        list.iter().for_each(print_replay);
    } else {
        print_replay(&answer.body);
    }
    Ok(ExitCode::SUCCESS)
}

async fn stream(
    subscription: &str,
    after: Option<&str>,
    limit: u32,
    connection: &Connection,
) -> Outcome {
    let client = Client::new(connection)?;
    let mut path = format!(
        "/v1/subscriptions/{}/events?limit={limit}",
        segment(subscription)
    );
    if let Some(after) = after {
        path.push_str(&format!("&after={}", segment(after)));
    }
    let answer = client
        .send(Method::GET, &path, HeaderMap::new(), None)
        .await?;
    if !answer.status.is_success() {
        if let Some(oldest) = answer.body["oldestCursor"].as_str() {
            tell!("  (read on with --after {oldest})");
        }
        return Ok(refused(&answer));
    }
    for event in answer.body.as_array().into_iter().flatten() {
        say!("{event}");
    }
    if let Some(cursor) = answer
        .headers
        .get("knooppunt-cursor")
        .and_then(|v| v.to_str().ok())
    {
        tell!("cursor: {cursor} (read on with --after {cursor})");
    }
    Ok(ExitCode::SUCCESS)
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
        PullCommand::Stream {
            subscription,
            after,
            limit,
            connection,
        } => return stream(&subscription, after.as_deref(), limit, &connection).await,
        PullCommand::Replay(command) => return replay(command).await,
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
    say!("{operation}: {succeeded} of {} succeeded", tokens.len());
    let failed = answer.body["failed"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    for failure in &failed {
        tell!(
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
        say!("No events for {subscription} within {wait}.");
    } else {
        say!("{:<24}  {:>5}  {:<36}  TYPE", "LOCK TOKEN", "COUNT", "ID");
        for (event, (token, count)) in events.iter().zip(tokens.iter().zip(&counts)) {
            say!(
                "{token:<24}  {count:>5}  {:<36}  {}",
                event["id"].as_str().unwrap_or("?"),
                event["type"].as_str().unwrap_or("?"),
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
