//! `knooppunt audit`: read, export and verify the audit trail of a running hub, or verify an
//! export without a hub.

use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use reqwest::Method;
use reqwest::header::{ACCEPT, HeaderMap, HeaderValue};
use serde_json::Value;

use super::{Client, Connection, Outcome, Output, list, refused, text};

#[derive(Debug, clap::Subcommand)]
pub(crate) enum AuditCommand {
    /// List the entries you may see (an admin: all), oldest first.
    List {
        #[command(flatten)]
        connection: Connection,
        #[command(flatten)]
        output: Output,
        /// Only entries of this operation or those under it (`approval`, `subscription.create`).
        #[arg(long)]
        name: Option<String>,
        /// Only entries from this time on (RFC 3339).
        #[arg(long)]
        from: Option<String>,
    },
    /// Write the entries you may see as JSON lines (the trail's own field names), for an
    /// archive or for `audit verify --file`. An admin's export is the whole trail; anyone
    /// else's holds only the entries they may see, a selection: verify that with
    /// `--selection`.
    Export {
        #[command(flatten)]
        connection: Connection,
        /// Where to write (standard output when absent).
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Check the chain: every entry's hash, and that each names the hash of the one before;
    /// names the first broken entry and exits with 3 when there is one. Asks the hub
    /// (admins), or with --file checks an export without one.
    Verify {
        #[command(flatten)]
        connection: Connection,
        /// A JSON lines export to check instead of asking the hub.
        #[arg(long)]
        file: Option<PathBuf>,
        /// The file is a selection of the trail (the console's export of a search, or the
        /// export of someone who is not an admin): each entry is checked against its own
        /// hash, and its link where it follows the entry before it, but not what lies
        /// between entries that do not follow each other. Only the whole trail shows that
        /// nothing was removed there.
        #[arg(long, requires = "file")]
        selection: bool,
        /// A head kept outside the store, `<sequence>:<hash>` (from `audit head`, the hub's
        /// log or its checkpoint file): the trail must still hold that entry, unchanged, so
        /// that entries removed from its end are found.
        #[arg(long, value_name = "SEQUENCE:HASH")]
        head: Option<String>,
    },
    /// Print the chain's head, `<sequence>:<hash>` (admins), with the hub's signature when
    /// it has a key: keep it elsewhere for `audit verify --head`.
    Head {
        #[command(flatten)]
        connection: Connection,
    },
}

/// The exit code of a broken chain (1 is a refusal, 2 a command that could not run).
const BROKEN: u8 = 3;

pub(crate) async fn run(command: AuditCommand) -> Outcome {
    match command {
        AuditCommand::List {
            connection,
            output,
            name,
            from,
        } => {
            let mut query = Vec::new();
            if let Some(name) = name {
                query.push(format!("name={}", super::segment(&name)));
            }
            if let Some(from) = from {
                query.push(format!("from={}", super::segment(&from)));
            }
            let path = if query.is_empty() {
                "/v1/audit".to_owned()
            } else {
                format!("/v1/audit?{}", query.join("&"))
            };
            let header = format!(
                "{:>6}  {:<24}  {:<34}  {:<5}  {:<12}  OBJECT",
                "SEQ", "TIME", "NAME", "OK", "ACTOR"
            );
            list(
                &connection,
                &output,
                &path,
                "No audit entries.",
                &header,
                |item| {
                    format!(
                        "{:>6}  {:<24}  {:<34}  {:<5}  {:<12}  {}",
                        item["sequence"],
                        text(&item["startTime"]),
                        text(&item["name"]),
                        text(&item["statusCode"]),
                        text(&item["actor"]),
                        text(&item["object"]),
                    )
                },
            )
            .await
        }
        AuditCommand::Export { connection, out } => export(&connection, out).await,
        AuditCommand::Verify {
            file: Some(file),
            selection: true,
            head,
            ..
        } => verify_selection(&file, head.as_deref()),
        AuditCommand::Verify {
            file: Some(file),
            head,
            ..
        } => verify_file(&file, head.as_deref()),
        AuditCommand::Verify {
            connection,
            file: None,
            head,
            ..
        } => {
            let path = match &head {
                Some(head) => format!("/v1/audit/verify?head={}", super::segment(head)),
                None => "/v1/audit/verify".to_owned(),
            };
            let client = Client::new(&connection)?;
            let answer = client
                .send(Method::GET, &path, HeaderMap::new(), None)
                .await?;
            if !answer.status.is_success() {
                return Ok(refused(&answer));
            }
            report(&answer.body)
        }
        AuditCommand::Head { connection } => {
            let client = Client::new(&connection)?;
            let answer = client
                .send(Method::GET, "/v1/audit/head", HeaderMap::new(), None)
                .await?;
            if !answer.status.is_success() {
                return Ok(refused(&answer));
            }
            say!("{}:{}", answer.body["sequence"], text(&answer.body["hash"]));
            if let Some(signature) = answer.body.get("signature") {
                say!(
                    "signed by the hub's key {} (EdDSA over `{}`): {}",
                    text(&signature["kid"]),
                    text(&signature["signed"]),
                    text(&signature["value"])
                );
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn report(outcome: &Value) -> Outcome {
    if outcome["intact"] == true {
        say!(
            "The audit trail is intact: {} entries checked (entries {} to {}).",
            outcome["entries"],
            text(&outcome["first"]),
            text(&outcome["last"])
        );
        Ok(ExitCode::SUCCESS)
    } else if outcome["truncated"] == true {
        say!(
            "The audit trail is NOT COMPLETE: {} ({} entries checked, entries {} to {}).",
            text(&outcome["why"]),
            outcome["entries"],
            text(&outcome["first"]),
            text(&outcome["last"])
        );
        Ok(ExitCode::from(BROKEN))
    } else {
        say!(
            "The audit trail is BROKEN at entry {}: {} ({} entries checked).",
            outcome["brokenAt"],
            text(&outcome["why"]),
            outcome["entries"]
        );
        Ok(ExitCode::from(BROKEN))
    }
}

async fn export(connection: &Connection, out: Option<PathBuf>) -> Outcome {
    let client = Client::new(connection)?;
    let mut writer: Box<dyn Write> = match &out {
        Some(path) => Box::new(std::io::BufWriter::new(
            std::fs::File::create(path)
                .with_context(|| format!("--out: cannot create {}", path.display()))?,
        )),
        None => Box::new(std::io::stdout().lock()),
    };
    let mut headers = HeaderMap::new();
    headers.insert(ACCEPT, HeaderValue::from_static("application/x-ndjson"));
    let mut next = Some("/v1/audit?pageSize=1000".to_owned());
    let mut count = 0;
    while let Some(path) = next {
        let answer = client
            .send(Method::GET, &path, headers.clone(), None)
            .await?;
        if !answer.status.is_success() {
            return Ok(refused(&answer));
        }
        next = super::next_page(&answer.headers);
        // One line per entry (the client read the body as one JSON value or as text).
        let lines = match &answer.body {
            Value::String(text) => text.clone(),
            Value::Null => String::new(),
            other => format!("{other}\n"),
        };
        count += lines.lines().count();
        crate::output::quietly_done_if_closed(writer.write_all(lines.as_bytes()))?;
    }
    crate::output::quietly_done_if_closed(writer.flush())?;
    if let Some(path) = out {
        tell!("{count} audit entries written to {}.", path.display());
    }
    Ok(ExitCode::SUCCESS)
}

fn verify_file(path: &PathBuf, head: Option<&str>) -> Outcome {
    let head = match head {
        None => None,
        Some(text) => Some(knooppunt_broker::parse_audit_head(text).ok_or_else(|| {
            anyhow::anyhow!("--head: `{text}` is not `<sequence>:<hash>` (the hash 64 hex digits)")
        })?),
    };
    let mut last: Option<(u64, String)> = None;
    let (mut first, mut checked) = (None, 0u64);
    let mut head_found = None;
    let mut start = knooppunt_store::StartAnchor::default();
    for entry in entries(path)? {
        let entry = match entry {
            Ok(entry) => entry,
            Err(why) => return report(&not_an_entry(checked, why)),
        };
        first = first.or(Some(entry.seq));
        if head.as_ref().is_some_and(|(seq, _)| *seq == entry.seq) {
            head_found = Some(entry.hash.clone());
        }
        let previous = last.as_ref().map(|(seq, hash)| (*seq, hash.as_str()));
        match knooppunt_store::verify_audit(previous, std::iter::once(&entry)) {
            Ok(end) => {
                start.see(&entry);
                checked += 1;
                last = end;
            }
            Err(mut broken) => {
                if broken.why.contains("in between are missing") {
                    broken.why.push_str(
                        " (an export of a search, or of someone who is not an admin, is a \
                         selection: check it with --selection)",
                    );
                }
                return report(&serde_json::json!({
                    "intact": false, "entries": checked,
                    "brokenAt": broken.seq, "why": broken.why,
                }));
            }
        }
    }
    if let Err(broken) = start.check() {
        return report(&serde_json::json!({
            "intact": false, "entries": checked,
            "brokenAt": broken.seq, "why": broken.why,
        }));
    }
    let mut outcome = serde_json::json!({
        "intact": true, "entries": checked, "first": first,
        "last": last.as_ref().map(|(seq, _)| *seq),
    });
    if let Some((seq, hash)) = head {
        let why = match (head_found, first) {
            (Some(found), _) if found == hash => None,
            (Some(_), _) => Some(format!(
                "entry {seq} is not the one the head names: it was replaced"
            )),
            (None, Some(oldest)) if oldest > seq => None,
            (None, _) => Some(format!(
                "the export has no entry {seq} (it ends at {}): entries were removed from its end",
                last.as_ref().map_or(0, |(newest, _)| *newest)
            )),
        };
        if let Some(why) = why {
            outcome["intact"] = serde_json::json!(false);
            outcome["truncated"] = serde_json::json!(true);
            outcome["why"] = serde_json::json!(why);
        }
    }
    report(&outcome)
}

/// The entries of a JSON lines export, one per line that is not blank; a line that is not
/// an entry as `(line number, why)`.
fn entries(
    path: &PathBuf,
) -> anyhow::Result<impl Iterator<Item = Result<knooppunt_store::AuditEntry, (usize, String)>>> {
    let file = std::fs::File::open(path)
        .with_context(|| format!("--file: cannot read {}", path.display()))?;
    Ok(std::io::BufReader::new(file)
        .lines()
        .enumerate()
        .filter(|(_, line)| !matches!(line, Ok(l) if l.trim().is_empty()))
        .map(|(number, line)| {
            let line = line.map_err(|error| (number + 1, format!("it cannot be read: {error}")))?;
            serde_json::from_str(&line)
                .map_err(|error| (number + 1, format!("it is not an audit entry: {error}")))
        }))
}

fn not_an_entry(checked: u64, (line, why): (usize, String)) -> Value {
    serde_json::json!({
        "intact": false, "entries": checked, "brokenAt": format!("line {line}"), "why": why,
    })
}

/// `audit verify --file --selection`: each entry against its own hash and the links within
/// runs of consecutive entries, saying what was not checked.
fn verify_selection(path: &PathBuf, head: Option<&str>) -> Outcome {
    let head = match head {
        None => None,
        Some(text) => Some(knooppunt_broker::parse_audit_head(text).ok_or_else(|| {
            anyhow::anyhow!("--head: `{text}` is not `<sequence>:<hash>` (the hash 64 hex digits)")
        })?),
    };
    let mut check = knooppunt_store::SelectionCheck::default();
    let mut head_is = None;
    for entry in entries(path)? {
        let entry = match entry {
            Ok(entry) => entry,
            Err(why) => return report(&not_an_entry(check.checked().entries, why)),
        };
        if let Err(broken) = check.see(&entry) {
            return report(&serde_json::json!({
                "intact": false, "entries": check.checked().entries,
                "brokenAt": broken.seq, "why": broken.why,
            }));
        }
        if head.as_ref().is_some_and(|(seq, _)| *seq == entry.seq) {
            head_is = Some(entry.hash.clone());
        }
    }
    let checked = check.checked();
    if let (Some((seq, hash)), Some(found)) = (&head, &head_is)
        && found != hash
    {
        return report(&serde_json::json!({
            "intact": false, "entries": checked.entries, "brokenAt": seq,
            "why": "it is not the entry the head names: it was replaced",
        }));
    }
    let range = match (checked.first, checked.last) {
        (Some(first), Some(last)) => format!(" (entries {first} to {last})"),
        _ => String::new(),
    };
    let count = |n: u64, one: &str, more: &str| format!("{n} {}", if n == 1 { one } else { more });
    say!(
        "The selection's entries are as written: {} checked against their own hash{range}, \
         {} between entries that follow each other.",
        count(checked.entries, "entry", "entries"),
        count(checked.links, "link", "links")
    );
    if checked.gaps > 0 {
        say!(
            "NOT CHECKED: what lies in {} between entries that do not follow each other. Only \
             the whole trail shows that nothing was removed there: `knooppunt audit verify` at \
             the hub, or `--file` with an admin's export.",
            count(checked.gaps, "gap", "gaps")
        );
    }
    match (&head, head_is) {
        (Some((seq, _)), None) => {
            say!("The head {seq} is not in the selection: it was not checked.")
        }
        (Some((seq, _)), Some(_)) => say!("The head {seq} is in the selection, unchanged."),
        _ => {}
    }
    Ok(ExitCode::SUCCESS)
}
