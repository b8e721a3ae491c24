//! `/v1/subscriptions`: create, list, read, replace and delete subscriptions.

use std::collections::HashMap;
use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use http::header::{ALLOW, LOCATION};
use http::{HeaderMap, HeaderValue, StatusCode};
use knooppunt_store::{Sink, Status, Subscription, SubscriptionState, now_ms};
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{Value, json};

use crate::auth::{Caller, Role};
use crate::document::{
    BAD_REQUEST, FORBIDDEN, NOT_FOUND, Operation, Refusal, UNAUTHORIZED, header, link_header,
    path_parameter,
};
use crate::endpoints::Endpoints;
use crate::ids::SubscriptionId;
use crate::input::{Body, Field, Params, Problems};
use crate::page::{Page, PageIn};
use crate::problem::{ApiError, InvalidParam};
use crate::request::RequestAudit;
use crate::subscription_body::{
    self, FilterBudgetOut, SubscriptionInput, SubscriptionOut, SubscriptionRequest, representation,
};
use crate::{BASE_PATH, JsonBody, base_url};
use knooppunt_services::app::AppState;

use knooppunt_services::{subscriptions, use_case};

pub(crate) const COLLECTION_ALLOW: &str = "GET, POST, OPTIONS";
pub(crate) const ITEM_ALLOW: &str = "GET, PUT, DELETE, OPTIONS";

pub(crate) use crate::problem::not_found;

/// A replacement may send back what it read: the secrets it could not see (a sink whose
/// query values or password read as `********`, header values of `********`) keep their
/// stored values.
fn keep_secrets(input: &mut SubscriptionInput, existing: &Subscription) -> Result<(), ApiError> {
    use knooppunt_delivery::{REDACTED, redact_sink};
    let mut problems = Vec::new();
    if let Some(sink) = &input.sink
        && sink.contains(REDACTED)
    {
        if *sink == redact_sink(&existing.sink) {
            input.sink = Some(existing.sink.clone());
        } else {
            // Only the stored sink, exactly as read, stands for itself; anything else with
            // the marker was never checked as an address the hub may deliver to.
            problems.push(InvalidParam::new(
                "sink",
                format!(
                    "`{REDACTED}` stands for the stored sink's hidden parts only when the sink is \
                     sent back exactly as read; send the whole new sink instead"
                ),
            ));
        }
    }
    let stored_headers = existing.protocol_settings.http().map(|http| &http.headers);
    let sent_headers = match &mut input.protocol_settings {
        knooppunt_store::ProtocolSettings::Http(http) => Some(&mut http.headers),
        knooppunt_store::ProtocolSettings::Mqtt(_)
        | knooppunt_store::ProtocolSettings::Nats(_)
        | knooppunt_store::ProtocolSettings::Amqp(_) => None,
    };
    for (name, value) in sent_headers.into_iter().flatten() {
        if value != REDACTED {
            continue;
        }
        match stored_headers.and_then(|headers| headers.get(name)) {
            Some(stored) => value.clone_from(stored),
            None => problems.push(InvalidParam::new(
                format!("protocolsettings.headers.{name}"),
                format!("`{REDACTED}` stands for a stored value, and this header has none: send its value"),
            )),
        }
    }
    if let Some(identity) = &mut input.client_certificate
        && identity.private_key == REDACTED
    {
        match &existing.client_certificate {
            Some(stored) if stored.certificate == identity.certificate => {
                identity.private_key.clone_from(&stored.private_key)
            }
            _ => problems.push(InvalidParam::new(
                "clientcertificate.privatekey",
                format!("`{REDACTED}` stands for the stored key of the same certificate, and there is none: send the key"),
            )),
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid(
            "the subscription has problems; see invalidParams",
            problems,
        ))
    }
}

