//! `/v1/eventtypes`: the event type catalog over HTTP. Any authenticated principal reads
//! it; a publisher describes its own events; only an entry's owner or an admin changes it
//! (the catalog's rules, in `catalog.rs`).

use std::collections::HashMap;
use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Response};
use http::header::LOCATION;
use http::{HeaderValue, StatusCode};
use knooppunt_event::timestamp::utc_timestamp;
use knooppunt_store::{ApprovalPolicy, CatalogEntry, SchemaCheck, TypeMatch};
use serde_json::{Value, json};

use super::BASE_PATH;
use super::JsonBody;
use super::auth::Caller;
use super::page::Page;
use super::problem::{ApiError, InvalidParam};
use super::request::RequestAudit;
use crate::app::AppState;
use crate::audit::{Action, ActionName};
use crate::catalog::{Draft, Refused};
use crate::cataloging;

pub(crate) const COLLECTION_ALLOW: &str = "GET, POST";
pub(crate) const ITEM_ALLOW: &str = "GET, PUT, DELETE";

/// The members a client sends; `id`, `owner`, `created` and `updated` it may send back
/// (they are ignored).
const MEMBERS: [&str; 11] = [
    "source",
    "type",
    "typeMatch",
    "description",
    "documentation",
    "dataschema",
    "schema",
    "schemaCheck",
    "deprecated",
    "approval",
    "kenmerken",
];
const READ_ONLY: [&str; 4] = ["id", "owner", "created", "updated"];
const MAX_TEXT: usize = 2048;
/// The most kenmerken an entry names, and the longest (a ZGW kanaal filter's bound).
const MAX_KENMERKEN: usize = 100;
const MAX_KENMERK: usize = 100;

impl From<Refused> for ApiError {
    fn from(refused: Refused) -> Self {
        match refused {
            Refused::Store(error) => error.into(),
            Refused::Forbidden(why) => ApiError::Forbidden(why),
            Refused::Conflict(why) => ApiError::Conflict(why),
            Refused::Invalid(name, why) => ApiError::invalid(
                "the catalog entry has problems; see invalidParams",
                vec![InvalidParam::new(name, why)],
            ),
        }
    }
}

fn resource(entry: &CatalogEntry) -> Value {
    let mut body = json!({
        "id": entry.id,
        "owner": entry.owner,
        "source": entry.source_prefix,
        "type": entry.event_type,
        "typeMatch": entry.type_match.as_str(),
        "description": entry.description,
        "deprecated": entry.deprecated,
        "approval": entry.approval.as_str(),
        "created": utc_timestamp(entry.created_at),
        "updated": utc_timestamp(entry.updated_at),
    });
    if let Some(link) = &entry.documentation {
        body["documentation"] = json!(link);
    }
    if let Some(schema) = &entry.dataschema {
        body["dataschema"] = json!(schema);
    }
    if let Some(schema) = entry
        .schema
        .as_deref()
        .and_then(|text| serde_json::from_str::<Value>(text).ok())
    {
        body["schema"] = schema;
    }
    body["schemaCheck"] = json!(entry.schema_check.as_str());
    if !entry.kenmerken.is_empty() {
        body["kenmerken"] = json!(entry.kenmerken);
    }
    body
}

fn not_found(id: &str) -> ApiError {
    ApiError::NotFound(format!("there is no catalog entry `{id}`"))
}

