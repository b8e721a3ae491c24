//! `/v1/principals`: who may call the API, managed by administrators at runtime. Every hub
//! sharing the store sees a change within a second; the hub that made it at once. A token
//! is shown once, when it is issued, and stored only as its SHA-256.

use std::collections::HashMap;
use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Response};
use http::header::LOCATION;
use http::{HeaderValue, StatusCode};
use knooppunt_store::{StoredPrincipal, now_ms};
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::Serialize;
use serde_json::{Map, Value, json};
use std::borrow::Cow;

use crate::BASE_PATH;
use crate::JsonBody;
use crate::auth::{Caller, Role};
use crate::document::{
    BAD_REQUEST, Document, Operation, Refusal, UNAUTHORIZED, UNAVAILABLE, header, link_header,
    page_parameters, path_parameter,
};
use crate::ids::PrincipalName;
use crate::page::Page;
use crate::problem::{ApiError, InvalidParam};
use crate::request::RequestAudit;
use knooppunt_services::administering::{self, PrincipalOut};
use knooppunt_services::app::AppState;
use knooppunt_services::principals::FROM_API;

pub(crate) const COLLECTION_ALLOW: &str = "GET, POST";
pub(crate) const ITEM_ALLOW: &str = "GET, PATCH, DELETE";
pub(crate) const TOKEN_ALLOW: &str = "POST";

/// Bounds on what a principal holds.
const MAX_NAME: usize = 100;
const MAX_PREFIXES: usize = 50;
const MAX_PREFIX: usize = 256;

/// The members a principal's body may have.
pub(crate) const MEMBERS: [&str; 7] = [
    "name",
    "roles",
    "subscribeTypePrefixes",
    "publishSourcePrefixes",
    "oin",
    "disabled",
    "issueToken",
];

fn resource(record: &StoredPrincipal) -> PrincipalOut {
    PrincipalOut::from(record)
}

/// The principal just created, with its token when one was issued.
#[derive(Debug, Serialize, serde::Deserialize, JsonSchema)]
#[schemars(rename = "CreatedPrincipal")]
pub struct CreatedOut {
    #[serde(flatten)]
    pub principal: PrincipalOut,
    /// Its bearer token: shown only in this answer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
}

/// A new token, shown once.
#[derive(Debug, Serialize, serde::Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "PrincipalToken")]
pub struct TokenOut {
    pub name: String,
    /// The bearer token; shown only here.
    pub token: String,
    /// With `keepOld`: until when the token it replaced is still accepted.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("format" = "date-time"))]
    pub previous_valid_until: Option<String>,
}

/// The longest overlap a replaced token may have.
const LONGEST_OVERLAP: std::time::Duration = std::time::Duration::from_secs(7 * 24 * 3600);

/// What creates a principal: the members [`create`] reads ([`MEMBERS`]).
pub(crate) struct NewPrincipal;

impl JsonSchema for NewPrincipal {
    fn schema_name() -> Cow<'static, str> {
        "NewPrincipal".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        let mut properties = held("empty or left out");
        properties.insert(
            "name".into(),
            json!({"type": "string", "pattern": format!("^[A-Za-z0-9._:@-]{{1,{MAX_NAME}}}$")}),
        );
        properties.insert(
            "disabled".into(),
            json!({"type": "boolean", "default": false}),
        );
        properties.insert(
            "issueToken".into(),
            json!({"type": "boolean", "default": true, "description": "false: no bearer token (the principal uses a client certificate or an access token)."}),
        );
        json_schema!({
            "type": "object",
            "additionalProperties": false,
            "required": ["name", "roles"],
            "properties": properties
        })
    }
}

/// What changes a principal: the members [`update`] reads.
struct PrincipalChange;

impl JsonSchema for PrincipalChange {
    fn schema_name() -> Cow<'static, str> {
        "PrincipalChange".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        use crate::identity::zgw::{CONSUME, PUBLISH};
        let mut properties = held("empty");
        properties.insert("disabled".into(), json!({"type": "boolean"}));
        properties.insert(
            "zgw".into(),
            json!({"type": "object", "nullable": true,
                   "description": "Makes it a ZGW client of the Notificaties API facade (/api/v1), or (null) no \
                                   longer: its `clientId`, the HS256 `secret` its tokens are signed with (sealed at \
                                   once under the hub's [zgw] secret_keys, never shown) and its `scopes`.",
                   "required": ["clientId", "secret", "scopes"],
                   "properties": {
                       "clientId": {"type": "string", "pattern": "^[A-Za-z0-9._-]{1,100}$"},
                       "secret": {"type": "string", "minLength": 16, "maxLength": 1000, "writeOnly": true},
                       "scopes": {"type": "array", "minItems": 1,
                                  "items": {"type": "string", "enum": [PUBLISH, CONSUME]}}
                   }}),
        );
        json_schema!({
            "type": "object",
            "additionalProperties": false,
            "description": "The members to change; `oin: null` removes the OIN.",
            "properties": properties
        })
    }
}

