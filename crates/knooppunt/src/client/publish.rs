//! `knooppunt publish`: sends an event (or a batch) to the hub, from a file exactly as
//! written or made from flags, in structured or binary mode.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};
use knooppunt_event::binding::http::encode_binary;
use knooppunt_event::format::json::{BATCH_MEDIA_TYPE, MEDIA_TYPE, decode_event, encode_event};
use knooppunt_event::{AttributeValue, Data, EventBuilder, JsonText, Violations};
use reqwest::Method;
use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderValue};
use serde_json::Value;

use super::{Client, Connection, Outcome, Output, print_json, refused};

/// The flags of `knooppunt publish` (its help text is in `main.rs`).
#[derive(Debug, clap::Args)]
pub(crate) struct PublishArgs {
    #[command(flatten)]
    connection: Connection,
    #[command(flatten)]
    output: Output,
    /// A file with the event (a JSON object) or a batch (a JSON array); `-` reads standard
    /// input.
    #[arg(long, short, value_name = "FILE", conflicts_with_all = ["source", "ty", "id"])]
    file: Option<PathBuf>,
    /// Send in binary content mode (`ce-` headers, the data as the body) instead of
    /// structured mode.
    #[arg(long)]
    binary: bool,
    /// The event's `id` (default: a new UUID).
    #[arg(long)]
    id: Option<String>,
    /// The event's `source`, e.g. `urn:nld:oin:<OIN>:systeem:<name>`.
    #[arg(long, required_unless_present = "file")]
    source: Option<String>,
    /// The event's `type`, e.g. `nl.brp.persoon-verhuisd`.
    #[arg(
        long = "type",
        id = "ty",
        value_name = "TYPE",
        required_unless_present = "file"
    )]
    ty: Option<String>,
    /// The event's `subject`.
    #[arg(long)]
    subject: Option<String>,
    /// The event's `time` (RFC 3339), or `now`.
    #[arg(long)]
    time: Option<String>,
    /// The `datacontenttype`; without it the data must be JSON.
    #[arg(long)]
    datacontenttype: Option<String>,
    /// The `dataschema` (an absolute URI).
    #[arg(long)]
    dataschema: Option<String>,
    /// The data: JSON (for a JSON content type or none), otherwise text.
    #[arg(long, conflicts_with = "data_file")]
    data: Option<String>,
    /// The data from a file: JSON or text as for `--data`; other content types as bytes.
    #[arg(long, value_name = "FILE")]
    data_file: Option<PathBuf>,
    /// An extension attribute: `NAME=VALUE` for a string, `NAME:=VALUE` for an integer or
    /// boolean (`sequence:=42`, `urgent:=true`). May be repeated.
    #[arg(long = "extension", short = 'e', value_name = "NAME=VALUE")]
    extensions: Vec<String>,
}

/// What the hub is sent.
struct Message {
    headers: HeaderMap,
    body: Vec<u8>,
}

pub(crate) async fn run(args: PublishArgs) -> Outcome {
    let client = Client::new(&args.connection)?;
    let message = match &args.file {
        Some(path) => from_file(path, args.binary)?,
        None => {
            let event = build(&args)?;
            if args.binary {
                let encoded = encode_binary(&event);
                Message {
                    headers: encoded.headers,
                    body: encoded.body,
                }
            } else {
                structured(MEDIA_TYPE, encode_event(&event).into_bytes())
            }
        }
    };
    let answer = client
        .send(
            Method::POST,
            "/v1/events",
            message.headers,
            Some(message.body),
        )
        .await?;
    if !answer.status.is_success() {
        return Ok(refused(&answer));
    }
    if args.output.json {
        print_json(&answer.body);
        return Ok(ExitCode::SUCCESS);
    }
    match answer.body["events"].as_array() {
        Some(receipts) => receipts.iter().for_each(print_receipt),
        None => print_receipt(&answer.body),
    }
    Ok(ExitCode::SUCCESS)
}

fn structured(media_type: &'static str, body: Vec<u8>) -> Message {
    let mut headers = HeaderMap::new();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(media_type));
    Message { headers, body }
}

fn from_file(path: &std::path::Path, binary: bool) -> anyhow::Result<Message> {
    let bytes = if path.as_os_str() == "-" {
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut std::io::stdin(), &mut bytes)
            .context("cannot read standard input")?;
        bytes
    } else {
        std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?
    };
    let batch = bytes.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'[');
    if !binary {
        let media_type = if batch { BATCH_MEDIA_TYPE } else { MEDIA_TYPE };
        return Ok(structured(media_type, bytes));
    }
    if batch {
        bail!(
            "{}: binary mode carries one event; give a single event or leave out --binary",
            path.display()
        );
    }
    let received = decode_event(&bytes).map_err(|violations| invalid(path, &violations))?;
    let encoded = encode_binary(&received.event);
    Ok(Message {
        headers: encoded.headers,
        body: encoded.body,
    })
}

fn invalid(path: &std::path::Path, violations: &Violations) -> anyhow::Error {
    let problems: Vec<String> = violations
        .iter()
        .map(|v| format!("  `{}`: {}", v.attribute, v.detail))
        .collect();
    anyhow::anyhow!(
        "{} is not a valid CloudEvent (see `knooppunt check`):\n{}",
        path.display(),
        problems.join("\n")
    )
}

