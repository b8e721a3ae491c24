//! `knooppunt approvals`: the data owners' approvals on a running hub.

use std::process::ExitCode;

use reqwest::Method;
use serde_json::{Map, Value, json};

use super::{Client, Connection, Outcome, Output, list, print_json, refused, segment, text};

#[derive(Debug, clap::Subcommand)]
pub(crate) enum ApprovalsCommand {
    /// List the approvals you may see: as a data owner those of your event types, as a
    /// subscriber those of your subscriptions (an admin: all).
    List {
        #[command(flatten)]
        connection: Connection,
        #[command(flatten)]
        output: Output,
        /// Only approvals in this state: requested, granted, refused or revoked.
        #[arg(long)]
        state: Option<String>,
    },
    /// Grant, refuse or revoke a subscription's approval for one of your event types.
    ///
    /// Example:
    ///   knooppunt approvals decide <eventtype-id> <subscription-id> --state granted \
    ///       --reason "Wettelijke taak, art. 3.2 Wet BRP"
    #[command(verbatim_doc_comment)]
    Decide {
        /// The event type's (catalog entry's) id.
        eventtype: String,
        /// The subscription's id.
        subscription: String,
        /// granted, refused or revoked.
        #[arg(long)]
        state: String,
        /// Why (required to refuse or revoke; the subscriber sees it).
        #[arg(long)]
        reason: Option<String>,
        #[command(flatten)]
        connection: Connection,
        #[command(flatten)]
        output: Output,
    },
}

pub(crate) async fn run(command: ApprovalsCommand) -> Outcome {
    match command {
        ApprovalsCommand::List {
            connection,
            output,
            state,
        } => {
            let path = match state {
                Some(state) => format!("/v1/approvals?state={}", segment(&state)),
                None => "/v1/approvals".to_owned(),
            };
            let header = format!(
                "{:<36}  {:<36}  {:<10}  {:<12}  TYPE",
                "EVENTTYPE", "SUBSCRIPTION", "STATE", "SUBSCRIBER"
            );
            list(
                &connection,
                &output,
                &path,
                "No approvals.",
                &header,
                |item| {
                    format!(
                        "{:<36}  {:<36}  {:<10}  {:<12}  {}",
                        text(&item["eventtype"]),
                        text(&item["subscription"]),
                        text(&item["state"]),
                        text(&item["subscriber"]),
                        text(&item["type"]),
                    )
                },
            )
            .await
        }
        ApprovalsCommand::Decide {
            eventtype,
            subscription,
            state,
            reason,
            connection,
            output,
        } => {
            let mut body = Map::new();
            body.insert("state".into(), json!(state));
            if let Some(reason) = reason {
                body.insert("reason".into(), json!(reason));
            }
            let path = format!(
                "/v1/eventtypes/{}/approvals/{}",
                segment(&eventtype),
                segment(&subscription)
            );
            let answer = Client::new(&connection)?
                .send_json(Method::PUT, &path, &Value::Object(body))
                .await?;
            if !answer.status.is_success() {
                return Ok(refused(&answer));
            }
            if output.json {
                print_json(&answer.body);
            } else {
                say!(
                    "Subscription {subscription} is now {} for event type {eventtype}.",
                    text(&answer.body["state"])
                );
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}
