//! `/v1/eventtypes`: the event type catalog over HTTP. Any authenticated principal reads
//! it; a publisher describes its own events; only an entry's owner or an admin changes it
//! (the catalog's rules, in `catalog.rs`).

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use http::header::LOCATION;
use http::{HeaderValue, StatusCode};
use knooppunt_event::timestamp::utc_timestamp;
use knooppunt_store::{ApprovalPolicy, CatalogEntry, SchemaCheck, TypeMatch};
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::BASE_PATH;
use crate::auth::Caller;
use crate::document::{
    BAD_REQUEST, Operation, Refusal, UNAUTHORIZED, UNAVAILABLE, header, link_header, path_parameter,
};
use crate::endpoints::Endpoints;
use crate::ids::EntryId;
use crate::input::{Body, Field, Input, Params, Problems};
use crate::page::{Page, PageIn};
use crate::problem::{ApiError, InvalidParam};
use crate::request::RequestAudit;
use knooppunt_services::app::AppState;

use knooppunt_services::catalog::Draft;
use knooppunt_services::use_case;

const MAX_TEXT: usize = 2048;
/// The most kenmerken an entry names, and the longest (a ZGW kanaal filter's bound).
const MAX_KENMERKEN: usize = 100;
const MAX_KENMERK: usize = 100;

/// A catalog entry as the API shows it (and the audit trail keeps it).
#[derive(Debug, Serialize, serde::Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(
    rename = "EventType",
    description = "A catalog entry: events of a source prefix and a type, described by their publisher."
)]
pub struct EventTypeOut {
    pub id: String,
    /// The principal that made it.
    pub owner: String,
    /// The `source` prefix of the events it covers; one the owner may publish.
    pub source: String,
    /// The event type, or a prefix of types (`typeMatch`).
    #[serde(rename = "type")]
    pub event_type: String,
    #[schemars(extend("enum" = ["exact", "prefix"]))]
    pub type_match: std::borrow::Cow<'static, str>,
    /// What these events are.
    pub description: String,
    /// A link to their documentation.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("format" = "uri"))]
    pub documentation: Option<String>,
    /// The `dataschema` of their data.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("format" = "uri"))]
    pub dataschema: Option<String>,
    /// The JSON Schema the events' data is checked against.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "json_schema_document")]
    pub schema: Option<Value>,
    #[schemars(extend("enum" = ["off", "warn", "enforce"]))]
    pub schema_check: std::borrow::Cow<'static, str>,
    pub deprecated: bool,
    #[schemars(extend("enum" = ["open", "approval-required"]))]
    pub approval: std::borrow::Cow<'static, str>,
    /// The attributes subscribers may filter these events on.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kenmerken: Vec<String>,
    #[schemars(extend("format" = "date-time"))]
    pub created: String,
    #[schemars(extend("format" = "date-time"))]
    pub updated: String,
}

/// A JSON Schema: an object, or `true` or `false`.
fn json_schema_document(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "oneOf": [{"type": "object"}, {"type": "boolean"}],
        "description": format!(
            "A JSON Schema (at most {} KiB; an object, or `true` or `false` as JSON Schema \
             allows) the events' data is checked against when they are published; nothing \
             outside it is fetched, patterns use a linear-time engine.",
            knooppunt_services::catalog::MAX_SCHEMA_BYTES / 1024
        )
    })
}

fn resource(entry: &CatalogEntry) -> EventTypeOut {
    EventTypeOut {
        id: entry.id.clone(),
        owner: entry.owner.clone(),
        source: entry.source_prefix.clone(),
        event_type: entry.event_type.clone(),
        type_match: entry.type_match.as_str().into(),
        description: entry.description.clone(),
        documentation: entry.documentation.clone(),
        dataschema: entry.dataschema.clone(),
        schema: entry
            .schema
            .as_deref()
            .and_then(|text| serde_json::from_str::<Value>(text).ok()),
        schema_check: entry.schema_check.as_str().into(),
        deprecated: entry.deprecated,
        approval: entry.approval.as_str().into(),
        kenmerken: entry.kenmerken.clone(),
        created: utc_timestamp(entry.created_at),
        updated: utc_timestamp(entry.updated_at),
    }
}

