//! The audit trail over HTTP (each request's audit context is `request.rs`'s):
//! `GET /v1/audit` reads the trail (admins all of it, others what they did or what concerns
//! them) as pages of JSON or, with `Accept: application/x-ndjson`, as JSON lines in the
//! trail's own field names; `GET /v1/audit/verify` checks the chain.

use std::borrow::Cow;
use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use http::HeaderValue;
use knooppunt_event::timestamp::utc_timestamp;
use knooppunt_store::AuditEntry;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::Serialize;
use serde_json::{Value, json};

use crate::auth::Caller;
use crate::document::{BAD_REQUEST, Operation, UNAUTHORIZED, header};
use crate::endpoints::Endpoints;
use crate::identity::Principal;
use crate::input::{Body, Field, Params, Problems};
use crate::page::{Page, PageIn, Sequence};
use crate::problem::ApiError;
use knooppunt_services::app::AppState;

/// An entry of the trail as the API shows it: the record with its place in the chain.
#[derive(Debug, Serialize, serde::Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "AuditEntry", description = "One entry of the audit trail.")]
pub struct AuditEntryOut<'a> {
    pub sequence: u64,
    #[schemars(extend("format" = "date-time"))]
    pub start_time: String,
    /// The operation: `<resource>.<verb>`.
    #[schemars(schema_with = "action_names")]
    pub name: Cow<'a, str>,
    /// `ERROR` for a refused request.
    #[schemars(extend("enum" = ["OK", "ERROR"]))]
    pub status_code: Cow<'a, str>,
    /// The principal that acted (`knooppunt`: the hub itself).
    pub actor: Option<Cow<'a, str>>,
    /// The actor's OIN.
    pub actor_oin: Option<Cow<'a, str>>,
    /// What it acted on, e.g. `subscription/<id>`.
    pub object: Option<Cow<'a, str>>,
    /// The request's `X-Request-Id`.
    pub request_id: Option<Cow<'a, str>>,
    /// The trace id of the request's `traceparent`.
    pub trace_id: Option<Cow<'a, str>>,
    /// The kind of processing (Logboek Dataverwerkingen).
    pub processing_activity_id: Option<Cow<'a, str>>,
    /// Whom the data is about, when known.
    pub data_subject_id: Option<Cow<'a, str>>,
    /// What changed, or why it was refused; never a secret.
    #[schemars(with = "serde_json::Map<String, Value>")]
    pub details: Cow<'a, Value>,
    /// The principals it concerns besides the actor.
    pub concerns: Cow<'a, [String]>,
    /// The hash of the entry before it.
    pub prev_hash: Cow<'a, str>,
    /// SHA-256 over prevHash, the sequence number and the entry.
    pub hash: Cow<'a, str>,
}

fn resource(entry: &AuditEntry) -> AuditEntryOut<'_> {
    let r = &entry.record;
    AuditEntryOut {
        sequence: entry.seq,
        start_time: utc_timestamp(r.start_time),
        name: Cow::Borrowed(&r.name),
        status_code: Cow::Borrowed(&r.status_code),
        actor: r.actor.as_deref().map(Cow::Borrowed),
        actor_oin: r.actor_oin.as_deref().map(Cow::Borrowed),
        object: r.object.as_deref().map(Cow::Borrowed),
        request_id: r.request_id.as_deref().map(Cow::Borrowed),
        trace_id: r.trace_id.as_deref().map(Cow::Borrowed),
        processing_activity_id: r.processing_activity_id.as_deref().map(Cow::Borrowed),
        data_subject_id: r.data_subject_id.as_deref().map(Cow::Borrowed),
        details: Cow::Borrowed(&r.details),
        concerns: Cow::Borrowed(&r.concerns),
        prev_hash: Cow::Borrowed(&entry.prev_hash),
        hash: Cow::Borrowed(&entry.hash),
    }
}

/// Which entries a reader asked for.
#[derive(Debug)]
pub(crate) struct Selection {
    from: Option<u64>,
    until: Option<u64>,
    name: Option<String>,
    actor: Option<String>,
    object: Option<String>,
}