/// The draft in `body`, or every problem with it.
fn read(body: &Value) -> Result<Draft, ApiError> {
    let Some(object) = body.as_object() else {
        return Err(ApiError::invalid("the body must be a JSON object", vec![]));
    };
    let mut problems = Vec::new();
    for name in object.keys() {
        if !MEMBERS.contains(&name.as_str()) && !READ_ONLY.contains(&name.as_str()) {
            problems.push(InvalidParam::new(
                name,
                format!("unknown member; use {}", MEMBERS.join(", ")),
            ));
        }
    }
    let mut text = |name: &str, required: bool| -> Option<String> {
        match object.get(name) {
            None | Some(Value::Null) if !required => None,
            None | Some(Value::Null) => {
                problems.push(InvalidParam::new(name, "is required"));
                None
            }
            Some(Value::String(text)) if !text.trim().is_empty() && text.len() <= MAX_TEXT => {
                Some(text.clone())
            }
            Some(_) => {
                problems.push(InvalidParam::new(
                    name,
                    format!("must be a non-empty string of at most {MAX_TEXT} bytes"),
                ));
                None
            }
        }
    };
    let source_prefix = text("source", true);
    let event_type = text("type", true);
    let description = text("description", true);
    let documentation = text("documentation", false);
    let dataschema = text("dataschema", false);
    if let Some(link) = &documentation
        && !(link.starts_with("https://") || link.starts_with("http://"))
    {
        problems.push(InvalidParam::new(
            "documentation",
            "must be an absolute http(s) URL",
        ));
    }
    let type_match = match object.get("typeMatch") {
        None | Some(Value::Null) => TypeMatch::Exact,
        Some(Value::String(name)) if TypeMatch::parse(name).is_some() => {
            TypeMatch::parse(name).expect("checked")
        }
        Some(_) => {
            problems.push(InvalidParam::new(
                "typeMatch",
                "must be `exact` or `prefix`",
            ));
            TypeMatch::Exact
        }
    };
    let approval = match object.get("approval") {
        None | Some(Value::Null) => ApprovalPolicy::Open,
        Some(Value::String(name)) if ApprovalPolicy::parse(name).is_some() => {
            ApprovalPolicy::parse(name).expect("checked")
        }
        Some(_) => {
            problems.push(InvalidParam::new(
                "approval",
                "must be `open` or `approval-required`",
            ));
            ApprovalPolicy::Open
        }
    };
    // The schema as JSON text (what the store keeps); it is compiled by the catalog.
    let schema = match object.get("schema") {
        None | Some(Value::Null) => None,
        Some(schema @ (Value::Object(_) | Value::Bool(_))) => Some(schema.to_string()),
        Some(_) => {
            problems.push(InvalidParam::new(
                "schema",
                "must be a JSON Schema (an object)",
            ));
            None
        }
    };
    let schema_check = match object.get("schemaCheck") {
        None | Some(Value::Null) if schema.is_some() => SchemaCheck::Warn,
        None | Some(Value::Null) => SchemaCheck::Off,
        Some(Value::String(name)) if SchemaCheck::parse(name).is_some() => {
            SchemaCheck::parse(name).expect("checked")
        }
        Some(_) => {
            problems.push(InvalidParam::new(
                "schemaCheck",
                "must be `off`, `warn` or `enforce`",
            ));
            SchemaCheck::Off
        }
    };
    let kenmerken = match object.get("kenmerken") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items))
            if items.len() <= MAX_KENMERKEN
                && items.iter().all(|k| {
                    k.as_str()
                        .is_some_and(|k| !k.is_empty() && k.chars().count() <= MAX_KENMERK)
                }) =>
        {
            items
                .iter()
                .filter_map(|k| k.as_str().map(str::to_owned))
                .collect()
        }
        Some(_) => {
            problems.push(InvalidParam::new(
                "kenmerken",
                format!(
                    "must be a list of at most {MAX_KENMERKEN} attribute names subscribers may \
                     filter on, each 1 to {MAX_KENMERK} characters"
                ),
            ));
            Vec::new()
        }
    };
    let deprecated = match object.get("deprecated") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(flag)) => *flag,
        Some(_) => {
            problems.push(InvalidParam::new("deprecated", "must be true or false"));
            false
        }
    };
    match (source_prefix, event_type, description) {
        (Some(source_prefix), Some(event_type), Some(description)) if problems.is_empty() => {
            Ok(Draft {
                source_prefix,
                event_type,
                type_match,
                description,
                documentation,
                dataschema,
                schema,
                schema_check,
                deprecated,
                approval,
                kenmerken,
            })
        }
        _ => Err(ApiError::invalid(
            "the catalog entry has problems; see invalidParams",
            problems,
        )),
    }
}

/// A page of entries in creation order; `Link: rel="next"` when more follow.
pub(crate) async fn list(
    State(state): State<Arc<AppState>>,
    _caller: Caller,
    Query(query): Query<HashMap<String, String>>,
) -> Result<Response, ApiError> {
    let mut problems = Vec::new();
    let Page { size, cursor } = Page::read(&query, &mut problems);
    if !problems.is_empty() {
        return Err(ApiError::invalid("the query is invalid", problems));
    }
    let (page, more) = state.catalog.page(cursor.as_deref(), size);
    let body: Vec<Value> = page.iter().map(|entry| resource(entry)).collect();
    let next = page.last().filter(|_| more).map(|last| last.id.as_str());
    Ok(super::page::answer(body, "/eventtypes", size, next))
}

pub(crate) async fn create(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    audit: RequestAudit,
    JsonBody(body): JsonBody,
) -> Result<Response, ApiError> {
    let draft = read(&body)?;
    let action = |entry: &CatalogEntry| {
        Action::new(
            ActionName::EventtypeCreate,
            format!("eventtype/{}", entry.id),
            json!({"after": resource(entry)}),
        )
    };
    let entry = cataloging::create(&state, &audit.of(&caller), &caller.0, draft, action).await?;
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
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let entry = state.catalog.get(&id).ok_or_else(|| not_found(&id))?;
    Ok(Json(resource(&entry)).into_response())
}

pub(crate) async fn replace(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    audit: RequestAudit,
    Path(id): Path<String>,
    JsonBody(body): JsonBody,
) -> Result<Response, ApiError> {
    if let Some(other) = body.get("id").and_then(Value::as_str)
        && other != id
    {
        return Err(ApiError::invalid(
            "the id in the body differs from the id in the path",
            vec![InvalidParam::new(
                "id",
                format!("must be `{id}` or left out"),
            )],
        ));
    }
    let draft = read(&body)?;
    let action = |entry: &CatalogEntry| {
        Action::new(
            ActionName::EventtypeReplace,
            format!("eventtype/{id}"),
            json!({"after": resource(entry)}),
        )
        .concerning([entry.owner.clone()])
    };
    let context = audit.of(&caller);
    let entry = cataloging::replace(&state, &context, &caller.0, (&id, draft), action)
        .await?
        .ok_or_else(|| not_found(&id))?;
    Ok(Json(resource(&entry)).into_response())
}

pub(crate) async fn delete(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    audit: RequestAudit,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let action = |owner: Option<String>| {
        Action::new(
            ActionName::EventtypeDelete,
            format!("eventtype/{id}"),
            json!({}),
        )
        .concerning(owner)
    };
    if !cataloging::delete(&state, &audit.of(&caller), &caller.0, &id, action).await? {
        return Err(not_found(&id));
    }
    Ok(StatusCode::NO_CONTENT.into_response())
}