fn read_body(state: &AppState, body: &Value) -> Result<SubscriptionInput, ApiError> {
    let rules = subscription_body::Rules {
        defaults: state.subscription_defaults(),
        allow_http_sinks: state.allow_http_sinks(),
        filter_limits: &state.filter_limits(),
    };
    subscription_body::read(body, rules).map_err(|problems| {
        let count = problems.len();
        ApiError::invalid(
            format!(
                "the subscription has {count} problem{}; see invalidParams",
                if count == 1 { "" } else { "s" }
            ),
            problems,
        )
    })
}

fn is_pull(input: &SubscriptionInput) -> bool {
    input.config.settings().transfer == knooppunt_store::Transfer::Pull
}

/// The sink the subscription gets: the one sent (a push subscription), or the hub's receive
/// URL of subscription `id` (a pull subscription, which may send back only that).
fn sink_of(
    state: &AppState,
    headers: &HeaderMap,
    id: &str,
    input: &SubscriptionInput,
) -> Result<Sink, ApiError> {
    let receive_path = format!("{BASE_PATH}/subscriptions/{id}/receive");
    match &input.sink {
        Some(sink) if !is_pull(input) => Ok(sink.clone()),
        Some(sink) if sink.ends_with(&receive_path) => Ok(sink.clone()),
        Some(_) => Err(ApiError::invalid(
            "the subscription has problems; see invalidParams",
            vec![InvalidParam::new(
                "sink",
                format!(
                    "a pull subscription has no sink of its own: leave `sink` out (the hub \
                     fills in its receive URL, ending in `{receive_path}`)"
                ),
            )],
        )),
        None => {
            Sink::parse(&format!("{}{receive_path}", base_url(state, headers))).map_err(|why| {
                ApiError::invalid(
                    "the hub's own URL is not usable as a sink; configure its public URL",
                    vec![InvalidParam::new("sink", why)],
                )
            })
        }
    }
}

pub(crate) fn visible(caller: &Caller, subscription: &Subscription) -> bool {
    subscriptions::visible_to(&caller.0, subscription)
}

/// A new subscription, pending until its sink consents.
fn build(
    id: String,
    owner: String,
    sink: Sink,
    input: SubscriptionInput,
    created_at: u64,
) -> Subscription {
    Subscription {
        id,
        owner,
        label: input.label,
        sink,
        source: input.source,
        types: input.types,
        filters: input.filters,
        protocol_settings: input.protocol_settings,
        sink_credential: input.sink_credential,
        client_certificate: input.client_certificate,
        config: input.config,
        created_at,
        updated_at: now_ms(),
        // The lifecycle decides: pending with a new token, or the current consent kept.
        status: Status::Pending { problem: None },
        validation_token: None,
        signing: None,
    }
}

/// The resource with its read-only delivery state.
pub(crate) fn resource(state: &AppState, subscription: &Subscription) -> SubscriptionOut {
    let mut body = representation(
        subscription,
        state.deliverer().last_delivery(&subscription.id),
    );
    if let Some(why) = state.subscriptions().suspension(subscription) {
        body.state = "suspended".into();
        body.suspended_reason = Some(why);
    }
    body.filter_budget = state
        .subscriptions()
        .over_budget(&subscription.id)
        .map(|over| FilterBudgetOut {
            exceeded: over.count,
            last_exceeded_time: knooppunt_event::timestamp::utc_timestamp(over.last_at),
            last_exceeded_budget: FilterBudgetOut::budget_name(over.last_exceeded).to_owned(),
        });
    body.approvals = state
        .approvals()
        .of_subscription(&subscription.id)
        .iter()
        .map(|g| crate::approvals::summary(state.catalog().get(&g.entry).as_deref(), g))
        .collect();
    body
}