/// The members a principal holds that a client sets: its roles (at least one), prefixes
/// (`any` when `open`, e.g. "empty or left out") and OIN.
fn held(open: &str) -> Map<String, Value> {
    let prefixes = |what: &str| {
        json!({"type": "array", "maxItems": MAX_PREFIXES,
               "items": {"type": "string", "minLength": 1, "maxLength": MAX_PREFIX},
               "description": format!("{what}; {open}: any.")})
    };
    let mut members = Map::new();
    members.insert(
        "roles".into(),
        json!({"type": "array", "minItems": 1,
               "items": {"type": "string", "enum": ["publisher", "subscriber", "admin", "metrics"]},
               "description": "What it may do: publish events, manage its own subscriptions, manage everything, read /metrics."}),
    );
    members.insert(
        "subscribeTypePrefixes".into(),
        prefixes("The event types it may subscribe to"),
    );
    members.insert(
        "publishSourcePrefixes".into(),
        prefixes("The sources it may publish"),
    );
    members.insert(
        "oin".into(),
        json!({"type": "string", "nullable": true, "pattern": "^[0-9]{20}$",
               "description": "The OIN of its organisation: it then publishes only `urn:nld:oin:<OIN>:` sources, and a \
                               trusted client certificate whose subject serialNumber is this OIN identifies it. One OIN \
                               names one principal."}),
    );
    members
}

/// The `zgw` member of a change: `null` to take the ZGW client away, or `clientId`,
/// `secret` (sealed at once under the hub's key) and `scopes`.
fn read_zgw(
    state: &AppState,
    principal: &str,
    value: &Value,
) -> Result<Option<knooppunt_store::StoredZgwClient>, InvalidParam> {
    use crate::identity::zgw::{CONSUME, PUBLISH};
    let problem = |why: &str| InvalidParam::new("zgw", why);
    let Some(object) = value.as_object() else {
        return if value.is_null() {
            Ok(None)
        } else {
            Err(problem(
                "must be an object with clientId, secret and scopes, or null",
            ))
        };
    };
    let Some(keys) = &state.zgw.secret_keys else {
        return Err(problem(
            "this hub has no [zgw] secret_keys to seal client secrets with: configure them first",
        ));
    };
    let text = |name: &str| object.get(name).and_then(Value::as_str).unwrap_or("");
    let client_id = text("clientId");
    if client_id.is_empty()
        || client_id.len() > 100
        || !client_id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
    {
        return Err(problem(
            "clientId: 1 to 100 letters, digits, `-`, `_` or `.`",
        ));
    }
    let taken_by_file = state.zgw.clients.iter().any(|c| c.client_id == client_id);
    let taken = state
        .principals
        .by_zgw_client(client_id)
        .is_some_and(|p| p.name != principal);
    if taken_by_file || taken {
        return Err(problem("clientId: another ZGW client has it"));
    }
    let secret = text("secret");
    if secret.chars().count() < 16 || secret.len() > 1000 {
        return Err(problem("secret: 16 to 1000 characters"));
    }
    // Every scope a string: one that is not is refused, not left out.
    let scopes: Vec<String> = object
        .get("scopes")
        .and_then(Value::as_array)
        .and_then(|items| {
            items
                .iter()
                .map(|s| s.as_str().map(str::to_owned))
                .collect::<Option<_>>()
        })
        .unwrap_or_default();
    if scopes.is_empty() || scopes.iter().any(|s| s != PUBLISH && s != CONSUME) {
        return Err(problem(&format!(
            "scopes: one or both of `{PUBLISH}` and `{CONSUME}`"
        )));
    }
    Ok(Some(knooppunt_store::StoredZgwClient {
        client_id: client_id.to_owned(),
        sealed_secret: keys.seal(client_id, secret.as_bytes()),
        scopes,
    }))
}

fn not_found(name: &str) -> ApiError {
    ApiError::NotFound(format!("there is no principal `{name}`"))
}

