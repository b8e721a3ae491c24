//! The audit trail over HTTP (each request's audit context is `request.rs`'s):
//! `GET /v1/audit` reads the trail (admins all of it, others what they did or what concerns
//! them) as pages of JSON or, with `Accept: application/x-ndjson`, as JSON lines in the
//! trail's own field names; `GET /v1/audit/verify` checks the chain.

use std::collections::HashMap;
use std::sync::Arc;

use axum::Json;
use axum::extract::{Query, State};
use axum::response::{IntoResponse, Response};
use http::HeaderValue;
use knooppunt_event::timestamp::utc_timestamp;
use knooppunt_store::AuditEntry;
use serde::Serialize;
use serde_json::Value;

use super::auth::Caller;
use super::page::Page;
use super::problem::{ApiError, InvalidParam};
use crate::app::AppState;
use crate::identity::Principal;

/// An entry of the trail as the API shows it: the record with its place in the chain.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct AuditEntryOut<'a> {
    sequence: u64,
    start_time: String,
    name: &'a str,
    status_code: &'a str,
    actor: Option<&'a str>,
    actor_oin: Option<&'a str>,
    object: Option<&'a str>,
    request_id: Option<&'a str>,
    trace_id: Option<&'a str>,
    processing_activity_id: Option<&'a str>,
    data_subject_id: Option<&'a str>,
    details: &'a Value,
    concerns: &'a [String],
    prev_hash: &'a str,
    hash: &'a str,
}

fn resource(entry: &AuditEntry) -> AuditEntryOut<'_> {
    let r = &entry.record;
    AuditEntryOut {
        sequence: entry.seq,
        start_time: utc_timestamp(r.start_time),
        name: &r.name,
        status_code: &r.status_code,
        actor: r.actor.as_deref(),
        actor_oin: r.actor_oin.as_deref(),
        object: r.object.as_deref(),
        request_id: r.request_id.as_deref(),
        trace_id: r.trace_id.as_deref(),
        processing_activity_id: r.processing_activity_id.as_deref(),
        data_subject_id: r.data_subject_id.as_deref(),
        details: &r.details,
        concerns: &r.concerns,
        prev_hash: &entry.prev_hash,
        hash: &entry.hash,
    }
}

/// Which entries a reader asked for.
struct Selection {
    from: Option<u64>,
    until: Option<u64>,
    name: Option<String>,
    actor: Option<String>,
    object: Option<String>,
}

impl Selection {
    fn read(query: &mut HashMap<String, String>, problems: &mut Vec<InvalidParam>) -> Selection {
        let mut time = |key: &str| {
            query.remove(key).and_then(|text| {
                match knooppunt_event::timestamp::epoch_millis(&text) {
                    Some(ms) => Some(ms),
                    None => {
                        problems.push(InvalidParam::new(
                            key,
                            "must be an RFC 3339 time, e.g. 2026-11-24T08:00:00Z",
                        ));
                        None
                    }
                }
            })
        };
        let (from, until) = (time("from"), time("until"));
        Selection {
            from,
            until,
            name: query.remove("name"),
            actor: query.remove("actor"),
            object: query.remove("object"),
        }
    }

    fn picks(&self, entry: &AuditEntry) -> bool {
        let r = &entry.record;
        self.from.is_none_or(|from| r.start_time >= from)
            && self.until.is_none_or(|until| r.start_time < until)
            && self
                .name
                .as_ref()
                .is_none_or(|n| r.name == *n || r.name.starts_with(&format!("{n}.")))
            && self
                .actor
                .as_ref()
                .is_none_or(|a| r.actor.as_ref() == Some(a))
            && self.object.as_ref().is_none_or(|o| {
                r.object
                    .as_ref()
                    .is_some_and(|object| object == o || object.starts_with(&format!("{o}/")))
            })
    }
}

/// Whether `principal` may read `entry`: an admin all, others what they did or what
/// concerns them.
fn visible(principal: &Principal, entry: &AuditEntry) -> bool {
    principal.is_admin()
        || entry.record.actor.as_deref() == Some(principal.name.as_str())
        || entry.record.concerns.iter().any(|c| c == &principal.name)
}

/// How many entries one request reads from the store at most, whatever it finds: a page
/// may come back short, with a cursor to go on.
const SCAN_LIMIT: usize = 20_000;