fn not_found(id: &str) -> ApiError {
    ApiError::NotFound(format!("there is no catalog entry `{id}`"))
}

/// What a client sends to describe an event type: the catalog's `Draft` (`owner`,
/// `created` and `updated` may be sent back; they are ignored).
#[derive(Debug, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "EventTypeRequest")]
pub struct EventTypeIn {
    /// Ignored on create; on a replacement it must equal the path's.
    #[serde(default)]
    #[serde(skip_serializing_if = "Field::is_absent")]
    pub id: Field<String>,
    /// The `source` prefix of the events it covers; one the owner may publish.
    #[schemars(length(min = 1, max = MAX_TEXT))]
    #[serde(skip_serializing_if = "Field::is_absent")]
    pub source: Field<String>,
    /// The event type, or a prefix of types (`typeMatch`).
    #[serde(rename = "type")]
    #[schemars(length(min = 1, max = MAX_TEXT))]
    #[serde(skip_serializing_if = "Field::is_absent")]
    pub event_type: Field<String>,
    #[serde(default)]
    #[schemars(extend("enum" = ["exact", "prefix"], "default" = "exact"))]
    #[serde(skip_serializing_if = "Field::is_absent")]
    pub type_match: Field<String>,
    /// What these events are.
    #[schemars(length(min = 1, max = MAX_TEXT))]
    #[serde(skip_serializing_if = "Field::is_absent")]
    pub description: Field<String>,
    /// A link to their documentation.
    #[serde(default)]
    #[schemars(length(min = 1, max = MAX_TEXT), extend("format" = "uri"))]
    #[serde(skip_serializing_if = "Field::is_absent")]
    pub documentation: Field<String>,
    /// The `dataschema` of their data.
    #[serde(default)]
    #[schemars(length(min = 1, max = MAX_TEXT), extend("format" = "uri"))]
    #[serde(skip_serializing_if = "Field::is_absent")]
    pub dataschema: Field<String>,
    #[serde(default)]
    #[schemars(schema_with = "json_schema_document")]
    #[serde(skip_serializing_if = "Field::is_absent")]
    pub schema: Field<Value>,
    /// `warn` (the default with a schema): accepted, with warnings in the receipt;
    /// `enforce`: refused (400) with every problem; `off`.
    #[serde(default)]
    #[schemars(extend("enum" = ["off", "warn", "enforce"]))]
    #[serde(skip_serializing_if = "Field::is_absent")]
    pub schema_check: Field<String>,
    #[serde(default)]
    #[schemars(extend("default" = false))]
    #[serde(skip_serializing_if = "Field::is_absent")]
    pub deprecated: Field<bool>,
    /// `approval-required`: only subscriptions the owner granted receive these events;
    /// every subscription whose filters can match them gets a request (see /approvals).
    #[serde(default)]
    #[schemars(extend("enum" = ["open", "approval-required"], "default" = "open"))]
    #[serde(skip_serializing_if = "Field::is_absent")]
    pub approval: Field<String>,
    /// The attributes subscribers may filter these events on (a ZGW kanaal's `filters`).
    #[serde(default)]
    #[schemars(length(max = MAX_KENMERKEN), inner(length(min = 1, max = MAX_KENMERK)))]
    #[serde(skip_serializing_if = "Field::is_absent")]
    pub kenmerken: Field<Vec<String>>,
}

/// A text member: not empty, at most [`MAX_TEXT`] bytes.
fn text(
    field: Field<String>,
    name: &str,
    required: bool,
    problems: &mut Problems,
) -> Option<String> {
    let what = format!("a non-empty string of at most {MAX_TEXT} bytes");
    let text = if required {
        field.required(name, &what, problems)
    } else {
        field.optional(name, &what, problems)
    }?;
    if text.trim().is_empty() || text.len() > MAX_TEXT {
        problems.add(name, format!("must be {what}"));
        return None;
    }
    Some(text)
}

/// A member naming one of a few words (`exact` or `prefix`), read with `parse`; `default`
/// when it is left out or `null`.
fn word<T>(
    field: Field<String>,
    (name, what): (&str, &str),
    parse: impl Fn(&str) -> Option<T>,
    default: T,
    problems: &mut Problems,
) -> T {
    match field.optional(name, what, problems) {
        None => default,
        Some(word) => parse(&word).unwrap_or_else(|| {
            problems.add(name, format!("must be {what}"));
            default
        }),
    }
}