/// Applies the members of `body` to `record`, collecting every problem.
fn apply(body: &Map<String, Value>, record: &mut StoredPrincipal) -> Vec<InvalidParam> {
    let mut problems = Vec::new();
    for name in body.keys() {
        if !MEMBERS.contains(&name.as_str()) {
            problems.push(InvalidParam::new(
                name,
                format!("unknown member; a principal has {}", MEMBERS.join(", ")),
            ));
        }
    }
    let strings =
        |name: &str, max: usize, problems: &mut Vec<InvalidParam>| -> Option<Vec<String>> {
            let value = body.get(name)?;
            let list = value.as_array().and_then(|items| {
                items
                    .iter()
                    .map(|item| item.as_str().map(str::to_owned))
                    .collect::<Option<Vec<String>>>()
            });
            match list {
                Some(list) if list.len() > max => {
                    problems.push(InvalidParam::new(name, format!("at most {max} entries")));
                    None
                }
                Some(list) if list.iter().any(|s| s.is_empty() || s.len() > MAX_PREFIX) => {
                    problems.push(InvalidParam::new(
                        name,
                        format!("each entry is 1 to {MAX_PREFIX} characters"),
                    ));
                    None
                }
                Some(list) => Some(list),
                None => {
                    problems.push(InvalidParam::new(name, "must be an array of strings"));
                    None
                }
            }
        };
    if let Some(roles) = strings("roles", Role::ALL.len(), &mut problems) {
        let unknown: Vec<&String> = roles.iter().filter(|r| Role::parse(r).is_none()).collect();
        if !unknown.is_empty() || roles.is_empty() {
            problems.push(InvalidParam::new(
                "roles",
                format!("one or more of {}", Role::ALL.map(Role::name).join(", ")),
            ));
        } else {
            let mut roles = roles;
            roles.sort_unstable();
            roles.dedup();
            record.roles = roles;
        }
    }
    if let Some(list) = strings("subscribeTypePrefixes", MAX_PREFIXES, &mut problems) {
        record.subscribe_type_prefixes = list;
    }
    if let Some(list) = strings("publishSourcePrefixes", MAX_PREFIXES, &mut problems) {
        record.publish_source_prefixes = list;
    }
    match body.get("oin") {
        None => {}
        Some(Value::Null) => record.oin = None,
        Some(Value::String(oin)) if crate::identity::is_oin(oin) => record.oin = Some(oin.clone()),
        Some(_) => problems.push(InvalidParam::new(
            "oin",
            "an OIN is 20 digits (Organisatie-identificatienummer), or null for none",
        )),
    }
    match body.get("disabled") {
        None => {}
        Some(Value::Bool(disabled)) => record.disabled = *disabled,
        Some(_) => problems.push(InvalidParam::new("disabled", "must be true or false")),
    }
    if body.get("issueToken").is_some_and(|v| !v.is_boolean()) {
        problems.push(InvalidParam::new("issueToken", "must be true or false"));
    }
    problems
}

fn object(body: &Value) -> Result<&Map<String, Value>, ApiError> {
    body.as_object()
        .ok_or_else(|| ApiError::invalid("the body must be a JSON object", vec![]))
}

/// A page of principals in name order; `Link: rel="next"` when more follow.
pub(crate) async fn list(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    Query(query): Query<HashMap<String, String>>,
) -> Result<Response, ApiError> {
    administering::may_administer(&caller.0, "list principals")?;
    let mut problems = Vec::new();
    let Page { size, cursor } = Page::read(&query, &mut problems);
    if !problems.is_empty() {
        return Err(ApiError::invalid("the query is invalid", problems));
    }
    let (page, more) = state.principals.page(cursor.as_deref(), size);
    let body: Vec<PrincipalOut> = page.iter().map(resource).collect();
    let next = page.last().filter(|_| more).map(|last| last.name.as_str());
    Ok(crate::page::answer(body, "/principals", size, next))
}

