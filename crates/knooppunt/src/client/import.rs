//! `knooppunt import open-notificaties`: moving over from Open Notificaties. Reads a
//! running Open Notificaties' kanalen and abonnementen through its Notificaties API 1.0 and
//! makes each one this hub lacks through this hub's own Notificaties API (as a ZGW client,
//! so every rule of the facade holds: the callback check, the address guard, the scopes).
//! Idempotent: what is here already is left as it is, and said so; a dry run only reads.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use reqwest::Method;
use serde_json::{Value, json};

use super::{Client, Connection, Outcome, Output, print_json};

#[derive(Debug, clap::Subcommand)]
pub(crate) enum ImportCommand {
    /// Copy the kanalen and abonnementen of a running Open Notificaties to this hub.
    ///
    /// Reads GET /kanaal and GET /abonnement of the Open Notificaties at --url (its
    /// Notificaties API, ending in /api/v1) and makes each kanaal and abonnement this hub
    /// lacks through this hub's Notificaties API, as the ZGW client --client-id (it owns the
    /// abonnementen made; making kanalen needs the scope notificaties.publiceren, making
    /// abonnementen notificaties.consumeren). A kanaal is here when one has its name; an
    /// abonnement when the client has one with the same callbackUrl, kanalen, filters and
    /// CloudEvents settings. Running it again makes nothing twice.
    ///
    /// Open Notificaties never shows an abonnement's `auth` (the Authorization header it
    /// sends the callback): give each one in --auth-file, or the abonnement is skipped and
    /// reported. Each abonnement made is checked as any new one is: its callback must take
    /// a test notificatie.
    ///
    /// Prints one line per kanaal and abonnement (`created`, `would create`, `already here`,
    /// `differs`, `skipped` or `failed`, with why) and a count; exits with 1 when anything
    /// was skipped, failed or differs, 2 when a side cannot be read.
    ///
    /// Example:
    ///   knooppunt import open-notificaties --url https://on.example.nl/api/v1 \
    ///       --on-client-id knooppunt-import --client-id zac --auth-file auth.txt --dry-run
    #[command(verbatim_doc_comment)]
    OpenNotificaties(OpenNotificatiesArgs),
}

#[derive(Debug, clap::Args)]
pub(crate) struct OpenNotificatiesArgs {
    /// The Notificaties API of the Open Notificaties to read from (ending in /api/v1).
    #[arg(long, value_name = "URL")]
    url: String,
    /// A JWT that Open Notificaties accepts; or give --on-client-id and --on-secret, and
    /// one is made. Prefer the environment variable: others can see command lines.
    #[arg(
        long,
        env = "OPEN_NOTIFICATIES_TOKEN",
        hide_env_values = true,
        required_unless_present = "on_client_id"
    )]
    token: Option<String>,
    /// A client of Open Notificaties (in its Autorisaties API) to read with.
    #[arg(
        long,
        env = "OPEN_NOTIFICATIES_CLIENT_ID",
        requires = "on_secret",
        conflicts_with = "token"
    )]
    on_client_id: Option<String>,
    /// That client's secret.
    #[arg(long, env = "OPEN_NOTIFICATIES_SECRET", hide_env_values = true)]
    on_secret: Option<String>,
    /// This hub's base URL.
    #[arg(long, env = "KNOOPPUNT_URL", default_value = "http://127.0.0.1:8080")]
    hub: String,
    /// The ZGW client of this hub that makes the kanalen and owns the abonnementen.
    #[arg(long, env = "KNOOPPUNT_ZGW_CLIENT_ID")]
    client_id: String,
    /// That client's secret.
    #[arg(long, env = "KNOOPPUNT_ZGW_SECRET", hide_env_values = true)]
    secret: String,
    /// A file with the `auth` of the abonnementen: one per line, its callbackUrl, a space
    /// and the header's value (`https://zac.example.nl/callback Bearer abc…`); `#` starts a
    /// comment.
    #[arg(long, value_name = "FILE")]
    auth_file: Option<PathBuf>,
    /// Only the abonnementen whose callbackUrl starts with this (repeat for more): import
    /// each consuming component's abonnementen as its own client.
    #[arg(long = "only-callback", value_name = "PREFIX")]
    only_callbacks: Vec<String>,
    /// Only the kanalen, or only the abonnementen.
    #[arg(long, value_enum)]
    only: Option<Part>,
    /// Read both sides and report what would be made; make nothing.
    #[arg(long)]
    dry_run: bool,
    /// A PEM file of CA certificates to trust for https, next to the system's.
    #[arg(long, env = "KNOOPPUNT_CA_FILE")]
    ca_file: Option<PathBuf>,
    #[command(flatten)]
    output: Output,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Part {
    Kanalen,
    Abonnementen,
}