/// The query of the audit trail: which entries, in which order, and the page.
#[derive(Debug, Default, serde::Deserialize, JsonSchema)]
pub(crate) struct AuditQuery {
    /// Only entries at or after this time (RFC 3339).
    #[serde(default)]
    #[schemars(extend("format" = "date-time"))]
    from: Field<String>,
    /// Only entries before this time (RFC 3339).
    #[serde(default)]
    #[schemars(extend("format" = "date-time"))]
    until: Field<String>,
    /// Only entries of this operation, or of every operation under it (`approval` for
    /// `approval.grant`, …).
    #[serde(default)]
    name: Field<String>,
    /// Only entries of this principal's actions.
    #[serde(default)]
    actor: Field<String>,
    /// Only entries about this object, or about objects under it (`subscription/<id>`).
    #[serde(default)]
    object: Field<String>,
    /// `oldest` first (the default) or `newest` first.
    #[serde(default)]
    #[schemars(extend("enum" = ["oldest", "newest"], "default" = "oldest"))]
    order: Field<String>,
    #[serde(flatten)]
    page: PageIn<Sequence>,
}

impl Body for AuditQuery {
    const NAME: &'static str = "query";
    type Representation = ();
    /// The selection, whether newest first, the page size and the sequence number after
    /// which it starts.
    type Read = (Selection, bool, usize, Option<u64>);

    fn read(self, problems: &mut Problems) -> Option<Self::Read> {
        let mut time = |key: &str, text: Option<&String>| {
            text.and_then(
                |text| match knooppunt_event::timestamp::epoch_millis_bound(text) {
                    Some(ms) => Some(ms),
                    None => {
                        problems.add(key, "must be an RFC 3339 time, e.g. 2026-11-24T08:00:00Z");
                        None
                    }
                },
            )
        };
        let (from, until) = (
            time("from", self.from.given()),
            time("until", self.until.given()),
        );
        let selection = Selection {
            from,
            until,
            name: self.name.given().cloned(),
            actor: self.actor.given().cloned(),
            object: self.object.given().cloned(),
        };
        let newest_first = match self.order.given().map(String::as_str) {
            None | Some("oldest") => false,
            Some("newest") => true,
            Some(_) => {
                problems.add("order", "must be oldest or newest");
                false
            }
        };
        let Page { size, cursor } = self.page.read(problems);
        let after = cursor.map(|Sequence(seq)| seq);
        Some((selection, newest_first, size, after))
    }
}