/// A dry run of making the subscription a body describes, or of replacing `existing` with
/// it (its members, filters and limits, then [`use_case::subscriptions::dry_run`]: the caller's role
/// and type prefixes, its owner's quotas, its sink's address), with nothing stored or
/// sent: what the console checks as a form is typed, by the rules the save applies.
pub async fn check(
    state: &AppState,
    caller: &Caller,
    headers: &HeaderMap,
    body: &Value,
    existing: Option<&str>,
) -> Result<(), ApiError> {
    use_case::subscriptions::may_create(&caller.0)?;
    let (id, owner) = match existing {
        None => (uuid::Uuid::now_v7().to_string(), caller.0.name.clone()),
        Some(id) => match state.subscriptions().get(id) {
            Some(found) if visible(caller, &found) => (id.to_owned(), found.owner.clone()),
            _ => return Err(crate::problem::not_found(id)),
        },
    };
    let input = read_body(state, body)?;
    let criteria = input.criteria.clone();
    let sink = sink_of(state, headers, &id, &input)?;
    let subscription = build(id, owner, sink, input, now_ms());
    let new = use_case::subscriptions::New {
        subscription,
        criteria,
        consent: use_case::subscriptions::Consent::Agreed,
    };
    use_case::subscriptions::dry_run(state, &caller.0, &new).await?;
    Ok(())
}

/// `POST /v1/subscriptions`: the body read and turned into a subscription of the caller;
/// the rest is [`knooppunt_services::use_case::subscriptions::create`]'s, as for every surface.
pub(crate) async fn create(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    audit: RequestAudit,
    headers: HeaderMap,
    JsonBody(body): JsonBody,
) -> Result<Response, ApiError> {
    use_case::subscriptions::may_create(&caller.0)?;
    let input = read_body(&state, &body)?;
    if input
        .client_certificate
        .as_ref()
        .is_some_and(|identity| identity.private_key == knooppunt_delivery::REDACTED)
    {
        return Err(ApiError::invalid(
            "the subscription has problems; see invalidParams",
            vec![InvalidParam::new(
                "clientcertificate.privatekey",
                "a new subscription has no stored key: send the private key (PEM)",
            )],
        ));
    }
    let criteria = input.criteria.clone();
    let id = uuid::Uuid::now_v7().to_string();
    let sink = sink_of(&state, &headers, &id, &input)?;
    let subscription = build(id.clone(), caller.0.name.clone(), sink, input, now_ms());
    let callbacks = format!("{}{BASE_PATH}/subscriptions", base_url(&state, &headers));
    let new = use_case::subscriptions::New {
        subscription,
        criteria,
        consent: use_case::subscriptions::Consent::Ask {
            callbacks: &callbacks,
        },
    };
    let checked = use_case::subscriptions::check(&state, &caller.0, new).await?;
    let made = use_case::subscriptions::create(&state, &audit.of(&caller), checked).await?;
    let location = HeaderValue::try_from(format!("{BASE_PATH}/subscriptions/{id}"))
        .expect("ids are header-safe");
    let mut body = resource(&state, &made.now);
    // Nothing is pending for a subscription just made.
    body.backlog = Some(0);
    // The signing secret is shown in this answer only.
    body.signing_secret = made.stored.signing.as_ref().map(|s| s.current.clone());
    Ok((StatusCode::CREATED, [(LOCATION, location)], Json(body)).into_response())
}

/// The query of the list of subscriptions: whose, which, and the page.
#[derive(Debug, Default, serde::Deserialize, JsonSchema)]
pub(crate) struct SubscriptionsQuery {
    /// Only the subscriptions of this principal (an administrator may name any; others
    /// only themselves).
    #[serde(default)]
    #[schemars(length(min = 1))]
    owner: Field<String>,
    /// Only the subscriptions in this state (one whose owner is disabled, shown as
    /// `suspended`, is `active` here).
    #[serde(default)]
    #[schemars(extend("enum" = ["active", "pending", "disabled"]))]
    state: Field<String>,
    /// Only the subscriptions with this text (compared without case) in their id, owner,
    /// sink, label or one of their types.
    #[serde(default)]
    #[schemars(length(min = 1, max = 200))]
    search: Field<String>,
    #[serde(flatten)]
    page: PageIn,
}

/// A list of subscriptions asked for.
#[derive(Debug)]
pub(crate) struct SubscriptionsAsked {
    owner: Option<String>,
    state: Option<SubscriptionState>,
    search: Option<String>,
    page: Page,
}