pub(crate) async fn create(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    audit: RequestAudit,
    JsonBody(body): JsonBody,
) -> Result<Response, ApiError> {
    administering::may_administer(&caller.0, "create principals")?;
    let body = object(&body)?;
    let name = body.get("name").and_then(Value::as_str).unwrap_or("");
    let now = now_ms();
    let mut record = StoredPrincipal {
        name: name.to_owned(),
        roles: Vec::new(),
        token_sha256: None,
        previous_token: None,
        subscribe_type_prefixes: Vec::new(),
        publish_source_prefixes: Vec::new(),
        oin: None,
        disabled: false,
        origin: FROM_API.into(),
        zgw: None,
        created_at: now,
        updated_at: now,
    };
    let mut problems = apply(body, &mut record);
    let name_ok = !name.is_empty()
        && name.len() <= MAX_NAME
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.:@".contains(&b));
    if !name_ok {
        problems.push(InvalidParam::new(
            "name",
            format!("1 to {MAX_NAME} letters, digits, `-`, `_`, `.`, `:` or `@` (an access token's principal is named by its claim, with the issuer's name_prefix)"),
        ));
    }
    if !body.contains_key("roles") {
        problems.push(InvalidParam::new("roles", "required"));
    }
    if !problems.is_empty() {
        return Err(ApiError::invalid("the principal is not valid", problems));
    }
    let issue = body
        .get("issueToken")
        .and_then(Value::as_bool)
        .unwrap_or(true);
    let (record, token) =
        administering::create(&state, &audit.of(&caller), &caller.0, record, issue).await?;
    let answer = CreatedOut {
        principal: resource(&record),
        token,
    };
    let location = HeaderValue::try_from(format!("{BASE_PATH}/principals/{}", record.name))
        .expect("names are header-safe");
    Ok((StatusCode::CREATED, [(LOCATION, location)], Json(answer)).into_response())
}

pub(crate) async fn get(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    Path(name): Path<PrincipalName>,
) -> Result<Response, ApiError> {
    administering::may_administer(&caller.0, "read principals")?;
    let record = state
        .principals
        .get(&name)
        .ok_or_else(|| not_found(&name))?;
    Ok(Json(resource(&record)).into_response())
}

/// A JSON merge patch (RFC 7396) of roles, prefixes, OIN and `disabled`.
pub(crate) async fn update(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    audit: RequestAudit,
    Path(name): Path<PrincipalName>,
    JsonBody(body): JsonBody,
) -> Result<Response, ApiError> {
    administering::may_administer(&caller.0, "change principals")?;
    let mut body = object(&body)?.clone();
    let zgw = body.remove("zgw");
    let body = &body;
    let mut record = state
        .principals
        .get(&name)
        .ok_or_else(|| not_found(&name))?;
    let mut problems = apply(body, &mut record);
    if let Some(zgw) = zgw {
        match read_zgw(&state, &name, &zgw) {
            Ok(client) => record.zgw = client,
            Err(problem) => problems.push(problem),
        }
    }
    if body.get("name").is_some_and(|n| n.as_str() != Some(&name)) {
        problems.push(InvalidParam::new("name", "a principal cannot be renamed"));
    }
    if body.contains_key("issueToken") {
        problems.push(InvalidParam::new(
            "issueToken",
            format!("issue a new token with POST {BASE_PATH}/principals/{name}/token"),
        ));
    }
    if !problems.is_empty() {
        return Err(ApiError::invalid("the change is not valid", problems));
    }
    let changed = administering::change(&state, &audit.of(&caller), &caller.0, record)
        .await?
        .ok_or_else(|| not_found(&name))?;
    Ok(Json(resource(&changed)).into_response())
}