/// `GET /v1/audit`.
pub(crate) async fn list(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    headers: http::HeaderMap,
    Query(mut query): Query<HashMap<String, String>>,
) -> Result<Response, ApiError> {
    let mut problems = Vec::new();
    let selection = Selection::read(&mut query, &mut problems);
    let Page { size, cursor } = Page::read(&query, &mut problems);
    let after = match cursor.as_deref().map(str::parse::<u64>) {
        None => None,
        Some(Ok(seq)) => Some(seq),
        Some(Err(_)) => {
            problems.push(InvalidParam::new(
                "cursor",
                "is not a cursor of this list: use the link of the previous page",
            ));
            None
        }
    };
    if !problems.is_empty() {
        return Err(ApiError::invalid("the query is invalid", problems));
    }
    let lines = headers
        .get(http::header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("application/x-ndjson"));
    let (found, next) = state
        .audit_page(after, size, SCAN_LIMIT, |entry| {
            visible(&caller.0, entry) && selection.picks(entry)
        })
        .await?;
    if lines {
        let mut body = String::new();
        for entry in &found {
            body.push_str(&serde_json::to_string(entry).expect("entries are JSON"));
            body.push('\n');
        }
        let mut response =
            ([(http::header::CONTENT_TYPE, "application/x-ndjson")], body).into_response();
        if let Some(next) = next {
            link(&mut response, &query_path(&selection), size, next);
        }
        return Ok(response);
    }
    let body: Vec<AuditEntryOut<'_>> = found.iter().map(resource).collect();
    let next = next.map(|seq| seq.to_string());
    Ok(super::page::answer(
        body,
        &query_path(&selection),
        size,
        next.as_deref(),
    ))
}

fn link(response: &mut Response, path: &str, size: usize, next: u64) {
    let separator = if path.contains('?') { '&' } else { '?' };
    let value = format!(
        "<{}{path}{separator}pageSize={size}&cursor={next}>; rel=\"next\"",
        super::BASE_PATH
    );
    if let Ok(value) = HeaderValue::try_from(value) {
        response.headers_mut().insert(http::header::LINK, value);
    }
}

/// `/audit` with the selection's filters as its query.
fn query_path(selection: &Selection) -> String {
    use knooppunt_event::binding::percent::encode_component;
    let mut filters = Vec::new();
    for (key, ms) in [("from", selection.from), ("until", selection.until)] {
        if let Some(ms) = ms {
            filters.push(format!("{key}={}", encode_component(&utc_timestamp(ms))));
        }
    }
    for (key, value) in [
        ("name", &selection.name),
        ("actor", &selection.actor),
        ("object", &selection.object),
    ] {
        if let Some(value) = value {
            filters.push(format!("{key}={}", encode_component(value)));
        }
    }
    if filters.is_empty() {
        "/audit".into()
    } else {
        format!("/audit?{}", filters.join("&"))
    }
}

/// `GET /v1/audit/verify?head=<sequence>:<hash>` (admins): checks the whole chain, and,
/// with a head kept outside the store, that no entry was removed from its end.
pub(crate) async fn verify(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    Query(query): Query<HashMap<String, String>>,
) -> Result<Response, ApiError> {
    caller.require(crate::identity::Role::Admin, "verify the audit trail")?;
    let mut problems = Vec::new();
    for name in query.keys().filter(|k| k.as_str() != "head") {
        problems.push(InvalidParam::new(
            name,
            "unknown query parameter; use `head`",
        ));
    }
    let head = match query.get("head") {
        None => None,
        Some(text) => match crate::audit::parse_head(text) {
            Some(head) => Some(head),
            None => {
                problems.push(InvalidParam::new(
                    "head",
                    "must be `<sequence>:<hash>` (the hash 64 hex digits), as \
                     GET /v1/audit/head and the hub's log give it",
                ));
                None
            }
        },
    };
    if !problems.is_empty() {
        return Err(ApiError::invalid("the query is invalid", problems));
    }
    let report = state.verify_audit(head).await?;
    Ok(Json(report).into_response())
}

/// `GET /v1/audit/head` (admins): the newest entry's sequence number and hash, signed with
/// the hub's key when it has one: keep it elsewhere, and verify the trail against it later.
pub(crate) async fn head(
    State(state): State<Arc<AppState>>,
    caller: Caller,
) -> Result<Response, ApiError> {
    caller.require(crate::identity::Role::Admin, "read the audit trail's head")?;
    Ok(Json(state.audit_head()).into_response())
}