/// The event the flags describe.
fn build(args: &PublishArgs) -> anyhow::Result<knooppunt_event::Event> {
    let id = args
        .id
        .clone()
        .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
    let source = args
        .source
        .clone()
        .context("--source is required without --file")?;
    let ty = args
        .ty
        .clone()
        .context("--type is required without --file")?;
    let mut builder = EventBuilder::new(id, source, ty);
    if let Some(subject) = &args.subject {
        builder = builder.subject(subject);
    }
    if let Some(time) = &args.time {
        let time = if time == "now" {
            knooppunt_event::timestamp::utc_timestamp(now_ms())
        } else {
            time.clone()
        };
        builder = builder.time(time);
    }
    if let Some(content_type) = &args.datacontenttype {
        builder = builder.datacontenttype(content_type);
    }
    if let Some(schema) = &args.dataschema {
        builder = builder.dataschema(schema);
    }
    for extension in &args.extensions {
        let (name, value) = extension_value(extension)?;
        builder = builder.extension(name, value);
    }
    let json_data = args
        .datacontenttype
        .as_deref()
        .is_none_or(knooppunt_event::is_json_media_type);
    let data = match (&args.data, &args.data_file) {
        (Some(text), _) => Some(data_from_text(text.clone(), json_data, "--data")?),
        (None, Some(path)) => {
            let bytes = std::fs::read(path)
                .with_context(|| format!("--data-file: cannot read {}", path.display()))?;
            Some(match String::from_utf8(bytes) {
                Ok(text)
                    if json_data
                        || args
                            .datacontenttype
                            .as_deref()
                            .is_some_and(knooppunt_event::is_text_media_type) =>
                {
                    data_from_text(text, json_data, "--data-file")?
                }
                Ok(text) => Data::Binary(text.into_bytes()),
                Err(error) => Data::Binary(error.into_bytes()),
            })
        }
        (None, None) => None,
    };
    if let Some(data) = data {
        builder = builder.data(data);
    }
    builder.build().map_err(|violations| {
        let problems: Vec<String> = violations
            .iter()
            .map(|v| format!("  `{}`: {}", v.attribute, v.detail))
            .collect();
        anyhow::anyhow!("the event is not valid:\n{}", problems.join("\n"))
    })
}

fn data_from_text(text: String, json: bool, flag: &str) -> anyhow::Result<Data> {
    if !json {
        return Ok(Data::Text(text));
    }
    JsonText::parse(&text).map(Data::Json).map_err(|error| {
        anyhow::anyhow!(
            "{flag}: not JSON ({error}); give JSON data, or set --datacontenttype for other data"
        )
    })
}

/// `NAME=VALUE` (a string) or `NAME:=VALUE` (an integer or a boolean).
fn extension_value(text: &str) -> anyhow::Result<(String, AttributeValue)> {
    if let Some((name, value)) = text.split_once(":=") {
        let value = match value {
            "true" => AttributeValue::Boolean(true),
            "false" => AttributeValue::Boolean(false),
            number => AttributeValue::Integer(number.parse().map_err(|_| {
                anyhow::anyhow!(
                    "--extension {text}: `{value}` is not a 32-bit integer, `true` or `false`"
                )
            })?),
        };
        return Ok((name.to_owned(), value));
    }
    match text.split_once('=') {
        Some((name, value)) => Ok((name.to_owned(), AttributeValue::String(value.to_owned()))),
        None => bail!(
            "--extension {text}: write NAME=VALUE (a string) or NAME:=VALUE (an integer or boolean)"
        ),
    }
}

use knooppunt_store::now_ms;

fn print_receipt(receipt: &Value) {
    let id = receipt["id"].as_str().unwrap_or("?");
    let source = receipt["source"].as_str().unwrap_or("?");
    let sequence = &receipt["sequence"];
    if receipt["duplicate"] == Value::Bool(true) {
        say!("duplicate {source} {id}: accepted before as number {sequence}; not delivered again");
    } else {
        let matched = receipt["matchedSubscriptions"].as_u64().unwrap_or(0);
        say!(
            "accepted  {source} {id}: number {sequence}, for {matched} subscription{}",
            if matched == 1 { "" } else { "s" }
        );
    }
    for warning in receipt["warnings"].as_array().into_iter().flatten() {
        say!(
            "  warning [{}] `{}`: {}",
            warning["rule"].as_str().unwrap_or("?"),
            warning["attribute"].as_str().unwrap_or(""),
            warning["detail"].as_str().unwrap_or("")
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extensions_are_strings_unless_written_with_colon_equals() {
        assert_eq!(
            extension_value("region=noord").unwrap(),
            ("region".into(), AttributeValue::String("noord".into()))
        );
        assert_eq!(
            extension_value("sequence:=42").unwrap(),
            ("sequence".into(), AttributeValue::Integer(42))
        );
        assert_eq!(
            extension_value("urgent:=true").unwrap(),
            ("urgent".into(), AttributeValue::Boolean(true))
        );
        assert!(extension_value("sequence:=forty").is_err());
        assert!(extension_value("lonely").is_err());
    }
}
