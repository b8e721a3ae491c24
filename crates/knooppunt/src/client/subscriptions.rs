//! `knooppunt subscriptions`: list, show, create and delete subscriptions.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use reqwest::{Method, StatusCode};
use serde_json::{Map, Value, json};

use super::{
    Client, Connection, Outcome, Output, delete, list, print_json, refused, segment, show, text,
};

/// Manage subscriptions (needs the `subscriber` role; you see your own, an admin sees all).
#[derive(Debug, clap::Subcommand)]
pub(crate) enum SubscriptionsCommand {
    /// List subscriptions, oldest first, with their owner, state, backlog and sink.
    List {
        /// Only this principal's subscriptions (an admin may name any).
        #[arg(long)]
        owner: Option<String>,
        #[command(flatten)]
        connection: Connection,
        #[command(flatten)]
        output: Output,
    },
    /// Show one subscription, with its delivery settings and last delivery.
    Get {
        /// The subscription's id.
        id: String,
        #[command(flatten)]
        connection: Connection,
        #[command(flatten)]
        output: Output,
    },
    /// Create a subscription from a JSON file (the API's body) or from flags.
    ///
    /// The hub asks the sink for its consent first (the webhook validation handshake); a
    /// sink that does not consent leaves the subscription `pending`, with the reason.
    ///
    /// A pull subscription (--config delivery=pull) has no sink: its consumer receives
    /// the events with `knooppunt pull receive`.
    ///
    /// Examples:
    ///   knooppunt subscriptions create --sink https://gemeente.example.nl/events \
    ///       --type nl.brp.persoon-verhuisd --sql "subject LIKE '9999%'"
    ///   knooppunt subscriptions create --config delivery=pull --type nl.brp.persoon-verhuisd
    #[command(verbatim_doc_comment)]
    Create {
        #[command(flatten)]
        connection: Connection,
        #[command(flatten)]
        output: Output,
        #[command(flatten)]
        subscription: NewSubscription,
    },
    /// Give a subscription a new secret for its signed deliveries (Standard Webhooks),
    /// printed once; the previous secret keeps signing beside it for the hub's
    /// `delivery.signing_overlap`, so the sink can switch without losing a delivery.
    RotateSecret {
        /// The subscription's id.
        id: String,
        #[command(flatten)]
        connection: Connection,
        #[command(flatten)]
        output: Output,
    },
    /// Delete a subscription and its pending deliveries.
    Delete {
        /// The subscription's id.
        id: String,
        #[command(flatten)]
        connection: Connection,
    },
}

/// A new subscription, from a file or from flags.
#[derive(Debug, clap::Args)]
pub(crate) struct NewSubscription {
    /// A file with the subscription as JSON (the body of POST /v1/subscriptions); `-` reads
    /// standard input.
    #[arg(long, short, value_name = "FILE", conflicts_with_all = ["sink", "types", "source", "sql", "config", "topic", "qos", "subject", "jetstream"])]
    file: Option<PathBuf>,
    /// Where events are delivered: a webhook (an absolute http or https URL), an MQTT 5
    /// broker (mqtt:// or mqtts://, with --topic), a NATS server (nats:// or tls://, with
    /// --subject) or an AMQP 1.0 broker (amqp:// or amqps://, the target address as the
    /// URL's path: amqps://host/amq/queue/<queue>); left out for a pull subscription. A
    /// broker's user name and password go in a --file's `sinkcredential` (PLAIN).
    #[arg(long)]
    sink: Option<String>,
    /// The MQTT topic each event is published to (a sink at an MQTT broker).
    #[arg(long, requires = "sink")]
    topic: Option<String>,
    /// The MQTT quality of service: 1 (at least once, the default), 2 or 0 (at most once).
    #[arg(long, requires = "topic", value_parser = clap::value_parser!(u8).range(0..=2))]
    qos: Option<u8>,
    /// The NATS subject each event is published to (a sink at a NATS server).
    #[arg(long, requires = "sink", conflicts_with = "topic")]
    subject: Option<String>,
    /// Wait for a JetStream stream's acknowledgement of each message (at least once);
    /// without it, core NATS (at most once).
    #[arg(long, requires = "subject")]
    jetstream: bool,
    /// An event type to receive; may be repeated.
    #[arg(long = "type", id = "types", value_name = "TYPE")]
    types: Vec<String>,
    /// Receive only events of this `source`.
    #[arg(long)]
    source: Option<String>,
    /// A CESQL filter, e.g. `subject LIKE '9999%'`.
    #[arg(long)]
    sql: Option<String>,
    /// A delivery setting, `KEY=VALUE` (delivery, mode, ordering, maxAttempts, ttl,
    /// initialBackoff, maxBackoff, timeout, lockDuration); may be repeated.
    #[arg(long, value_name = "KEY=VALUE")]
    config: Vec<String>,
}