pub(crate) async fn delete(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    audit: RequestAudit,
    Path(name): Path<PrincipalName>,
) -> Result<Response, ApiError> {
    administering::delete(&state, &audit.of(&caller), &caller.0, &name)
        .await?
        .ok_or_else(|| not_found(&name))?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// Issues a new token (the old one stops working at once); shown in this answer only.
pub(crate) async fn issue_token(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    audit: RequestAudit,
    Path(name): Path<PrincipalName>,
    Query(query): Query<HashMap<String, String>>,
) -> Result<Response, ApiError> {
    let mut problems = Vec::new();
    for key in query.keys().filter(|key| key.as_str() != "keepOld") {
        problems.push(InvalidParam::new(
            key.as_str(),
            "unknown query parameter; use `keepOld`",
        ));
    }
    let keep_old = match query
        .get("keepOld")
        .map(|v| knooppunt_store::parse_iso8601_duration(v))
    {
        None => None,
        Some(Ok(overlap)) if overlap <= LONGEST_OVERLAP => Some(overlap),
        Some(Ok(_)) => {
            problems.push(InvalidParam::new("keepOld", "must be at most P7D"));
            None
        }
        Some(Err(why)) => {
            problems.push(InvalidParam::new("keepOld", why));
            None
        }
    };
    if !problems.is_empty() {
        return Err(ApiError::invalid("the query is invalid", problems));
    }
    let (token, previous_until) =
        administering::issue_token(&state, &audit.of(&caller), &caller.0, &name, keep_old)
            .await?
            .ok_or_else(|| not_found(&name))?;
    Ok(Json(TokenOut {
        name: name.into_string(),
        token,
        previous_valid_until: previous_until.map(knooppunt_event::timestamp::utc_timestamp),
    })
    .into_response())
}

/// The principals' operations.
pub(crate) fn describe(doc: &mut Document) {
    const TAG: &str = "principals";
    const ADMIN_ONLY: Refusal = ("403", "Only an administrator manages principals.");
    const NO_PRINCIPAL: Refusal = ("404", "There is no principal with this name.");
    let principal = doc.schema::<PrincipalOut>();
    let list = Operation::new("listPrincipals", TAG, "List the principals, in name order.")
        .parameters(page_parameters(
            "principals",
            "The name of the last principal",
            None,
        ))
        .answer(
            "200",
            "A page of principals. A `Link` header with rel=\"next\" points to the next page.",
            Some(doc.list_of::<PrincipalOut>()),
        )
        .header("200", "Link", link_header())
        .refusals(&[BAD_REQUEST, UNAUTHORIZED, ADMIN_ONLY]);
    let none = json!([]);
    doc.add("/principals", "get", &none, list);
    let create = Operation::new(
        "createPrincipal",
        TAG,
        "Create a principal; it can call the API at once, on every hub sharing the store. \
         Unless `issueToken` is false, the answer holds its bearer token: the only time it is \
         shown.",
    )
    .body(doc.schema::<NewPrincipal>())
    .answer(
        "201",
        "Created. `token` is shown this once.",
        Some(doc.schema::<CreatedOut>()),
    )
    .header("201", "Location", header("The new principal."))
    .refusals(&[
        BAD_REQUEST,
        UNAUTHORIZED,
        ADMIN_ONLY,
        ("409", "The name, or the OIN, is another principal's."),
        ("415", "The body is not application/json."),
        UNAVAILABLE,
    ]);
    doc.add("/principals", "post", &none, create);
    let name = json!([path_parameter("name", "The principal's name.")]);
    let read = Operation::new("getPrincipal", TAG, "Read a principal (never its token).")
        .answer("200", "The principal.", Some(principal.clone()))
        .refusals(&[UNAUTHORIZED, ADMIN_ONLY, NO_PRINCIPAL]);
    doc.add("/principals/{name}", "get", &name, read);
    let change = doc.schema::<PrincipalChange>();
    let update = Operation::new(
        "updatePrincipal",
        TAG,
        "Change a principal's roles, prefixes, OIN or `disabled` (JSON merge patch, RFC 7396). \
         A disabled principal is refused from the next request on. Administrators cannot \
         disable or demote themselves.",
    )
    .body_as(
        &["application/merge-patch+json", "application/json"],
        change,
    )
    .answer("200", "The principal as changed.", Some(principal))
    .refusals(&[
        BAD_REQUEST,
        UNAUTHORIZED,
        ADMIN_ONLY,
        NO_PRINCIPAL,
        (
            "409",
            "The OIN is another principal's, or the change would lock the caller out.",
        ),
        (
            "415",
            "The body is not application/merge-patch+json or application/json.",
        ),
        UNAVAILABLE,
    ]);
    doc.add("/principals/{name}", "patch", &name, update);
    let delete = Operation::new(
        "deletePrincipal",
        TAG,
        "Delete a principal: its credentials stop working at once. Its subscriptions stay.",
    )
    .answer("204", "Deleted.", None)
    .refusals(&[
        UNAUTHORIZED,
        ADMIN_ONLY,
        NO_PRINCIPAL,
        ("409", "Administrators cannot delete themselves."),
        UNAVAILABLE,
    ]);
    doc.add("/principals/{name}", "delete", &name, delete);
    let token = Operation::new(
        "issuePrincipalToken",
        TAG,
        "Issue a new bearer token for a principal; the old one stops working at once, or with \
         `keepOld` when that time has passed (its clients move to the new token meanwhile). \
         The answer is the only time the token is shown.",
    )
    .parameters(json!([{"name": "keepOld", "in": "query", "required": false,
        "description": "How long the replaced token is still accepted (ISO 8601 duration, at \
                        most P7D), e.g. PT1H.",
        "schema": {"type": "string", "example": "PT1H"}}]))
    .answer("200", "The new token.", Some(doc.schema::<TokenOut>()))
    .refusals(&[
        BAD_REQUEST,
        UNAUTHORIZED,
        ADMIN_ONLY,
        NO_PRINCIPAL,
        UNAVAILABLE,
    ]);
    doc.add("/principals/{name}/token", "post", &name, token);
}