impl SubscriptionsQuery {
    fn state_named(name: &str) -> Option<SubscriptionState> {
        match name {
            "active" => Some(SubscriptionState::Active),
            "pending" => Some(SubscriptionState::Pending),
            "disabled" => Some(SubscriptionState::Disabled),
            _ => None,
        }
    }
}

impl Body for SubscriptionsQuery {
    const NAME: &'static str = "query";
    type Representation = ();
    type Read = SubscriptionsAsked;

    fn read(self, problems: &mut Problems) -> Option<Self::Read> {
        let owner = self.owner.given().cloned();
        if owner.as_deref().is_some_and(str::is_empty) {
            problems.add("owner", "name a principal");
        }
        let state = self.state.given().and_then(|name| {
            let state = SubscriptionsQuery::state_named(name);
            if state.is_none() {
                problems.add("state", "must be active, pending or disabled");
            }
            state
        });
        let search = self.search.given().cloned();
        if search
            .as_deref()
            .is_some_and(|text| text.is_empty() || text.len() > 200)
        {
            problems.add("search", "must be a text of 1 to 200 bytes");
        }
        let page = self.page.read(problems);
        Some(SubscriptionsAsked {
            owner,
            state,
            search,
            page,
        })
    }
}

pub(crate) async fn list(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    query: Result<Params<SubscriptionsQuery>, ApiError>,
) -> Result<Response, ApiError> {
    // Who may list at all, before the query is read; whose subscriptions, once it is.
    use_case::subscriptions::list_scope(&caller.0, None)?;
    let Params(asked) = query?;
    let Page {
        size: page_size,
        cursor,
    } = asked.page;
    let (state_wanted, search) = (asked.state, asked.search);
    let asked = asked.owner.as_deref();
    let owner = use_case::subscriptions::list_scope(&caller.0, asked)?;
    let selection = knooppunt_services::registry::Selection {
        owner,
        state: state_wanted,
        search: search.as_deref(),
    };
    let (page, more) = state
        .subscriptions()
        .page(&selection, cursor.as_deref(), page_size);
    let backlogs: HashMap<String, u64> = state
        .queue_stats()
        .await?
        .into_iter()
        .map(|stats| (stats.subscription, stats.pending))
        .collect();
    let body: Vec<SubscriptionOut> = page
        .iter()
        .map(|s| SubscriptionOut {
            backlog: Some(backlogs.get(&s.id).copied().unwrap_or(0)),
            ..resource(&state, s)
        })
        .collect();
    let next = page.last().filter(|_| more).map(|last| last.id.as_str());
    // The next page keeps the selection.
    let kept: Vec<String> = [
        ("owner", asked),
        ("state", state_wanted.map(|s| s.as_str())),
        ("search", search.as_deref()),
    ]
    .into_iter()
    .filter_map(|(key, value)| {
        value.map(|value| {
            format!(
                "{key}={}",
                knooppunt_event::binding::percent::encode_component(value)
            )
        })
    })
    .collect();
    let path = if kept.is_empty() {
        "/subscriptions".to_owned()
    } else {
        format!("/subscriptions?{}", kept.join("&"))
    };
    Ok(crate::page::answer(body, &path, page_size, next))
}

pub(crate) async fn get(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    Path(id): Path<SubscriptionId>,
) -> Result<Response, ApiError> {
    caller.require(Role::Subscriber, "read subscriptions")?;
    match state.subscriptions().get(&id) {
        Some(subscription) if visible(&caller, &subscription) => {
            let backlog = state.queue_stats_of(&id).await?.map_or(0, |q| q.pending);
            Ok(Json(SubscriptionOut {
                backlog: Some(backlog),
                ..resource(&state, &subscription)
            })
            .into_response())
        }
        _ => Err(not_found(&id)),
    }
}