pub(crate) async fn run(command: SubscriptionsCommand) -> Outcome {
    match command {
        SubscriptionsCommand::List {
            owner,
            connection,
            output,
        } => {
            let header = format!(
                "{:<36}  {:<16}  {:<9}  {:>7}  {:<40}  WHAT",
                "ID", "OWNER", "STATE", "BACKLOG", "SINK"
            );
            let path = match &owner {
                Some(owner) => format!("/v1/subscriptions?owner={}", segment(owner)),
                None => "/v1/subscriptions".to_owned(),
            };
            list(
                &connection,
                &output,
                &path,
                "No subscriptions.",
                &header,
                |item| {
                    format!(
                        "{:<36}  {:<16}  {:<9}  {:>7}  {:<40}  {}",
                        text(&item["id"]),
                        text(&item["owner"]),
                        text(&item["state"]),
                        item["backlog"].as_u64().unwrap_or(0),
                        text(&item["sink"]),
                        what(item)
                    )
                },
            )
            .await
        }
        SubscriptionsCommand::Get {
            id,
            connection,
            output,
        } => {
            let path = format!("/v1/subscriptions/{}", segment(&id));
            show(&connection, Method::GET, &path, &output, describe).await
        }
        SubscriptionsCommand::Create {
            connection,
            output,
            subscription,
        } => {
            let client = Client::new(&connection)?;
            let body = subscription.body()?;
            let answer = client
                .send_json(Method::POST, "/v1/subscriptions", &body)
                .await?;
            if answer.status != StatusCode::CREATED {
                return Ok(refused(&answer));
            }
            if output.json {
                print_json(&answer.body);
            } else {
                say!("created {}", text(&answer.body["id"]));
                describe(&answer.body);
                if let Some(secret) = answer.body["signingsecret"].as_str() {
                    say!("  signing:  {secret} (shown once: deliveries carry webhook-signature)");
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        SubscriptionsCommand::RotateSecret {
            id,
            connection,
            output,
        } => {
            let path = format!("/v1/subscriptions/{}/signing-secret", segment(&id));
            show(&connection, Method::POST, &path, &output, |answer| {
                say!(
                    "new signing secret of {id}: {}",
                    text(&answer["signingsecret"])
                );
                if let Some(until) = answer["previousValidUntil"].as_str() {
                    say!("the previous secret signs too until {until}");
                }
            })
            .await
        }
        SubscriptionsCommand::Delete { id, connection } => {
            let path = format!("/v1/subscriptions/{}", segment(&id));
            delete(&connection, &path, &id).await
        }
    }
}

impl NewSubscription {
    fn body(&self) -> anyhow::Result<Value> {
        if let Some(path) = &self.file {
            let text = if path.as_os_str() == "-" {
                std::io::read_to_string(std::io::stdin()).context("cannot read standard input")?
            } else {
                std::fs::read_to_string(path)
                    .with_context(|| format!("cannot read {}", path.display()))?
            };
            return serde_json::from_str(&text)
                .with_context(|| format!("{} is not JSON", path.display()));
        }
        let mut body = Map::new();
        if let Some(sink) = &self.sink {
            body.insert("sink".into(), json!(sink));
        }
        // The sink's scheme names the protocol (MQTT 5 for mqtt:// and mqtts://), unless a
        // broker's setting names it first.
        use knooppunt_store::Protocol;
        let protocol = if self.topic.is_some() {
            Protocol::Mqtt5
        } else if self.subject.is_some() {
            Protocol::Nats
        } else {
            self.sink
                .as_deref()
                .and_then(|sink| knooppunt_store::Sink::parse(sink).ok())
                .map_or(Protocol::Http, |sink| sink.protocol())
        };
        body.insert("protocol".into(), json!(protocol.as_str()));
        let mut settings = Map::new();
        if let Some(topic) = &self.topic {
            settings.insert("topicname".into(), json!(topic));
        }
        if let Some(qos) = self.qos {
            settings.insert("qos".into(), json!(qos));
        }
        if let Some(subject) = &self.subject {
            settings.insert("subject".into(), json!(subject));
        }
        if self.jetstream {
            settings.insert("jetstream".into(), json!(true));
        }
        if protocol != Protocol::Http {
            body.insert("protocolsettings".into(), Value::Object(settings));
        }
        if !self.types.is_empty() {
            body.insert("types".into(), json!(self.types));
        }
        if let Some(source) = &self.source {
            body.insert("source".into(), json!(source));
        }
        if let Some(sql) = &self.sql {
            body.insert("filters".into(), json!([{"sql": sql}]));
        }
        if !self.config.is_empty() {
            let mut config = Map::new();
            for setting in &self.config {
                let (key, value) = setting
                    .split_once('=')
                    .with_context(|| format!("--config {setting}: write KEY=VALUE"))?;
                config.insert(key.to_owned(), json!(value));
            }
            body.insert("config".into(), Value::Object(config));
        }
        Ok(Value::Object(body))
    }
}

/// What a subscription receives, in a few words.
fn what(subscription: &Value) -> String {
    let mut parts = Vec::new();
    if let Some(types) = subscription["types"].as_array() {
        let types: Vec<String> = types.iter().map(text).collect();
        parts.push(types.join(", "));
    }
    if let Some(source) = subscription["source"].as_str() {
        parts.push(format!("from {source}"));
    }
    if let Some(filters) = subscription["filters"].as_array()
        && !filters.is_empty()
    {
        parts.push(format!(
            "{} filter{}",
            filters.len(),
            if filters.len() == 1 { "" } else { "s" }
        ));
    }
    if parts.is_empty() {
        "every event".into()
    } else {
        parts.join("; ")
    }
}

fn describe(subscription: &Value) {
    say!("  state:    {}", text(&subscription["state"]));
    if let Some(problem) = subscription["validationProblem"].as_str() {
        say!("  why:      {problem}");
    }
    say!("  sink:     {}", text(&subscription["sink"]));
    if let Some(topic) = subscription["protocolsettings"]["topicname"].as_str() {
        say!(
            "  topic:    {topic} (MQTT, QoS {})",
            subscription["protocolsettings"]["qos"]
        );
    }
    if let Some(subject) = subscription["protocolsettings"]["subject"].as_str() {
        let delivery = if subscription["protocolsettings"]["jetstream"] == true {
            "JetStream, at least once"
        } else {
            "core NATS, at most once"
        };
        say!("  subject:  {subject} ({delivery})");
    }
    if subscription["protocol"] == "AMQP" {
        let settings = &subscription["protocolsettings"];
        let address = settings["address"].as_str().unwrap_or("the sink's path");
        let delivery = if settings["sendersettlementmode"] == "settled" {
            "settled, at most once"
        } else {
            "unsettled, at least once"
        };
        say!("  address:  {address} (AMQP 1.0, {delivery})");
    }
    say!("  receives: {}", what(subscription));
    if let Some(config) = subscription["config"].as_object() {
        let settings: Vec<String> = config
            .iter()
            .map(|(k, v)| format!("{k}={}", text(v)))
            .collect();
        say!("  config:   {}", settings.join(" "));
    }
    if let Some(backlog) = subscription["backlog"].as_u64() {
        say!("  backlog:  {backlog} pending");
    }
    let last = &subscription["lastDelivery"];
    if last.is_object() {
        let status = last["statusCode"]
            .as_u64()
            .map_or_else(|| text(&last["error"]), |code| format!("HTTP {code}"));
        say!(
            "  last:     {} ({status}) at {}, event number {}",
            text(&last["outcome"]),
            text(&last["time"]),
            last["sequence"]
        );
        if last["statusCode"].is_u64() && last["error"].is_string() {
            say!("            {}", text(&last["error"]));
        }
        let answer = &last["answer"];
        if let Some(headers) = answer["headers"].as_object() {
            for (name, value) in headers {
                say!("            {name}: {}", text(value));
            }
        }
        if let Some(body) = answer["body"].as_str().filter(|b| !b.is_empty()) {
            let more = if answer["bodyTruncated"] == true {
                " …"
            } else {
                ""
            };
            say!("            {}{more}", body.replace('\n', "\n            "));
        }
    }
}
