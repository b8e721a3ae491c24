//! `knooppunt eventtypes`: the event type catalog of a running hub.

use std::process::ExitCode;

use reqwest::{Method, StatusCode};
use serde_json::{Map, Value, json};

use super::{
    Client, Connection, Outcome, Output, delete, list, print_json, refused, segment, show, text,
};

#[derive(Debug, clap::Subcommand)]
pub(crate) enum EventTypesCommand {
    /// List the catalog, oldest entry first.
    List {
        #[command(flatten)]
        connection: Connection,
        #[command(flatten)]
        output: Output,
    },
    /// Show one entry.
    Get {
        /// The entry's id.
        id: String,
        #[command(flatten)]
        connection: Connection,
        #[command(flatten)]
        output: Output,
    },
    /// Describe events you publish: a source prefix you may publish and a type.
    ///
    /// Example:
    ///   knooppunt eventtypes create --source urn:nld:oin:00000001823288444000: \
    ///       --type nl.brp.persoon-verhuisd --description "Een ingezetene is verhuisd."
    #[command(verbatim_doc_comment)]
    Create {
        #[command(flatten)]
        connection: Connection,
        #[command(flatten)]
        output: Output,
        /// The `source` prefix of the events.
        #[arg(long)]
        source: String,
        /// The event type (or, with --prefix, a prefix of types).
        #[arg(long = "type", value_name = "TYPE")]
        event_type: String,
        /// Match every type that starts with --type.
        #[arg(long)]
        prefix: bool,
        /// What these events are.
        #[arg(long)]
        description: String,
        /// A link to their documentation.
        #[arg(long)]
        documentation: Option<String>,
        /// Only subscriptions you approve receive these events (`knooppunt approvals`).
        #[arg(long)]
        approval_required: bool,
    },
    /// Delete an entry (its owner or an admin).
    Delete {
        /// The entry's id.
        id: String,
        #[command(flatten)]
        connection: Connection,
    },
}

pub(crate) async fn run(command: EventTypesCommand) -> Outcome {
    match command {
        EventTypesCommand::List { connection, output } => {
            let header = format!("{:<36}  {:<12}  {:<40}  TYPE", "ID", "OWNER", "SOURCE");
            list(
                &connection,
                &output,
                "/v1/eventtypes",
                "No catalog entries.",
                &header,
                |item| {
                    format!(
                        "{:<36}  {:<12}  {:<40}  {}",
                        text(&item["id"]),
                        text(&item["owner"]),
                        text(&item["source"]),
                        what(item)
                    )
                },
            )
            .await
        }
        EventTypesCommand::Get {
            id,
            connection,
            output,
        } => {
            let path = format!("/v1/eventtypes/{}", segment(&id));
            show(&connection, Method::GET, &path, &output, describe).await
        }
        EventTypesCommand::Create {
            connection,
            output,
            source,
            event_type,
            prefix,
            description,
            documentation,
            approval_required,
        } => {
            let client = Client::new(&connection)?;
            let mut body = Map::new();
            body.insert("source".into(), json!(source));
            body.insert("type".into(), json!(event_type));
            body.insert(
                "typeMatch".into(),
                json!(if prefix { "prefix" } else { "exact" }),
            );
            body.insert("description".into(), json!(description));
            if let Some(link) = documentation {
                body.insert("documentation".into(), json!(link));
            }
            if approval_required {
                body.insert("approval".into(), json!("approval-required"));
            }
            let answer = client
                .send_json(Method::POST, "/v1/eventtypes", &Value::Object(body))
                .await?;
            if answer.status != StatusCode::CREATED {
                return Ok(refused(&answer));
            }
            if output.json {
                print_json(&answer.body);
            } else {
                say!("created {}", text(&answer.body["id"]));
                describe(&answer.body);
            }
            Ok(ExitCode::SUCCESS)
        }
        EventTypesCommand::Delete { id, connection } => {
            let path = format!("/v1/eventtypes/{}", segment(&id));
            delete(&connection, &path, &id).await
        }
    }
}

/// The type it covers, with its flags.
fn what(entry: &Value) -> String {
    let mut what = text(&entry["type"]);
    if entry["typeMatch"] == "prefix" {
        what.push('*');
    }
    if entry["approval"] == "approval-required" {
        what.push_str(" (approval required)");
    }
    if entry["deprecated"] == true {
        what.push_str(" (deprecated)");
    }
    what
}

fn describe(entry: &Value) {
    say!("  owner:    {}", text(&entry["owner"]));
    say!("  source:   {}", text(&entry["source"]));
    say!("  type:     {}", what(entry));
    say!("  about:    {}", text(&entry["description"]));
    if let Some(link) = entry["documentation"].as_str() {
        say!("  docs:     {link}");
    }
}