pub(crate) async fn replace(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    audit: RequestAudit,
    Path(id): Path<SubscriptionId>,
    headers: HeaderMap,
    JsonBody(body): JsonBody,
) -> Result<Response, ApiError> {
    use_case::subscriptions::may_change(&caller.0, "change subscriptions")?;
    let mut input = read_body(&state, &body)?;
    if input
        .id
        .as_deref()
        .is_some_and(|named| named != id.as_str())
    {
        return Err(ApiError::invalid(
            "the id in the body differs from the id in the path",
            vec![InvalidParam::new(
                "id",
                format!("must be `{id}` or left out"),
            )],
        ));
    }
    let callbacks = format!("{}{BASE_PATH}/subscriptions", base_url(&state, &headers));
    let sink = input.sink.clone().filter(|_| !is_pull(&input));
    let credential = input.sink_credential.clone();
    let change = use_case::subscriptions::Change {
        id: &id,
        sink: sink.as_ref().map(Sink::as_str),
        credential: credential.as_ref(),
        make: |existing: &Subscription| {
            keep_secrets(&mut input, existing)?;
            let criteria = input.criteria.clone();
            let owner = existing.owner.clone();
            let sink = sink_of(&state, &headers, &id, &input)?;
            let subscription = build(id.to_string(), owner, sink, input, existing.created_at);
            Ok::<_, ApiError>((subscription, criteria))
        },
        consent: use_case::subscriptions::Consent::Ask {
            callbacks: &callbacks,
        },
    };
    let replaced = use_case::subscriptions::replace(&state, &audit.of(&caller), &caller.0, change)
        .await?
        .ok_or_else(|| not_found(&id))?;
    let backlog = state.queue_stats_of(&id).await?.map_or(0, |q| q.pending);
    Ok(Json(SubscriptionOut {
        backlog: Some(backlog),
        ..resource(&state, &replaced)
    })
    .into_response())
}

pub(crate) async fn delete(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    audit: RequestAudit,
    Path(id): Path<SubscriptionId>,
) -> Result<Response, ApiError> {
    let view = |deleted: &Subscription| resource(&state, deleted);
    let body = use_case::subscriptions::delete(&state, &audit.of(&caller), &caller.0, &id, view)
        .await?
        .ok_or_else(|| not_found(&id))?;
    Ok(Json(body).into_response())
}

pub(crate) async fn options_collection(caller: Caller) -> Result<Response, ApiError> {
    caller.require(Role::Subscriber, "use the subscriptions API")?;
    Ok((
        StatusCode::OK,
        [(ALLOW, HeaderValue::from_static(COLLECTION_ALLOW))],
    )
        .into_response())
}

pub(crate) async fn options_item(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    Path(id): Path<SubscriptionId>,
) -> Result<Response, ApiError> {
    caller.require(Role::Subscriber, "use the subscriptions API")?;
    match state.subscriptions().get(&id) {
        Some(subscription) if visible(&caller, &subscription) => Ok((
            StatusCode::OK,
            [(ALLOW, HeaderValue::from_static(ITEM_ALLOW))],
        )
            .into_response()),
        _ => Err(not_found(&id)),
    }
}

/// `POST /v1/subscriptions/{id}/signing-secret`: a new secret for the subscription's
/// signed deliveries, shown in this answer only; the previous one keeps signing (both
/// signatures are sent) until `previousValidUntil`.
pub(crate) async fn rotate_signing_secret(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    audit: RequestAudit,
    Path(id): Path<SubscriptionId>,
) -> Result<Response, ApiError> {
    let (_, secret, until) =
        use_case::subscriptions::rotate_signing_secret(&state, &audit.of(&caller), &caller.0, &id)
            .await?;
    let until = until.map(knooppunt_event::timestamp::utc_timestamp);
    Ok(Json(SigningSecretOut {
        signing_secret: secret,
        previous_valid_until: until,
    })
    .into_response())
}

/// A new signing secret, shown once.
#[derive(Debug, Serialize, serde::Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "SigningSecret")]
pub struct SigningSecretOut {
    /// `whsec_` and the base64 of the key.
    #[serde(rename = "signingsecret")]
    #[schemars(regex(pattern = "^whsec_"))]
    pub signing_secret: String,
    /// Until when the previous secret signs too.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("format" = "date-time"))]
    pub previous_valid_until: Option<String>,
}

