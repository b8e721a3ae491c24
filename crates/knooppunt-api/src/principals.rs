//! `/v1/principals`: who may call the API, managed by administrators at runtime. Every hub
//! sharing the store sees a change within a second; the hub that made it at once. A token
//! is shown once, when it is issued, and stored only as its SHA-256.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use http::header::LOCATION;
use http::{HeaderValue, StatusCode};
use knooppunt_store::{StoredPrincipal, now_ms};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::BASE_PATH;
use crate::JsonBody;
use crate::auth::{Caller, Role};
use crate::document::{
    BAD_REQUEST, Operation, Refusal, UNAUTHORIZED, UNAVAILABLE, header, link_header, path_parameter,
};
use crate::endpoints::Endpoints;
use crate::ids::PrincipalName;
use crate::input::{self, Body, Field, Params, Problems};
use crate::page::{Page, PageIn};
use crate::problem::{ApiError, InvalidParam};
use crate::request::RequestAudit;
use knooppunt_services::app::AppState;
use knooppunt_services::principals::FROM_API;
use knooppunt_services::use_case::{self, principals::PrincipalOut};

/// Bounds on what a principal holds.
const MAX_PREFIXES: usize = 50;
const MAX_PREFIX: usize = 256;

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

/// What creates a principal.
#[derive(Debug, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "NewPrincipal", extend("additionalProperties" = false))]
pub struct NewPrincipal {
    /// Letters, digits, `-`, `_`, `.`, `:` or `@` (an access token's principal is named by
    /// its claim, with the issuer's `name_prefix`).
    #[schemars(regex(pattern = r"^[A-Za-z0-9._:@-]{1,100}$"))]
    #[serde(skip_serializing_if = "Field::is_absent")]
    pub name: Field<String>,
    /// What it may do: publish events, manage its own subscriptions, manage everything,
    /// read /metrics.
    #[schemars(schema_with = "roles_schema")]
    #[serde(skip_serializing_if = "Field::is_absent")]
    pub roles: Field<Vec<String>>,
    /// The event types it may subscribe to; empty or left out: any.
    #[serde(default)]
    #[schemars(length(max = MAX_PREFIXES), inner(length(min = 1, max = MAX_PREFIX)))]
    #[serde(skip_serializing_if = "Field::is_absent")]
    pub subscribe_type_prefixes: Field<Vec<String>>,
    /// The sources it may publish; empty or left out: any.
    #[serde(default)]
    #[schemars(length(max = MAX_PREFIXES), inner(length(min = 1, max = MAX_PREFIX)))]
    #[serde(skip_serializing_if = "Field::is_absent")]
    pub publish_source_prefixes: Field<Vec<String>>,
    /// The OIN of its organisation: it then publishes only `urn:nld:oin:<OIN>:` sources, and
    /// a trusted client certificate whose subject serialNumber is this OIN identifies it.
    /// One OIN names one principal.
    #[serde(default)]
    #[schemars(regex(pattern = "^[0-9]{20}$"), extend("nullable" = true))]
    #[serde(skip_serializing_if = "Field::is_absent")]
    pub oin: Field<String>,
    #[serde(default)]
    #[schemars(extend("default" = false))]
    #[serde(skip_serializing_if = "Field::is_absent")]
    pub disabled: Field<bool>,
    /// false: no bearer token (the principal uses a client certificate or an access token).
    #[serde(default)]
    #[schemars(extend("default" = true))]
    #[serde(skip_serializing_if = "Field::is_absent")]
    pub issue_token: Field<bool>,
}

/// The schema of `roles`: one or more of the roles ([`Role::ALL`]), no more entries than
/// there are roles (a role sent twice counts once).
fn roles_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let names = Role::ALL.map(Role::name);
    schemars::json_schema!({
        "type": "array",
        "items": {"type": "string", "enum": names},
        "minItems": 1,
        "maxItems": names.len(),
    })
}

