//! `knooppunt principals`: who may call the hub, managed at runtime (admin role).

use std::process::ExitCode;

use reqwest::Method;
use reqwest::header::HeaderMap;
use serde_json::{Map, Value, json};

use super::{Client, Connection, Outcome, Output, print_json, refused, segment};

/// Manage the principals of a running hub: they take effect at once, on every hub sharing
/// the store, without a restart. A token is printed once, when it is issued; the hub keeps
/// only its hash.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum PrincipalsCommand {
    /// List every principal.
    List {
        #[command(flatten)]
        connection: Connection,
        #[command(flatten)]
        output: Output,
    },
    /// Show one principal.
    Show {
        name: String,
        #[command(flatten)]
        connection: Connection,
    },
    /// Create a principal; prints its token (once).
    Create {
        /// Letters, digits, `-`, `_`, `.`, `:` and `@`.
        name: String,
        /// `publisher`, `subscriber`, `admin` or `metrics` (repeat for several).
        #[arg(long = "role", required = true)]
        roles: Vec<String>,
        /// The OIN (20 digits) of its organisation: it may then publish only
        /// `urn:nld:oin:<OIN>:` sources, and a trusted client certificate with this OIN
        /// identifies it.
        #[arg(long)]
        oin: Option<String>,
        /// A `type` prefix it may subscribe to (repeat for several; none: any type).
        #[arg(long = "subscribe-type-prefix")]
        subscribe_type_prefixes: Vec<String>,
        /// A `source` prefix it may publish (repeat for several; none: any source).
        #[arg(long = "publish-source-prefix")]
        publish_source_prefixes: Vec<String>,
        /// Issue no token (it authenticates with a client certificate or an access token).
        #[arg(long)]
        no_token: bool,
        #[command(flatten)]
        connection: Connection,
    },
    /// Change a principal's roles, OIN, or whether it is disabled.
    Update {
        name: String,
        /// Replace its roles with these (repeat for several).
        #[arg(long = "role")]
        roles: Vec<String>,
        /// Set its OIN.
        #[arg(long, conflicts_with = "no_oin")]
        oin: Option<String>,
        /// Remove its OIN.
        #[arg(long)]
        no_oin: bool,
        /// Refuse its requests from now on.
        #[arg(long, conflicts_with = "enable")]
        disable: bool,
        /// Accept its requests again.
        #[arg(long)]
        enable: bool,
        #[command(flatten)]
        connection: Connection,
    },
    /// Issue a new token; prints it once. The old one stops working at once, or with
    /// --keep-old after that long (its clients move to the new token meanwhile).
    Token {
        name: String,
        /// How long the old token still works (ISO 8601 duration, at most P7D), e.g. PT1H.
        #[arg(long, value_name = "DURATION")]
        keep_old: Option<String>,
        #[command(flatten)]
        connection: Connection,
    },
    /// Delete a principal.
    Delete {
        name: String,
        #[command(flatten)]
        connection: Connection,
    },
}

fn describe(principal: &Value) {
    let list = |key: &str| {
        let items: Vec<&str> = principal[key]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        if items.is_empty() {
            "any".to_owned()
        } else {
            items.join(", ")
        }
    };
    say!(
        "name:                    {}",
        principal["name"].as_str().unwrap_or("?")
    );
    say!("roles:                   {}", list("roles"));
    say!(
        "oin:                     {}",
        principal["oin"].as_str().unwrap_or("none")
    );
    say!("disabled:                {}", principal["disabled"]);
    say!(
        "bearer token:            {}",
        if principal["hasToken"] == true {
            "yes (kept hashed)"
        } else {
            "none"
        }
    );
    say!("subscribe type prefixes: {}", list("subscribeTypePrefixes"));
    say!("publish source prefixes: {}", list("publishSourcePrefixes"));
    say!(
        "origin:                  {}",
        principal["origin"].as_str().unwrap_or("?")
    );
}

fn print_token(principal: &Value) {
    if let Some(token) = principal["token"].as_str() {
        say!();
        say!("token: {token}");
        say!("This is the only time the token is shown: give it to the principal now.");
    }
    if let Some(until) = principal["previousValidUntil"].as_str() {
        say!("The old token keeps working until {until}.");
    }
}

