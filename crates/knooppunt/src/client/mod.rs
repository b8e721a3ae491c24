//! The commands that talk to a running hub over its API: `publish`, `subscriptions`,
//! `dead-letters` and `principals`. They print what the hub answered for people, or its JSON with `--json`;
//! a refusal prints the hub's problem (every invalid field included) and exits with 1.

pub(crate) mod approvals;
pub(crate) mod audit;
pub(crate) mod backup;
pub(crate) mod dead_letters;
pub(crate) mod eventtypes;
pub(crate) mod import;
pub(crate) mod principals;
pub(crate) mod publish;
pub(crate) mod pull;
pub(crate) mod subscriptions;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderValue, LINK};
use reqwest::{Method, StatusCode};
use serde_json::Value;

/// Where the hub is and who is calling.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct Connection {
    /// The hub's base URL.
    #[arg(long, env = "KNOOPPUNT_URL", default_value = "http://127.0.0.1:8080")]
    pub(crate) url: String,
    /// The bearer token of one of the hub's principals. Prefer the environment variable:
    /// others on this machine can see command lines.
    #[arg(long, env = "KNOOPPUNT_TOKEN", hide_env_values = true)]
    pub(crate) token: Option<String>,
    /// A PEM file of CA certificates to trust for an https hub, next to the system's.
    #[arg(long, env = "KNOOPPUNT_CA_FILE")]
    pub(crate) ca_file: Option<PathBuf>,
    /// A PEM file with a client certificate and its key, for a hub that identifies
    /// principals by certificate (mTLS, PKIoverheid).
    #[arg(long, env = "KNOOPPUNT_IDENTITY_FILE")]
    pub(crate) identity_file: Option<PathBuf>,
}

/// Print the hub's JSON answer instead of a summary.
#[derive(Debug, Clone, Copy, clap::Args)]
pub(crate) struct Output {
    /// Print the hub's answer as JSON (for scripts).
    #[arg(long)]
    pub(crate) json: bool,
}

/// An HTTP client for one hub.
#[derive(Debug)]
pub(crate) struct Client {
    http: reqwest::Client,
    base: String,
    token: Option<String>,
    /// What it talks to and the flag that gives its URL, for errors: ("the hub", "--url").
    peer: (&'static str, &'static str),
}

/// What the hub answered.
#[derive(Debug)]
pub(crate) struct Answer {
    pub(crate) status: StatusCode,
    pub(crate) headers: HeaderMap,
    pub(crate) body: Value,
}

/// The outcome of a client command: done, or the hub refused (its problem already printed).
pub(crate) type Outcome = anyhow::Result<ExitCode>;

impl Client {
    pub(crate) fn new(connection: &Connection) -> anyhow::Result<Client> {
        let base = connection.url.trim_end_matches('/').to_owned();
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            anyhow::bail!("--url: `{base}` must start with http:// or https://");
        }
        let mut http = reqwest::Client::builder().timeout(std::time::Duration::from_secs(60));
        if let Some(path) = &connection.ca_file {
            let pem = crate::config::read_ca_file(path)
                .map_err(|why| anyhow::anyhow!("--ca-file: {why}"))?;
            for certificate in reqwest::Certificate::from_pem_bundle(&pem)? {
                http = http.add_root_certificate(certificate);
            }
        }
        if let Some(path) = &connection.identity_file {
            let pem = std::fs::read(path)
                .with_context(|| format!("--identity-file: cannot read {}", path.display()))?;
            let identity = reqwest::Identity::from_pem(&pem).with_context(|| {
                format!(
                    "--identity-file: {} must hold a PEM certificate and its private key",
                    path.display()
                )
            })?;
            http = http.identity(identity);
        }
        Ok(Client {
            http: http.build().context("cannot set up the HTTP client")?,
            base,
            token: connection.token.clone(),
            peer: ("the hub", "--url"),
        })
    }

    /// The same client, naming what it talks to (`Open Notificaties`) and the flag that
    /// gives its URL in its errors.
    pub(crate) fn talking_to(self, peer: &'static str, flag: &'static str) -> Client {
        Client {
            peer: (peer, flag),
            ..self
        }
    }

    /// The path of `url` below the base URL, if it is below it (a link a peer sent, which
    /// must not lead the token elsewhere).
    pub(crate) fn path_of(&self, url: &str) -> Option<String> {
        let rest = url.strip_prefix(&self.base)?;
        (rest.starts_with('/') || rest.starts_with('?')).then(|| rest.to_owned())
    }

    /// Sends a request to `path` (relative to the base URL, starting with `/`).
    pub(crate) async fn send(
        &self,
        method: Method,
        path: &str,
        headers: HeaderMap,
        body: Option<Vec<u8>>,
    ) -> anyhow::Result<Answer> {
        let url = format!("{}{path}", self.base);
        let mut request = self.http.request(method, &url).headers(headers);
        if let Some(token) = &self.token {
            let value = HeaderValue::try_from(format!("Bearer {token}"))
                .context("--token: a token is printable ASCII without spaces")?;
            request = request.header(AUTHORIZATION, value);
        }
        if let Some(body) = body {
            request = request.body(body);
        }
        let response = request.send().await.with_context(|| {
            let (peer, flag) = self.peer;
            format!("cannot reach {peer} at {url} (is it running? see {flag})")
        })?;
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = response
            .bytes()
            .await
            .with_context(|| format!("{}'s answer broke off", self.peer.0))?;
        let body = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes)
                .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()))
        };
        Ok(Answer {
            status,
            headers,
            body,
        })
    }

    /// A GET of `path` whose answer is read as it arrives (a backup), without the
    /// client's time limit for whole answers.
    pub(crate) async fn stream(&self, path: &str) -> anyhow::Result<reqwest::Response> {
        let url = format!("{}{path}", self.base);
        let mut request = self
            .http
            .get(&url)
            .timeout(std::time::Duration::from_secs(7 * 24 * 3600));
        if let Some(token) = &self.token {
            let value = HeaderValue::try_from(format!("Bearer {token}"))
                .context("--token: a token is printable ASCII without spaces")?;
            request = request.header(AUTHORIZATION, value);
        }
        request
            .send()
            .await
            .with_context(|| format!("cannot reach the hub at {url} (is it running? see --url)"))
    }

    /// Sends a JSON body.
    pub(crate) async fn send_json(
        &self,
        method: Method,
        path: &str,
        body: &Value,
    ) -> anyhow::Result<Answer> {
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        self.send(method, path, headers, Some(serde_json::to_vec(body)?))
            .await
    }

    /// Every item of a paginated collection, following `Link: rel="next"`.
    pub(crate) async fn all_pages(&self, path: &str) -> anyhow::Result<Result<Vec<Value>, Answer>> {
        let mut items = Vec::new();
        let mut next = Some(path.to_owned());
        while let Some(path) = next {
            let answer = self
                .send(Method::GET, &path, HeaderMap::new(), None)
                .await?;
            if !answer.status.is_success() {
                return Ok(Err(answer));
            }
            next = next_page(&answer.headers);
            match answer.body {
                Value::Array(page) => items.extend(page),
                other => anyhow::bail!(
                    "the hub answered {path} with something other than a list: {other}"
                ),
            }
        }
        Ok(Ok(items))
    }
}