/// What changes a principal (a JSON merge patch): the members to change; `oin: null`
/// removes the OIN, `zgw: null` the ZGW client.
#[derive(Debug, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "PrincipalChange", extend("additionalProperties" = false))]
pub struct PrincipalChange {
    /// A principal cannot be renamed: if sent, its own name.
    #[serde(default)]
    #[serde(skip_serializing_if = "Field::is_absent")]
    pub name: Field<String>,
    /// What it may do: publish events, manage its own subscriptions, manage everything,
    /// read /metrics.
    #[serde(default)]
    #[schemars(schema_with = "roles_schema")]
    #[serde(skip_serializing_if = "Field::is_absent")]
    pub roles: Field<Vec<String>>,
    /// The event types it may subscribe to; empty: any.
    #[serde(default)]
    #[schemars(length(max = MAX_PREFIXES), inner(length(min = 1, max = MAX_PREFIX)))]
    #[serde(skip_serializing_if = "Field::is_absent")]
    pub subscribe_type_prefixes: Field<Vec<String>>,
    /// The sources it may publish; empty: any.
    #[serde(default)]
    #[schemars(length(max = MAX_PREFIXES), inner(length(min = 1, max = MAX_PREFIX)))]
    #[serde(skip_serializing_if = "Field::is_absent")]
    pub publish_source_prefixes: Field<Vec<String>>,
    /// The OIN of its organisation (see NewPrincipal), or `null` for none.
    #[serde(default)]
    #[schemars(regex(pattern = "^[0-9]{20}$"), extend("nullable" = true))]
    #[serde(skip_serializing_if = "Field::is_absent")]
    pub oin: Field<String>,
    #[serde(default)]
    #[serde(skip_serializing_if = "Field::is_absent")]
    pub disabled: Field<bool>,
    /// Makes it a ZGW client of the Notificaties API facade (/api/v1), or (`null`) no
    /// longer.
    #[serde(default)]
    #[schemars(extend("nullable" = true))]
    #[serde(skip_serializing_if = "Field::is_absent")]
    pub zgw: Field<ZgwClientIn>,
}

/// A principal as a ZGW client: its `clientId`, the HS256 `secret` its tokens are signed
/// with (sealed at once under the hub's [zgw] secret_keys, never shown) and its `scopes`.
#[derive(Debug, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "ZgwClientRequest", extend("additionalProperties" = false))]
pub struct ZgwClientIn {
    #[schemars(regex(pattern = "^[A-Za-z0-9._-]{1,100}$"))]
    #[serde(skip_serializing_if = "Field::is_absent")]
    pub client_id: Field<String>,
    #[schemars(length(min = 16, max = 1000), extend("writeOnly" = true))]
    #[serde(skip_serializing_if = "Field::is_absent")]
    pub secret: Field<String>,
    #[schemars(
        length(min = 1),
        extend("items" = {"type": "string", "enum": [crate::identity::zgw::PUBLISH, crate::identity::zgw::CONSUME]})
    )]
    #[serde(skip_serializing_if = "Field::is_absent")]
    pub scopes: Field<Vec<String>>,
}

/// The members a principal holds that a client sets, as a create or a change sends them.
struct Held {
    roles: Field<Vec<String>>,
    subscribe_type_prefixes: Field<Vec<String>>,
    publish_source_prefixes: Field<Vec<String>>,
    oin: Field<String>,
    disabled: Field<bool>,
}

/// Reads a principal body: the unknown members, or the typed body.
fn read_body<T: serde::de::DeserializeOwned + JsonSchema + 'static>(
    body: &Value,
    problems: &mut Problems,
) -> Result<T, ApiError> {
    let mut found = Problems::default();
    match input::typed(body, "principal", &mut found) {
        Some(typed) => {
            for problem in found.into_vec() {
                problems.add(problem.name, problem.reason);
            }
            Ok(typed)
        }
        None => Err(ApiError::invalid(
            "the principal is not valid",
            found.into_vec(),
        )),
    }
}

/// The `zgw` member of a change: `clientId`, `secret` (sealed at once under the hub's key)
/// and `scopes`.
fn read_zgw(
    state: &AppState,
    principal: &str,
    zgw: ZgwClientIn,
) -> Result<knooppunt_store::StoredZgwClient, InvalidParam> {
    use crate::identity::zgw::{CONSUME, PUBLISH};
    let problem = |why: &str| InvalidParam::new("zgw", why);
    let Some(keys) = &state.zgw().secret_keys else {
        return Err(problem(
            "this hub has no [zgw] secret_keys to seal client secrets with: configure them first",
        ));
    };
    let client_id = zgw.client_id.given().cloned().unwrap_or_default();
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
    let taken_by_file = state.zgw().clients.iter().any(|c| c.client_id == client_id);
    let taken = state
        .principals()
        .by_zgw_client(&client_id)
        .is_some_and(|p| p.name != principal);
    if taken_by_file || taken {
        return Err(problem("clientId: another ZGW client has it"));
    }
    let secret = zgw.secret.given().cloned().unwrap_or_default();
    if secret.chars().count() < 16 || secret.len() > 1000 {
        return Err(problem("secret: 16 to 1000 characters"));
    }
    // Every scope a string: one that is not is refused, not left out.
    let scopes = zgw.scopes.given().cloned().unwrap_or_default();
    if scopes.is_empty() || scopes.iter().any(|s| s != PUBLISH && s != CONSUME) {
        return Err(problem(&format!(
            "scopes: one or both of `{PUBLISH}` and `{CONSUME}`"
        )));
    }
    Ok(knooppunt_store::StoredZgwClient {
        sealed_secret: keys.seal(&client_id, secret.as_bytes()),
        client_id,
        scopes,
    })
}