pub(crate) async fn run(command: PrincipalsCommand) -> Outcome {
    match command {
        PrincipalsCommand::List { connection, output } => {
            let client = Client::new(&connection)?;
            let items = match client.all_pages("/v1/principals").await? {
                Ok(items) => items,
                Err(answer) => return Ok(refused(&answer)),
            };
            if output.json {
                print_json(&Value::Array(items));
                return Ok(ExitCode::SUCCESS);
            }
            say!(
                "{:<24}  {:<30}  {:<20}  {:<8}  ORIGIN",
                "NAME",
                "ROLES",
                "OIN",
                "STATE"
            );
            for principal in &items {
                let roles: Vec<&str> = principal["roles"]
                    .as_array()
                    .map(|a| a.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                say!(
                    "{:<24}  {:<30}  {:<20}  {:<8}  {}",
                    principal["name"].as_str().unwrap_or("?"),
                    roles.join(","),
                    principal["oin"].as_str().unwrap_or("-"),
                    if principal["disabled"] == true {
                        "disabled"
                    } else {
                        "active"
                    },
                    principal["origin"].as_str().unwrap_or("?"),
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        PrincipalsCommand::Show { name, connection } => {
            let client = Client::new(&connection)?;
            let path = format!("/v1/principals/{}", segment(&name));
            let answer = client
                .send(Method::GET, &path, HeaderMap::new(), None)
                .await?;
            if !answer.status.is_success() {
                return Ok(refused(&answer));
            }
            describe(&answer.body);
            Ok(ExitCode::SUCCESS)
        }
        PrincipalsCommand::Create {
            name,
            roles,
            oin,
            subscribe_type_prefixes,
            publish_source_prefixes,
            no_token,
            connection,
        } => {
            let client = Client::new(&connection)?;
            let mut body = json!({
                "name": name,
                "roles": roles,
                "subscribeTypePrefixes": subscribe_type_prefixes,
                "publishSourcePrefixes": publish_source_prefixes,
                "issueToken": !no_token,
            });
            if let Some(oin) = oin {
                body["oin"] = json!(oin);
            }
            let answer = client
                .send_json(Method::POST, "/v1/principals", &body)
                .await?;
            if !answer.status.is_success() {
                return Ok(refused(&answer));
            }
            describe(&answer.body);
            print_token(&answer.body);
            Ok(ExitCode::SUCCESS)
        }
        PrincipalsCommand::Update {
            name,
            roles,
            oin,
            no_oin,
            disable,
            enable,
            connection,
        } => {
            let client = Client::new(&connection)?;
            let mut patch = Map::new();
            if !roles.is_empty() {
                patch.insert("roles".into(), json!(roles));
            }
            if let Some(oin) = oin {
                patch.insert("oin".into(), json!(oin));
            }
            if no_oin {
                patch.insert("oin".into(), Value::Null);
            }
            if disable || enable {
                patch.insert("disabled".into(), json!(disable));
            }
            if patch.is_empty() {
                anyhow::bail!(
                    "nothing to change: give --role, --oin, --no-oin, --disable or --enable"
                );
            }
            let path = format!("/v1/principals/{}", segment(&name));
            let answer = client
                .send_json(Method::PATCH, &path, &Value::Object(patch))
                .await?;
            if !answer.status.is_success() {
                return Ok(refused(&answer));
            }
            describe(&answer.body);
            Ok(ExitCode::SUCCESS)
        }
        PrincipalsCommand::Token {
            name,
            keep_old,
            connection,
        } => {
            let client = Client::new(&connection)?;
            let mut path = format!("/v1/principals/{}/token", segment(&name));
            if let Some(overlap) = &keep_old {
                path.push_str(&format!("?keepOld={}", segment(overlap)));
            }
            let answer = client
                .send(Method::POST, &path, HeaderMap::new(), None)
                .await?;
            if !answer.status.is_success() {
                return Ok(refused(&answer));
            }
            print_token(&answer.body);
            Ok(ExitCode::SUCCESS)
        }
        PrincipalsCommand::Delete { name, connection } => {
            let client = Client::new(&connection)?;
            let path = format!("/v1/principals/{}", segment(&name));
            let answer = client
                .send(Method::DELETE, &path, HeaderMap::new(), None)
                .await?;
            if !answer.status.is_success() {
                return Ok(refused(&answer));
            }
            say!("principal {name} deleted");
            Ok(ExitCode::SUCCESS)
        }
    }
}