/// The path of the `rel="next"` link, if there is one.
pub(crate) fn next_page(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(LINK)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .find(|link| link.contains("rel=\"next\""))
        .and_then(|link| {
            let start = link.find('<')? + 1;
            let end = link.find('>')?;
            Some(link.get(start..end)?.to_owned())
        })
}

/// Prints the hub's refusal to standard error and returns exit code 1.
pub(crate) fn refused(answer: &Answer) -> ExitCode {
    let body = &answer.body;
    let detail = body["detail"]
        .as_str()
        .or_else(|| body.as_str())
        .unwrap_or("no details given");
    tell!("knooppunt: the hub refused ({}): {detail}", answer.status);
    if let Some(params) = body["invalidParams"].as_array() {
        for param in params {
            tell!(
                "  {}: {}",
                param["name"].as_str().unwrap_or("?"),
                param["reason"].as_str().unwrap_or("?")
            );
        }
    }
    if answer.status == StatusCode::UNAUTHORIZED {
        tell!("  (give a principal's token with --token or KNOOPPUNT_TOKEN)");
    }
    ExitCode::from(1)
}

pub(crate) use crate::check::cause;

/// Prints a JSON value for `--json`.
pub(crate) fn print_json(value: &Value) {
    say!(
        "{}",
        serde_json::to_string_pretty(value).expect("JSON values print")
    );
}

/// Runs a client command on a runtime of its own.
pub(crate) fn run(command: impl std::future::Future<Output = Outcome>) -> Outcome {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?
        .block_on(command)
}

/// Percent-encodes a path segment (ids are safe, but a user may type anything).
/// Sends a request without a body and prints the answer: as JSON with `--json`, else with
/// `print`; a refusal as the hub's problem.
pub(crate) async fn show(
    connection: &Connection,
    method: Method,
    path: &str,
    output: &Output,
    print: impl FnOnce(&Value),
) -> Outcome {
    let client = Client::new(connection)?;
    let answer = client.send(method, path, HeaderMap::new(), None).await?;
    if !answer.status.is_success() {
        return Ok(refused(&answer));
    }
    if output.json {
        print_json(&answer.body);
    } else {
        print(&answer.body);
    }
    Ok(ExitCode::SUCCESS)
}

/// Every page of the list at `path`: as JSON with `--json`; else `empty` when there is
/// nothing, or `header` and a line per item.
pub(crate) async fn list(
    connection: &Connection,
    output: &Output,
    path: &str,
    empty: &str,
    header: &str,
    line: impl Fn(&Value) -> String,
) -> Outcome {
    let client = Client::new(connection)?;
    let items = match client.all_pages(path).await? {
        Ok(items) => items,
        Err(answer) => return Ok(refused(&answer)),
    };
    if output.json {
        print_json(&Value::Array(items));
    } else if items.is_empty() {
        say!("{empty}");
    } else {
        say!("{header}");
        for item in &items {
            say!("{}", line(item));
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Deletes what is at `path`; says `deleted <id>`.
pub(crate) async fn delete(connection: &Connection, path: &str, id: &str) -> Outcome {
    let client = Client::new(connection)?;
    let answer = client
        .send(
            Method::DELETE,
            path,
            reqwest::header::HeaderMap::new(),
            None,
        )
        .await?;
    if !answer.status.is_success() {
        return Ok(refused(&answer));
    }
    say!("deleted {id}");
    Ok(ExitCode::SUCCESS)
}

/// A member's value as a word: strings as they are, `-` for none.
pub(crate) fn text(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        Value::Null => "-".into(),
        other => other.to_string(),
    }
}

pub(crate) fn segment(text: &str) -> String {
    knooppunt_event::binding::percent::encode_component(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_next_page_is_read_from_the_link_header() {
        let mut headers = HeaderMap::new();
        headers.insert(
            LINK,
            HeaderValue::from_static("</v1/subscriptions?pageSize=2&cursor=abc>; rel=\"next\""),
        );
        assert_eq!(
            next_page(&headers).as_deref(),
            Some("/v1/subscriptions?pageSize=2&cursor=abc")
        );
        assert_eq!(next_page(&HeaderMap::new()), None);
        assert_eq!(segment("a b/ç"), "a%20b%2F%C3%A7");
    }
}