fn not_found(name: &str) -> ApiError {
    ApiError::NotFound(format!("there is no principal `{name}`"))
}

/// Applies what a body sets to `record`, collecting every problem.
fn apply(held: Held, record: &mut StoredPrincipal, problems: &mut Problems) {
    let strings = |field: Field<Vec<String>>, name: &str, max: usize, problems: &mut Problems| {
        let list = field.optional(name, "an array of strings", problems)?;
        if list.len() > max {
            problems.add(name, format!("at most {max} entries"));
            None
        } else if list.iter().any(|s| s.is_empty() || s.len() > MAX_PREFIX) {
            problems.add(name, format!("each entry is 1 to {MAX_PREFIX} characters"));
            None
        } else {
            Some(list)
        }
    };
    if let Some(roles) = strings(held.roles, "roles", Role::ALL.len(), problems) {
        let unknown: Vec<&String> = roles.iter().filter(|r| Role::parse(r).is_none()).collect();
        if !unknown.is_empty() || roles.is_empty() {
            problems.add(
                "roles",
                format!("one or more of {}", Role::ALL.map(Role::name).join(", ")),
            );
        } else {
            let mut roles = roles;
            roles.sort_unstable();
            roles.dedup();
            record.roles = roles;
        }
    }
    if let Some(list) = strings(
        held.subscribe_type_prefixes,
        "subscribeTypePrefixes",
        MAX_PREFIXES,
        problems,
    ) {
        record.subscribe_type_prefixes = list;
    }
    if let Some(list) = strings(
        held.publish_source_prefixes,
        "publishSourcePrefixes",
        MAX_PREFIXES,
        problems,
    ) {
        record.publish_source_prefixes = list;
    }
    match held.oin {
        Field::Absent => {}
        Field::Null => record.oin = None,
        Field::Given(oin) if crate::identity::is_oin(&oin) => record.oin = Some(oin),
        _ => problems.add(
            "oin",
            "an OIN is 20 digits (Organisatie-identificatienummer), or null for none",
        ),
    }
    if let Some(disabled) = held
        .disabled
        .optional("disabled", "true or false", problems)
    {
        record.disabled = disabled;
    }
}