/// What became of one kanaal or abonnement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Done {
    Created,
    WouldCreate,
    AlreadyHere,
    Differs,
    Skipped,
    Failed,
}

impl Done {
    fn word(self) -> &'static str {
        match self {
            Done::Created => "created",
            Done::WouldCreate => "would create",
            Done::AlreadyHere => "already here",
            Done::Differs => "differs",
            Done::Skipped => "skipped",
            Done::Failed => "failed",
        }
    }

    /// Whether a person must look at it.
    fn needs_attention(self) -> bool {
        matches!(self, Done::Differs | Done::Skipped | Done::Failed)
    }
}

/// One line of the report.
#[derive(Debug)]
struct Line {
    what: &'static str,
    name: String,
    done: Done,
    why: Option<String>,
}

pub(crate) fn run(command: ImportCommand) -> Outcome {
    let ImportCommand::OpenNotificaties(args) = command;
    super::run(import(args))
}

async fn import(args: OpenNotificatiesArgs) -> Outcome {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    const USER: &str = "knooppunt import open-notificaties";
    let on_token = match (&args.token, &args.on_client_id, &args.on_secret) {
        (Some(token), _, _) => token.clone(),
        (None, Some(id), Some(secret)) => {
            knooppunt_identity::zgw::sign(id, secret.as_bytes(), now, USER)
        }
        _ => anyhow::bail!("give --token, or --on-client-id and --on-secret"),
    };
    let connect = |url: &str, token: String| {
        Client::new(&Connection {
            url: url.to_owned(),
            token: Some(token),
            ca_file: args.ca_file.clone(),
            identity_file: None,
        })
    };
    let on = connect(&args.url, on_token)
        .context("--url")?
        .talking_to("Open Notificaties", "--url");
    let hub_token =
        knooppunt_identity::zgw::sign(&args.client_id, args.secret.as_bytes(), now, USER);
    let hub = connect(
        &format!("{}/api/v1", args.hub.trim_end_matches('/')),
        hub_token,
    )
    .context("--hub")?
    .talking_to("this hub", "--hub");
    let auths = match &args.auth_file {
        Some(path) => read_auth_file(path)?,
        None => BTreeMap::new(),
    };

    let mut lines = Vec::new();
    if args.only != Some(Part::Abonnementen) {
        let theirs = list(&on, "/kanaal", "Open Notificaties").await?;
        let ours = list(&hub, "/kanaal", "this hub").await?;
        for kanaal in &theirs {
            lines.push(kanaal_line(&hub, kanaal, &ours, args.dry_run).await?);
        }
    }
    if args.only != Some(Part::Kanalen) {
        let theirs = list(&on, "/abonnement", "Open Notificaties").await?;
        let ours = list(&hub, "/abonnement", "this hub").await?;
        let ours: Vec<Value> = ours.iter().map(comparable).collect();
        for abonnement in &theirs {
            let callback = abonnement["callbackUrl"].as_str().unwrap_or_default();
            if !args.only_callbacks.is_empty()
                && !args
                    .only_callbacks
                    .iter()
                    .any(|p| callback.starts_with(p.as_str()))
            {
                continue;
            }
            let auth = abonnement["auth"]
                .as_str()
                .filter(|a| !a.is_empty())
                .or_else(|| auths.get(callback).map(String::as_str));
            lines.push(abonnement_line(&hub, abonnement, auth, &ours, args.dry_run).await?);
        }
    }
    report(&lines, args.dry_run, args.output.json);
    Ok(if lines.iter().any(|l| l.done.needs_attention()) {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// `callbackUrl value` lines, by callbackUrl.
fn read_auth_file(path: &std::path::Path) -> anyhow::Result<BTreeMap<String, String>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("--auth-file: cannot read {}", path.display()))?;
    let mut auths = BTreeMap::new();
    for (number, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let Some((callback, value)) = line.split_once(char::is_whitespace) else {
            anyhow::bail!(
                "--auth-file {} line {}: write the callbackUrl, a space and the auth value",
                path.display(),
                number + 1
            );
        };
        auths.insert(callback.to_owned(), value.trim().to_owned());
    }
    Ok(auths)
}

/// A whole collection of a Notificaties API (`side` names it in errors): a JSON array, or
/// pages of `results` linked by `next` on the same host.
async fn list(client: &Client, path: &str, side: &str) -> anyhow::Result<Vec<Value>> {
    const MOST: usize = 100_000;
    let mut items = Vec::new();
    let mut next = Some(path.to_owned());
    while let Some(path) = next.take() {
        let answer = client
            .send(Method::GET, &path, Default::default(), None)
            .await
            .with_context(|| format!("cannot read {path} of {side}"))?;
        if !answer.status.is_success() {
            anyhow::bail!(
                "{side} answered {} to GET {path}: {}",
                answer.status,
                fout_text(&answer.body)
            );
        }
        match answer.body {
            Value::Array(page) => items.extend(page),
            Value::Object(mut page) if page.get("results").is_some_and(Value::is_array) => {
                if let Some(Value::Array(results)) = page.remove("results") {
                    items.extend(results);
                }
                next = match page.get("next").and_then(Value::as_str) {
                    Some(url) => Some(client.path_of(url).with_context(|| {
                        format!("{side}'s next page {url} is not under its URL")
                    })?),
                    None => None,
                };
            }
            other => anyhow::bail!("{side} answered GET {path} with no list: {other}"),
        }
        anyhow::ensure!(
            items.len() <= MOST,
            "{side} lists more than {MOST} at {path}"
        );
    }
    Ok(items)
}

async fn kanaal_line(
    hub: &Client,
    kanaal: &Value,
    ours: &[Value],
    dry_run: bool,
) -> anyhow::Result<Line> {
    let naam = kanaal["naam"].as_str().unwrap_or_default().to_owned();
    let filters = sorted_strings(&kanaal["filters"]);
    let line = |done, why: Option<String>| Line {
        what: "kanaal",
        name: naam.clone(),
        done,
        why,
    };
    if let Some(here) = ours.iter().find(|k| k["naam"] == kanaal["naam"]) {
        let here_filters = sorted_strings(&here["filters"]);
        return Ok(if here_filters == filters {
            line(Done::AlreadyHere, None)
        } else {
            line(
                Done::Differs,
                Some(format!(
                    "here it has the filters [{}], there [{}]; left as it is",
                    here_filters.join(", "),
                    filters.join(", ")
                )),
            )
        });
    }
    if dry_run {
        return Ok(line(Done::WouldCreate, None));
    }
    let mut body = json!({"naam": naam, "filters": filters});
    if let Some(link) = kanaal["documentatieLink"]
        .as_str()
        .filter(|l| !l.is_empty())
    {
        body["documentatieLink"] = json!(link);
    }
    let (done, why) = create(hub, "/kanaal", &body).await?;
    Ok(line(done, why))
}

async fn abonnement_line(
    hub: &Client,
    abonnement: &Value,
    auth: Option<&str>,
    ours: &[Value],
    dry_run: bool,
) -> anyhow::Result<Line> {
    let wanted = comparable(abonnement);
    let callback = wanted["callbackUrl"].as_str().unwrap_or_default();
    let kanalen: Vec<&str> = wanted["kanalen"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|k| k["naam"].as_str())
        .collect();
    let line = |done, why: Option<String>| Line {
        what: "abonnement",
        name: format!("{callback} ({})", kanalen.join(", ")),
        done,
        why,
    };
    if ours.contains(&wanted) {
        return Ok(line(Done::AlreadyHere, None));
    }
    let Some(auth) = auth else {
        return Ok(line(
            Done::Skipped,
            Some(
                "Open Notificaties does not show its `auth`: give it in --auth-file \
                 (the callbackUrl, a space, the value)"
                    .into(),
            ),
        ));
    };
    if dry_run {
        return Ok(line(Done::WouldCreate, None));
    }
    let mut body = wanted.clone();
    body["auth"] = json!(auth);
    let (done, why) = create(hub, "/abonnement", &body).await?;
    Ok(line(done, why))
}

/// Posts `body` to `path` of this hub's Notificaties API: created, or failed with the
/// hub's `Fout`.
async fn create(hub: &Client, path: &str, body: &Value) -> anyhow::Result<(Done, Option<String>)> {
    let answer = hub.send_json(Method::POST, path, body).await?;
    Ok(if answer.status.is_success() {
        (Done::Created, None)
    } else {
        let why = format!("{}: {}", answer.status, fout_text(&answer.body));
        (Done::Failed, Some(why))
    })
}

/// What makes two abonnementen the same, in one order: the callback, the kanalen with
/// their filters, and the CloudEvents settings.
fn comparable(abonnement: &Value) -> Value {
    let groups = |member: &str, key: &str| {
        let mut groups: Vec<Value> = abonnement[member]
            .as_array()
            .into_iter()
            .flatten()
            .map(|group| {
                let filters: BTreeMap<String, Value> = group["filters"]
                    .as_object()
                    .map(|f| f.clone().into_iter().collect())
                    .unwrap_or_default();
                json!({key: group[key], "filters": filters})
            })
            .collect();
        groups.sort_by_key(Value::to_string);
        groups
    };
    let mut comparable = json!({
        "callbackUrl": abonnement["callbackUrl"],
        "kanalen": groups("kanalen", "naam"),
    });
    if abonnement["sendCloudevents"] == json!(true) {
        comparable["sendCloudevents"] = json!(true);
    }
    let cloudevent_filters = groups("cloudeventFilters", "typeSubstring");
    if !cloudevent_filters.is_empty() {
        comparable["cloudeventFilters"] = json!(cloudevent_filters);
    }
    comparable
}

fn sorted_strings(value: &Value) -> Vec<String> {
    let mut strings: Vec<String> = value
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s.as_str().map(str::to_owned))
        .collect();
    strings.sort();
    strings
}