impl Body for EventTypeIn {
    const NAME: &'static str = "catalog entry";
    type Representation = EventTypeOut;
    /// The `id` it names, if any, and the draft.
    type Read = (Option<String>, Draft);

    fn read(self, problems: &mut Problems) -> Option<Self::Read> {
        let id = self.id.optional("id", "a string", problems);
        let source_prefix = text(self.source, "source", true, problems);
        let event_type = text(self.event_type, "type", true, problems);
        let description = text(self.description, "description", true, problems);
        let documentation = text(self.documentation, "documentation", false, problems);
        let dataschema = text(self.dataschema, "dataschema", false, problems);
        if let Some(link) = &documentation
            && !(link.starts_with("https://") || link.starts_with("http://"))
        {
            problems.add("documentation", "must be an absolute http(s) URL");
        }
        let type_match = word(
            self.type_match,
            ("typeMatch", "`exact` or `prefix`"),
            TypeMatch::parse,
            TypeMatch::Exact,
            problems,
        );
        let approval = word(
            self.approval,
            ("approval", "`open` or `approval-required`"),
            ApprovalPolicy::parse,
            ApprovalPolicy::Open,
            problems,
        );
        // The schema as JSON text (what the store keeps); it is compiled by the catalog.
        let schema = self
            .schema
            .optional("schema", "a JSON Schema (an object)", problems)
            .and_then(|schema| match schema {
                Value::Object(_) | Value::Bool(_) => Some(schema.to_string()),
                _ => {
                    problems.add("schema", "must be a JSON Schema (an object)");
                    None
                }
            });
        let schema_check = word(
            self.schema_check,
            ("schemaCheck", "`off`, `warn` or `enforce`"),
            SchemaCheck::parse,
            if schema.is_some() {
                SchemaCheck::Warn
            } else {
                SchemaCheck::Off
            },
            problems,
        );
        let kenmerken_are = format!(
            "a list of at most {MAX_KENMERKEN} attribute names subscribers may filter on, each \
             1 to {MAX_KENMERK} characters"
        );
        let kenmerken = self
            .kenmerken
            .optional("kenmerken", &kenmerken_are, problems)
            .unwrap_or_default();
        if kenmerken.len() > MAX_KENMERKEN
            || kenmerken
                .iter()
                .any(|k| k.is_empty() || k.chars().count() > MAX_KENMERK)
        {
            problems.add("kenmerken", format!("must be {kenmerken_are}"));
        }
        let deprecated = self
            .deprecated
            .optional("deprecated", "true or false", problems)
            .unwrap_or(false);
        let draft = Draft {
            source_prefix: source_prefix?,
            event_type: event_type?,
            type_match,
            description: description?,
            documentation,
            dataschema,
            schema,
            schema_check,
            deprecated,
            approval,
            kenmerken,
        };
        Some((id, draft))
    }
}

/// A page of entries in creation order; `Link: rel="next"` when more follow.
pub(crate) async fn list(
    State(state): State<Arc<AppState>>,
    _caller: Caller,
    Params(Page { size, cursor }): Params<PageIn>,
) -> Result<Response, ApiError> {
    let (page, more) = state.catalog().page(cursor.as_deref(), size);
    let body: Vec<EventTypeOut> = page.iter().map(|entry| resource(entry)).collect();
    let next = page.last().filter(|_| more).map(|last| last.id.as_str());
    Ok(crate::page::answer(body, "/eventtypes", size, next))
}

pub(crate) async fn create(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    audit: RequestAudit,
    Input((_, draft)): Input<EventTypeIn>,
) -> Result<Response, ApiError> {
    let entry = use_case::catalog::create(&state, &audit.of(&caller), &caller.0, draft).await?;
    let location = HeaderValue::try_from(format!("{BASE_PATH}/eventtypes/{}", entry.id))
        .expect("ids are header-safe");
    Ok((
        StatusCode::CREATED,
        [(LOCATION, location)],
        Json(resource(&entry)),
    )
        .into_response())
}