/// The hub's public signing keys (a JWK set).
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(rename = "SigningKeys")]
struct SigningKeysOut {
    keys: Vec<JwkOut>,
}

/// One public key as a JWK, and as Standard Webhooks writes it (`whpk`).
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "SigningKey")]
struct JwkOut {
    #[schemars(extend("enum" = ["OKP"]))]
    kty: &'static str,
    #[schemars(extend("enum" = ["Ed25519"]))]
    crv: &'static str,
    #[schemars(extend("enum" = ["EdDSA"]))]
    alg: &'static str,
    #[serde(rename = "use")]
    #[schemars(extend("enum" = ["sig"]))]
    usage: &'static str,
    kid: String,
    /// The public key, base64url.
    x: String,
    #[schemars(regex(pattern = "^whpk_"))]
    whpk: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("format" = "date-time"))]
    valid_until: Option<String>,
}

/// `GET /v1/signing-keys`: the hub's public keys for the `v1a` (Ed25519) signatures of its
/// deliveries, as a JWK set (with each key also as Standard Webhooks writes it, `whpk_`);
/// a previous key during a rotation says until when it signs. No token: they are public.
pub(crate) async fn signing_keys(State(state): State<Arc<AppState>>) -> Response {
    use base64::Engine;
    let keys = state
        .deliverer()
        .public_keys()
        .into_iter()
        .map(|key| JwkOut {
            kty: "OKP",
            crv: "Ed25519",
            alg: "EdDSA",
            usage: "sig",
            x: base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&key.key),
            whpk: format!(
                "whpk_{}",
                base64::engine::general_purpose::STANDARD.encode(&key.key)
            ),
            valid_until: key.until.map(|until| {
                let ms = until
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_millis() as u64);
                knooppunt_event::timestamp::utc_timestamp(ms)
            }),
            kid: key.kid,
        })
        .collect();
    Json(SigningKeysOut { keys }).into_response()
}