/// A `Fout` (or any answer) in one line: its detail and each invalid parameter's reason.
fn fout_text(body: &Value) -> String {
    let mut text = [&body["detail"], &body["title"]]
        .into_iter()
        .filter_map(Value::as_str)
        .find(|text| !text.is_empty())
        .map(str::to_owned)
        .unwrap_or_else(|| body.to_string());
    for param in body["invalidParams"].as_array().into_iter().flatten() {
        text.push_str(&format!(
            "; {}: {}",
            param["name"].as_str().unwrap_or("?"),
            param["reason"].as_str().unwrap_or("?")
        ));
    }
    text
}

fn report(lines: &[Line], dry_run: bool, json: bool) {
    let mut counts: BTreeMap<Done, usize> = BTreeMap::new();
    for line in lines {
        *counts.entry(line.done).or_default() += 1;
    }
    if json {
        let items: Vec<Value> = lines
            .iter()
            .map(
                |l| json!({"kind": l.what, "name": l.name, "outcome": l.done.word(), "why": l.why}),
            )
            .collect();
        let counts: serde_json::Map<String, Value> = counts
            .iter()
            .map(|(done, n)| (done.word().to_owned(), json!(n)))
            .collect();
        print_json(&json!({"dryRun": dry_run, "items": items, "counts": counts}));
        return;
    }
    for line in lines {
        match &line.why {
            Some(why) => say!("{} {}: {} ({why})", line.what, line.name, line.done.word()),
            None => say!("{} {}: {}", line.what, line.name, line.done.word()),
        }
    }
    let summary: Vec<String> = counts
        .iter()
        .map(|(done, n)| format!("{n} {}", done.word()))
        .collect();
    let summary = if summary.is_empty() {
        "nothing to import".to_owned()
    } else {
        summary.join(", ")
    };
    say!(
        "{}{summary}",
        if dry_run {
            "dry run, nothing made: "
        } else {
            ""
        }
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn abonnementen_compare_whatever_their_order() {
        let there = json!({"url": "https://on/abonnement/1", "callbackUrl": "https://zac/cb",
            "kanalen": [{"naam": "zaken", "filters": {"b": "2", "a": "1"}}, {"naam": "documenten"}],
            "sendCloudevents": false, "cloudeventFilters": []});
        let here = json!({"url": "https://hub/abonnement/9", "callbackUrl": "https://zac/cb",
            "kanalen": [{"naam": "documenten", "filters": {}}, {"naam": "zaken", "filters": {"a": "1", "b": "2"}}],
            "sendCloudevents": false, "cloudeventFilters": []});
        assert_eq!(comparable(&there), comparable(&here));
        let other = json!({"callbackUrl": "https://zac/cb", "kanalen": [{"naam": "zaken"}]});
        assert_ne!(comparable(&there), comparable(&other));
    }

    #[test]
    fn a_fout_reads_as_one_line() {
        let fout = json!({"code": "invalid", "title": "Invalid input.", "detail": "",
            "invalidParams": [{"name": "callbackUrl", "code": "invalid-callback-url", "reason": "privé adres"}]});
        assert_eq!(fout_text(&fout), "Invalid input.; callbackUrl: privé adres");
    }
}