pub(crate) async fn get(
    State(state): State<Arc<AppState>>,
    _caller: Caller,
    Path(id): Path<EntryId>,
) -> Result<Response, ApiError> {
    let entry = state.catalog().get(&id).ok_or_else(|| not_found(&id))?;
    Ok(Json(resource(&entry)).into_response())
}

pub(crate) async fn replace(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    audit: RequestAudit,
    Path(id): Path<EntryId>,
    Input((named, draft)): Input<EventTypeIn>,
) -> Result<Response, ApiError> {
    if let Some(other) = named
        && other != id.as_str()
    {
        return Err(ApiError::invalid(
            "the id in the body differs from the id in the path",
            vec![InvalidParam::new(
                "id",
                format!("must be `{id}` or left out"),
            )],
        ));
    }
    let entry = use_case::catalog::replace(&state, &audit.of(&caller), &caller.0, &id, draft)
        .await?
        .ok_or_else(|| not_found(&id))?;
    Ok(Json(resource(&entry)).into_response())
}

pub(crate) async fn delete(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    audit: RequestAudit,
    Path(id): Path<EntryId>,
) -> Result<Response, ApiError> {
    if !use_case::catalog::delete(&state, &audit.of(&caller), &caller.0, &id).await? {
        return Err(not_found(&id));
    }
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// The catalog's operations.
pub(crate) fn describe(doc: &mut Endpoints) {
    const TAG: &str = "event types";
    const NOT_OWNER: Refusal = (
        "403",
        "Not a publisher that may publish the entry's source, or not the entry's owner (or an \
         admin).",
    );
    const NO_ENTRY: Refusal = ("404", "There is no catalog entry with this id.");
    const CONFLICT: Refusal = (
        "409",
        "Another entry covers exactly the same type and source.",
    );
    const NOT_JSON: Refusal = ("415", "The body is not application/json.");
    let entry = doc.schema::<EventTypeOut>();
    let draft = doc.body_input::<EventTypeIn>();
    let none = json!([]);
    let list = Operation::new(
        "listEventTypes",
        TAG,
        "List the catalog, oldest entry first. Any authenticated principal reads it.",
    )
    .query::<PageIn>()
    .answer(
        "200",
        "A page of entries. A `Link` header with rel=\"next\" points to the next page.",
        Some(doc.list_of::<EventTypeOut>()),
    )
    .header("200", "Link", link_header())
    .refusals(&[BAD_REQUEST, UNAUTHORIZED]);
    doc.get("/eventtypes", self::list, &none, list);
    let create = Operation::new(
        "createEventType",
        TAG,
        "Describe events one publishes: a source prefix it may publish, a type (exact or a \
         prefix), what they are, and whether the owner must approve who receives them.",
    )
    .body(draft.clone())
    .answer("201", "Created; the caller owns it.", Some(entry.clone()))
    .header("201", "Location", header("The new entry."))
    .refusals(&[
        BAD_REQUEST,
        UNAUTHORIZED,
        NOT_OWNER,
        CONFLICT,
        NOT_JSON,
        UNAVAILABLE,
    ]);
    doc.post("/eventtypes", self::create, &none, create);
    let id = json!([path_parameter("id", "The entry's id.")]);
    let read = Operation::new("getEventType", TAG, "Read a catalog entry.")
        .answer("200", "The entry.", Some(entry.clone()))
        .refusals(&[UNAUTHORIZED, NO_ENTRY]);
    doc.get("/eventtypes/{id}", self::get, &id, read);
    let replace = Operation::new(
        "replaceEventType",
        TAG,
        "Replace a catalog entry (its owner or an admin).",
    )
    .body(draft)
    .answer("200", "The entry as replaced.", Some(entry))
    .refusals(&[
        BAD_REQUEST,
        UNAUTHORIZED,
        NOT_OWNER,
        NO_ENTRY,
        CONFLICT,
        NOT_JSON,
        UNAVAILABLE,
    ]);
    doc.put("/eventtypes/{id}", self::replace, &id, replace);
    let delete = Operation::new(
        "deleteEventType",
        TAG,
        "Delete a catalog entry (its owner or an admin).",
    )
    .answer("204", "Deleted.", None)
    .refusals(&[UNAUTHORIZED, NOT_OWNER, NO_ENTRY, UNAVAILABLE]);
    doc.delete("/eventtypes/{id}", self::delete, &id, delete);
}