/// The subscriptions' operations.
pub(crate) fn describe(doc: &mut Endpoints) {
    const TAG: &str = "subscriptions";
    /// Creating or replacing a subscription: also refused past the principal's quotas.
    const FORBIDDEN_OR_QUOTA: Refusal = (
        "403",
        "The principal lacks the role or the type prefix needed, or the change would take it \
         past its quota of subscriptions or of filter bytes (the detail says which).",
    );
    const TOO_LARGE: Refusal = ("413", "The body is too large.");
    const NOT_JSON: Refusal = ("415", "The body is not application/json.");
    let subscription = doc.schema::<SubscriptionOut>();
    let request = doc.input_over::<SubscriptionRequest, SubscriptionOut>();
    let none = json!([]);
    let allow = |methods: &str| {
        let mut allow = header("The methods this resource supports.");
        allow["schema"]["example"] = json!(methods);
        allow
    };
    let options = |id: &str, methods: &str, refusals: &[Refusal]| {
        Operation::new(id, TAG, "Discover the methods this resource supports.")
            .answer("200", "The methods are in the `Allow` header.", None)
            .header("200", "Allow", allow(methods))
            .refusals(refusals)
    };
    let list = Operation::new(
        "listSubscriptions",
        TAG,
        "List the subscriptions visible to the principal (its own; all for an admin), in \
         creation order.",
    )
    .query::<SubscriptionsQuery>()
    .answer(
        "200",
        "A page of subscriptions. A `Link` header with rel=\"next\" points to the next page.",
        Some(doc.list_of::<SubscriptionOut>()),
    )
    .header("200", "Link", link_header())
    .refusals(&[BAD_REQUEST, UNAUTHORIZED, FORBIDDEN]);
    doc.get("/subscriptions", self::list, &none, list);
    let create = Operation::new(
        "createSubscription",
        TAG,
        "Create a subscription; the hub assigns the id and fills in the defaults.",
    )
    .body(request.clone())
    .answer("201", "Created.", Some(subscription.clone()))
    .header("201", "Location", header("The new subscription's URL."))
    .refusals(&[
        BAD_REQUEST,
        UNAUTHORIZED,
        FORBIDDEN_OR_QUOTA,
        TOO_LARGE,
        NOT_JSON,
    ]);
    doc.post("/subscriptions", self::create, &none, create);
    doc.options(
        "/subscriptions",
        self::options_collection,
        &none,
        options(
            "getSubscriptionsFeatures",
            COLLECTION_ALLOW,
            &[UNAUTHORIZED, FORBIDDEN],
        ),
    );
    let id = json!([path_parameter(
        "id",
        "The id the hub assigned to the subscription."
    )]);
    let read = Operation::new(
        "getSubscription",
        TAG,
        "Read a subscription (the sink credential is never returned).",
    )
    .answer("200", "The subscription.", Some(subscription.clone()))
    .refusals(&[BAD_REQUEST, UNAUTHORIZED, FORBIDDEN, NOT_FOUND]);
    doc.get("/subscriptions/{id}", self::get, &id, read);
    let replace = Operation::new(
        "updateSubscription",
        TAG,
        "Replace a subscription; an `id` in the body must equal the path's.",
    )
    .body(request)
    .answer(
        "200",
        "The subscription as stored.",
        Some(subscription.clone()),
    )
    .refusals(&[
        BAD_REQUEST,
        UNAUTHORIZED,
        FORBIDDEN_OR_QUOTA,
        NOT_FOUND,
        TOO_LARGE,
        NOT_JSON,
    ]);
    doc.put("/subscriptions/{id}", self::replace, &id, replace);
    let delete = Operation::new(
        "deleteSubscription",
        TAG,
        "Delete a subscription; returns it as it was.",
    )
    .answer("200", "Deleted.", Some(subscription))
    .refusals(&[BAD_REQUEST, UNAUTHORIZED, FORBIDDEN, NOT_FOUND]);
    doc.delete("/subscriptions/{id}", self::delete, &id, delete);
    doc.options(
        "/subscriptions/{id}",
        self::options_item,
        &id,
        options(
            "getSubscriptionFeatures",
            ITEM_ALLOW,
            &[UNAUTHORIZED, FORBIDDEN, NOT_FOUND],
        ),
    );
    describe_signing(doc);
}

/// The signing operations: rotating a subscription's secret, and the hub's public keys.
fn describe_signing(doc: &mut Endpoints) {
    let rotate = Operation::new(
        "rotateSigningSecret",
        "subscriptions",
        "Give the subscription a new secret for its signed deliveries (Standard Webhooks `v1`: \
         `webhook-id`, `webhook-timestamp` and `webhook-signature` on every delivery). The new \
         secret is in this answer only; the previous one keeps signing beside it (two \
         signatures) until `previousValidUntil`, so a sink can switch without losing a \
         delivery.",
    )
    .answer(
        "200",
        "The new secret, shown once.",
        Some(doc.schema::<SigningSecretOut>()),
    )
    .refusals(&[
        BAD_REQUEST,
        UNAUTHORIZED,
        ("403", "The caller may not change subscriptions."),
        NOT_FOUND,
        (
            "409",
            "The secret before the current one still signs (the overlap the last rotation \
             announced): rotate again after that.",
        ),
    ]);
    let id = json!([path_parameter(
        "id",
        "The id the hub assigned to the subscription."
    )]);
    doc.post(
        "/subscriptions/{id}/signing-secret",
        self::rotate_signing_secret,
        &id,
        rotate,
    );
    let keys = Operation::new(
        "listSigningKeys",
        "subscriptions",
        "The hub's public keys for the `v1a` (Ed25519) signatures of its deliveries (Standard \
         Webhooks), as a JWK set; each key also as `whpk_` and its base64. A previous key, \
         during a rotation, says until when it signs. Empty when the hub signs with \
         subscriptions' secrets (`v1`) only. No authentication.",
    )
    .public()
    .answer(
        "200",
        "The keys, the current one first.",
        Some(doc.schema::<SigningKeysOut>()),
    );
    doc.get("/signing-keys", self::signing_keys, &json!([]), keys);
}