/// A page of principals in name order; `Link: rel="next"` when more follow.
pub(crate) async fn list(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    page: Result<Params<PageIn>, ApiError>,
) -> Result<Response, ApiError> {
    use_case::principals::may_administer(&caller.0, "list principals")?;
    let Params(Page { size, cursor }) = page?;
    let (page, more) = state.principals().page(cursor.as_deref(), size);
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
    use_case::principals::may_administer(&caller.0, "create principals")?;
    let mut problems = Problems::default();
    let body: NewPrincipal = read_body(&body, &mut problems)?;
    let name = body
        .name
        .required("name", "the principal's name", &mut problems);
    let now = now_ms();
    let mut record = StoredPrincipal {
        name: name.clone().unwrap_or_default(),
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
    if !body.roles.is_sent() || matches!(body.roles, Field::Null) {
        problems.add("roles", "required");
    }
    let issue = body
        .issue_token
        .optional("issueToken", "true or false", &mut problems)
        .unwrap_or(true);
    apply(
        Held {
            roles: body.roles,
            subscribe_type_prefixes: body.subscribe_type_prefixes,
            publish_source_prefixes: body.publish_source_prefixes,
            oin: body.oin,
            disabled: body.disabled,
        },
        &mut record,
        &mut problems,
    );
    if let Some(name) = &name
        && let Err(why) = use_case::principals::check_principal_name(name)
    {
        problems.add("name", why);
    }
    if !problems.is_empty() {
        return Err(ApiError::invalid(
            "the principal is not valid",
            problems.into_vec(),
        ));
    }
    let (record, token) =
        use_case::principals::create(&state, &audit.of(&caller), &caller.0, record, issue).await?;
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
    use_case::principals::may_administer(&caller.0, "read principals")?;
    let record = state
        .principals()
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
    use_case::principals::may_administer(&caller.0, "change principals")?;
    let mut problems = Problems::default();
    let body: PrincipalChange = read_body(&body, &mut problems)?;
    let mut record = state
        .principals()
        .get(&name)
        .ok_or_else(|| not_found(&name))?;
    if let Some(named) = body.name.optional("name", "a string", &mut problems)
        && named != name.as_str()
    {
        problems.add("name", "a principal cannot be renamed");
    }
    apply(
        Held {
            roles: body.roles,
            subscribe_type_prefixes: body.subscribe_type_prefixes,
            publish_source_prefixes: body.publish_source_prefixes,
            oin: body.oin,
            disabled: body.disabled,
        },
        &mut record,
        &mut problems,
    );
    match body.zgw {
        Field::Absent => {}
        Field::Null => record.zgw = None,
        Field::Given(zgw) => match read_zgw(&state, &name, zgw) {
            Ok(client) => record.zgw = Some(client),
            Err(problem) => problems.add(problem.name, problem.reason),
        },
        Field::Wrong(_) => problems.add(
            "zgw",
            "must be an object with clientId, secret and scopes, or null",
        ),
    }
    if !problems.is_empty() {
        return Err(ApiError::invalid(
            "the change is not valid",
            problems.into_vec(),
        ));
    }
    let changed = use_case::principals::change(&state, &audit.of(&caller), &caller.0, record)
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
    use_case::principals::delete(&state, &audit.of(&caller), &caller.0, &name)
        .await?
        .ok_or_else(|| not_found(&name))?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// The query of a token's issue.
#[derive(Debug, Default, serde::Deserialize, JsonSchema)]
pub(crate) struct IssueTokenQuery {
    /// How long the previous token keeps working (an ISO 8601 duration up to P7D, e.g.
    /// PT1H), so that its holder can switch without a gap; left out, it stops at once.
    #[serde(default, rename = "keepOld")]
    #[schemars(example = &"PT1H")]
    keep_old: Field<String>,
}

impl Body for IssueTokenQuery {
    const NAME: &'static str = "query";
    type Representation = ();
    /// How long the previous token keeps working.
    type Read = Option<std::time::Duration>;

    fn read(self, problems: &mut Problems) -> Option<Self::Read> {
        Some(input::duration_at_most(
            &self.keep_old,
            "keepOld",
            (LONGEST_OVERLAP, "P7D"),
            problems,
        ))
    }
}

/// Issues a new token (the old one stops working at once); shown in this answer only.
pub(crate) async fn issue_token(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    audit: RequestAudit,
    Path(name): Path<PrincipalName>,
    Params(keep_old): Params<IssueTokenQuery>,
) -> Result<Response, ApiError> {
    let (token, previous_until) =
        use_case::principals::issue_token(&state, &audit.of(&caller), &caller.0, &name, keep_old)
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
pub(crate) fn describe(doc: &mut Endpoints) {
    const TAG: &str = "principals";
    const ADMIN_ONLY: Refusal = ("403", "Only an administrator manages principals.");
    const NO_PRINCIPAL: Refusal = ("404", "There is no principal with this name.");
    let principal = doc.schema::<PrincipalOut>();
    let list = Operation::new("listPrincipals", TAG, "List the principals, in name order.")
        .query::<PageIn>()
        .answer(
            "200",
            "A page of principals. A `Link` header with rel=\"next\" points to the next page.",
            Some(doc.list_of::<PrincipalOut>()),
        )
        .header("200", "Link", link_header())
        .refusals(&[BAD_REQUEST, UNAUTHORIZED, ADMIN_ONLY]);
    let none = json!([]);
    doc.get("/principals", self::list, &none, list);
    let create = Operation::new(
        "createPrincipal",
        TAG,
        "Create a principal; it can call the API at once, on every hub sharing the store. \
         Unless `issueToken` is false, the answer holds its bearer token: the only time it is \
         shown.",
    )
    .body(doc.input::<NewPrincipal>())
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
    doc.post("/principals", self::create, &none, create);
    let name = json!([path_parameter("name", "The principal's name.")]);
    let read = Operation::new("getPrincipal", TAG, "Read a principal (never its token).")
        .answer("200", "The principal.", Some(principal.clone()))
        .refusals(&[UNAUTHORIZED, ADMIN_ONLY, NO_PRINCIPAL]);
    doc.get("/principals/{name}", self::get, &name, read);
    let change = doc.input::<PrincipalChange>();
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
    doc.patch("/principals/{name}", self::update, &name, update);
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
    doc.delete("/principals/{name}", self::delete, &name, delete);
    let token = Operation::new(
        "issuePrincipalToken",
        TAG,
        "Issue a new bearer token for a principal; the old one stops working at once, or with \
         `keepOld` when that time has passed (its clients move to the new token meanwhile). \
         The answer is the only time the token is shown.",
    )
    .query::<IssueTokenQuery>()
    .answer("200", "The new token.", Some(doc.schema::<TokenOut>()))
    .refusals(&[
        BAD_REQUEST,
        UNAUTHORIZED,
        ADMIN_ONLY,
        NO_PRINCIPAL,
        UNAVAILABLE,
    ]);
    doc.post("/principals/{name}/token", self::issue_token, &name, token);
}