impl Selection {
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

/// The names of the audit trail's operations.
fn action_names(_: &mut SchemaGenerator) -> Schema {
    let names: Vec<&str> = knooppunt_services::audit::ActionName::ALL
        .iter()
        .map(|name| name.as_str())
        .collect();
    json_schema!({"type": "string", "enum": names})
}

/// `GET /v1/audit`.
pub(crate) async fn list(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    headers: http::HeaderMap,
    Params((selection, newest_first, size, after)): Params<AuditQuery>,
) -> Result<Response, ApiError> {
    let lines = headers
        .get(http::header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("application/x-ndjson"));
    let picks = |entry: &AuditEntry| visible(&caller.0, entry) && selection.picks(entry);
    let (found, next) = if newest_first {
        state
            .audit_page_newest(after, size, SCAN_LIMIT, picks)
            .await?
    } else {
        state.audit_page(after, size, SCAN_LIMIT, picks).await?
    };
    let list_path = if newest_first {
        let path = query_path(&selection);
        let separator = if path.contains('?') { '&' } else { '?' };
        format!("{path}{separator}order=newest")
    } else {
        query_path(&selection)
    };
    if lines {
        let mut body = String::new();
        for entry in &found {
            body.push_str(&serde_json::to_string(entry).expect("entries are JSON"));
            body.push('\n');
        }
        let mut response =
            ([(http::header::CONTENT_TYPE, "application/x-ndjson")], body).into_response();
        if let Some(next) = next {
            link(&mut response, &list_path, size, next);
        }
        return Ok(response);
    }
    let body: Vec<AuditEntryOut<'_>> = found.iter().map(resource).collect();
    let next = next.map(|seq| seq.to_string());
    Ok(crate::page::answer(body, &list_path, size, next.as_deref()))
}

fn link(response: &mut Response, path: &str, size: usize, next: u64) {
    let separator = if path.contains('?') { '&' } else { '?' };
    let value = format!(
        "<{}{path}{separator}pageSize={size}&cursor={next}>; rel=\"next\"",
        crate::BASE_PATH
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

/// The query of a verification of the trail.
#[derive(Debug, Default, serde::Deserialize, JsonSchema)]
pub(crate) struct VerifyQuery {
    /// A head kept outside the store, `<sequence>:<hash>` (as `GET /audit/head` and the
    /// hub's log give it): the trail must still hold that entry, unchanged, so that entries
    /// removed from its end show.
    #[serde(default)]
    #[schemars(extend("pattern" = "^[0-9]+:[0-9a-fA-F]{64}$"))]
    head: Field<String>,
}

impl Body for VerifyQuery {
    const NAME: &'static str = "query";
    type Representation = ();
    type Read = Option<(u64, String)>;

    fn read(self, problems: &mut Problems) -> Option<Self::Read> {
        let Some(text) = self.head.given() else {
            return Some(None);
        };
        match knooppunt_services::audit::parse_head(text) {
            Some(head) => Some(Some(head)),
            None => {
                problems.add(
                    "head",
                    "must be `<sequence>:<hash>` (the hash 64 hex digits), as GET \
                     /v1/audit/head and the hub's log give it",
                );
                None
            }
        }
    }
}

/// `GET /v1/audit/verify?head=<sequence>:<hash>` (admins): checks the whole chain, and,
/// with a head kept outside the store, that no entry was removed from its end.
pub(crate) async fn verify(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    query: Result<Params<VerifyQuery>, ApiError>,
) -> Result<Response, ApiError> {
    state
        .may_verify_audit(&caller.0)
        .map_err(ApiError::Forbidden)?;
    let Params(head) = query?;
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

/// The audit trail's operations.
pub(crate) fn describe(doc: &mut Endpoints) {
    const TAG: &str = "audit";
    let none = json!([]);
    let entries = doc.list_of::<AuditEntryOut<'static>>();
    let mut list = Operation::new(
        "listAuditEntries",
        TAG,
        "Read the audit trail, oldest first (or newest, with `order=newest`): an admin all of it, others what they did and what \
         concerns them (their subscriptions, their event types). With `Accept: \
         application/x-ndjson` the same page comes as JSON lines in the trail's own field names \
         (Logboek Dataverwerkingen: `trace_id`, `name`, `start_time`, `status_code`, \
         `processing_activity_id`, `data_subject_id`), as `knooppunt audit verify --file` checks \
         them. A page may come back short, with a link to go on: one request reads at most \
         20,000 entries.",
    )
    .query::<AuditQuery>()
    .answer(
        "200",
        "A page of entries. A `Link` header with rel=\"next\" points to the next page.",
        Some(entries),
    )
    .header(
        "200",
        "Link",
        header("RFC 8288 link to the next page, when there may be one."),
    )
    .refusals(&[BAD_REQUEST, UNAUTHORIZED]);
    list = list.also_as(
        "200",
        "application/x-ndjson",
        json!({"type": "string", "description": "One entry per line."}),
    );
    doc.get("/audit", self::list, &none, list);
    let verify = Operation::new(
        "verifyAuditTrail",
        TAG,
        "Check the whole chain (admins): every entry's hash, that each names the hash of the \
         one before, and, with `head`, that no entry was removed from its end.",
    )
    .query::<VerifyQuery>()
    .answer(
        "200",
        "The outcome; `intact: false` names the first broken entry, or says the trail was \
         truncated.",
        Some(doc.schema::<knooppunt_services::app::AuditVerification>()),
    )
    .refusals(&[
        BAD_REQUEST,
        UNAUTHORIZED,
        ("403", "Only an administrator verifies the trail."),
    ]);
    doc.get("/audit/verify", self::verify, &none, verify);
    let head = Operation::new(
        "getAuditHead",
        TAG,
        "The chain's head (admins): the newest entry's sequence number and hash, signed with \
         the hub's Ed25519 key when it has one (verify with `GET /signing-keys`). Keep it \
         elsewhere; `GET /audit/verify?head=` shows later whether entries were removed from the \
         trail's end.",
    )
    .answer(
        "200",
        "The head.",
        Some(doc.schema::<knooppunt_services::app::AuditHead>()),
    )
    .refusals(&[
        UNAUTHORIZED,
        ("403", "Only an administrator reads the head."),
    ]);
    doc.get("/audit/head", self::head, &none, head);
}
