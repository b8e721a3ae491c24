//! The OpenAPI 3 document at `/v1/openapi.json`, built from the code: the config keys come
//! from `knooppunt_store::CONFIG_KEYS`, the dialects from `knooppunt_filter::DIALECTS`, the
//! allowed methods from the handlers. It lints clean with the ADR Spectral ruleset.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use http::HeaderValue;
use http::header::ACCESS_CONTROL_ALLOW_ORIGIN;
use knooppunt_filter::DIALECTS;
use knooppunt_store::{CONFIG_KEYS, ConfigDefaults};
use serde_json::{Map, Value, json};

use super::document::Document;
use super::subscriptions::{COLLECTION_ALLOW, ITEM_ALLOW};
use super::{API_VERSION, BASE_PATH};
use crate::app::AppState;

pub(crate) async fn serve(State(state): State<Arc<AppState>>) -> Response {
    let mut response = Json(document(&state.subscription_defaults)).into_response();
    response
        .headers_mut()
        .insert(ACCESS_CONTROL_ALLOW_ORIGIN, HeaderValue::from_static("*"));
    response
}

fn version_header() -> Value {
    json!({
        "description": "The full version of the API (ADR /core/version-header).",
        "schema": {"type": "string", "example": API_VERSION}
    })
}

fn headers(extra: &[(&str, Value)]) -> Value {
    let mut headers = Map::new();
    headers.insert("API-Version".into(), version_header());
    for (name, header) in extra {
        headers.insert((*name).into(), header.clone());
    }
    Value::Object(headers)
}

fn problem_schema() -> Value {
    json!({
        "type": "object",
        "description": "Problem details (RFC 9457).",
        "required": ["type", "title", "status", "detail"],
        "properties": {
            "type": {"type": "string", "description": "A URN naming the kind of problem.", "example": "urn:knooppunt:problem:invalid-input"},
            "title": {"type": "string", "example": "Invalid input"},
            "status": {"type": "integer", "format": "int32", "example": 400},
            "detail": {"type": "string", "example": "the subscription has 1 problem; see invalidParams"},
            "oldestCursor": {"type": "string", "description": "For 410 of the event stream: the oldest cursor from which nothing is missing."},
            "errors": {
                "type": "array",
                "description": "For invalid events: per event (`index` in the batch, null for a single event) \
                                the violations, each with its rule and the section of the specification.",
                "items": {
                    "type": "object",
                    "properties": {
                        "index": {"type": "integer", "format": "int32", "nullable": true},
                        "violations": {"type": "array", "items": violation_schema()}
                    }
                }
            },
            "invalidParams": {
                "type": "array",
                "description": "For invalid input: every problem found, by location.",
                "items": {
                    "type": "object",
                    "required": ["name", "reason"],
                    "properties": {
                        "name": {"type": "string", "example": "sink"},
                        "reason": {"type": "string", "example": "is required: the absolute http(s) URL to deliver to"}
                    }
                }
            }
        }
    })
}

fn violation_schema() -> Value {
    json!({
        "type": "object",
        "description": "One problem with one attribute of one event.",
        "properties": {
            "attribute": {"type": "string", "example": "time"},
            "rule": {"type": "string", "description": "A stable code such as `core.timestamp` or `nlgov.type.reverse-domain`.", "example": "core.timestamp"},
            "detail": {"type": "string"},
            "spec": {"type": "string", "description": "The document and section the rule comes from.", "example": "CloudEvents 1.0 spec.md §Type System"},
            "severity": {"type": "string", "enum": ["error", "warning"]}
        }
    })
}

fn batch_warning_schema() -> Value {
    let mut schema = violation_schema();
    schema["description"] = json!("One warning, and the events of the batch it concerns.");
    schema["required"] = json!(["rule", "detail", "events"]);
    schema["properties"]["events"] = json!({"type": "array", "items": {"type": "integer", "format": "int32", "minimum": 0}, "description": "The positions in the batch (from 0) of the events it concerns."});
    schema
}

fn receipt_schema() -> Value {
    json!({
        "type": "object",
        "description": "What the hub did with one published event.",
        "additionalProperties": false,
        "required": ["id", "source", "sequence", "duplicate", "matchedSubscriptions"],
        "properties": {
            "id": {"type": "string"},
            "source": {"type": "string"},
            "sequence": {"type": "integer", "format": "int64", "description": "The hub's acceptance sequence number (the original's, for a duplicate)."},
            "duplicate": {"type": "boolean", "description": "The same `source` and `id` were accepted within the duplicate window: acknowledged, not routed again."},
            "matchedSubscriptions": {"type": "integer", "format": "int32", "description": "How many subscriptions it was routed to."},
            "warnings": {"type": "array", "items": violation_schema(), "description": "SHOULD-level findings, and profile findings at level `warn`."},
            "deprecatedType": {"type": "boolean", "description": "Present (true) when the event type catalog deprecates its type: it was accepted all the same."}
        }
    })
}

/// A CloudEvent in the JSON format (json-format.md): the required attributes, the optional
/// ones with their types, and extensions as further members (String, Integer or Boolean).
fn cloud_event_schema() -> Value {
    let string = json!({"type": "string", "minLength": 1});
    // An optional attribute may be `null`, meaning unset (json-format.md 2.4): the hub
    // forwards it as the publisher sent it.
    let optional = json!({"type": "string", "minLength": 1, "nullable": true});
    json!({
        "type": "object",
        "description": "A CloudEvent in the JSON format. Members besides the ones listed are extension attributes: \
                        lower-case letters and digits, a string, integer or boolean value. An optional attribute may \
                        be `null` (unset), as the publisher sent it.",
        "required": ["specversion", "id", "source", "type"],
        "properties": {
            "specversion": {"type": "string", "enum": ["1.0"]},
            "id": string,
            "source": {"type": "string", "minLength": 1, "format": "uri-reference"},
            "type": string,
            "datacontenttype": optional,
            "dataschema": {"type": "string", "format": "uri", "nullable": true},
            "subject": optional,
            "time": {"type": "string", "format": "date-time", "nullable": true},
            "data": {"description": "The event data: any JSON value."},
            "data_base64": {"type": "string", "format": "byte"}
        },
        "additionalProperties": {"oneOf": [{"type": "string", "nullable": true}, {"type": "integer"}, {"type": "boolean"}]}
    })
}

/// The `ce-` headers of binary mode (http-protocol-binding.md 3.1.3): each attribute's
/// canonical string, percent-encoded.
fn binary_mode_headers() -> Value {
    let header = |name: &str, description: &str| {
        json!({"name": name, "in": "header", "required": false,
               "description": format!("Binary mode: {description} (percent-encoded; required in binary mode)."),
               "schema": {"type": "string", "minLength": 1}})
    };
    let optional = |name: &str, description: &str| {
        json!({"name": name, "in": "header", "required": false,
               "description": format!("Binary mode: {description} (percent-encoded). Any other `ce-<name>` header is an extension attribute."),
               "schema": {"type": "string", "minLength": 1}})
    };
    json!([
        header("ce-specversion", "`1.0`"),
        header("ce-id", "the event's `id`"),
        header("ce-source", "the event's `source`"),
        header("ce-type", "the event's `type`"),
        optional("ce-subject", "the event's `subject`"),
        optional("ce-time", "the event's `time`"),
        optional("ce-dataschema", "the event's `dataschema`")
    ])
}

fn publish_operation() -> Value {
    let mut extra = Map::new();
    extra.insert("parameters".into(), binary_mode_headers());
    extra.insert(
        "requestBody".into(),
        json!({
            "required": true,
            "description": "One event in structured mode (JSON or CBOR), a batch, or binary mode (the data as the body with \
                            `ce-` headers carrying the attributes, percent-encoded).",
            "content": {
                "application/cloudevents+json": {"schema": {"$ref": "#/components/schemas/CloudEvent"}},
                "application/cloudevents+cbor": {"schema": {"type": "string", "format": "binary", "description": "A CloudEvent in the CBOR event format: a map of attribute names to values (URIs tagged 32, timestamps tagged 0), the data as a byte string or a native value."}},
                "application/cloudevents-batch+json": {"schema": {"type": "array", "items": {"$ref": "#/components/schemas/CloudEvent"}}},
                "*/*": {"schema": {"type": "string", "format": "binary", "description": "Binary mode: the event data."}}
            }
        }),
    );
    let mut operation = operation(
        "publishEvents",
        "Publish events. 202 means every event and each of its deliveries is on disk.",
        (
            "202",
            json!({
                "description": "Accepted and durably stored (for a batch: all of it).",
                "headers": headers(&[("Deprecation", json!({"description": "`true` when the catalog deprecates the type of an event (RFC 9745); the receipt says which.", "schema": {"type": "string"}}))]),
                "content": {"application/json": {"schema": {"oneOf": [
                    receipt_schema(),
                    {"type": "object", "additionalProperties": false, "required": ["events"],
                     "description": "A batch: one receipt per event, in order (none for an empty batch).",
                     "properties": {
                         "events": {"type": "array", "items": receipt_schema(), "description": "One receipt per event, in the batch's order; in a batch their warnings are given once below."},
                         "warnings": {"type": "array", "description": "Each warning of the batch's events once, with the positions (from 0) of the events it concerns.", "items": batch_warning_schema()}
                     }}
                ]}}}
            }),
        ),
        &[
            (
                "400",
                "An event is invalid; every problem of every event is listed, and nothing was accepted.",
            ),
            UNAUTHORIZED,
            (
                "403",
                "The principal lacks the publisher role or publishes outside its source prefixes.",
            ),
            (
                "413",
                "An event (or the batch) is larger than the hub accepts.",
            ),
            (
                "415",
                "The content type is not a CloudEvents format or binary mode.",
            ),
            (
                "503",
                "Nothing was accepted: the hub holds all the undelivered data its operator \
                 allows, or its disk has less room than it keeps free for deliveries to drain \
                 (type `urn:knooppunt:problem:backlog-full`, the detail says which); or the store \
                 takes no writes now. Try again after Retry-After.",
            ),
        ],
        extra,
    );
    operation["tags"] = json!(["events"]);
    operation
}

fn problem(description: &str) -> Value {
    json!({
        "description": description,
        "headers": headers(&[]),
        "content": {"application/problem+json": {"schema": problem_schema()}}
    })
}

fn subscription_ref() -> Value {
    json!({"$ref": "#/components/schemas/Subscription"})
}

fn errors(responses: &mut Map<String, Value>, codes: &[(&str, &str)]) {
    for (code, description) in codes {
        responses.insert((*code).into(), problem(description));
    }
}

const UNAUTHORIZED: (&str, &str) = ("401", "No valid bearer token was sent.");
const FORBIDDEN: (&str, &str) = (
    "403",
    "The principal lacks the role or the type prefix needed.",
);
const UNAVAILABLE: (&str, &str) = (
    "503",
    "The store takes no writes now (closed, or its disk is full: it takes writes again by \
     itself once a test write succeeds), or an issuer's keys cannot be fetched; nothing was \
     kept. Try again after Retry-After, or at another hub.",
);
/// Creating or replacing a subscription: also refused past the principal's quotas.
const FORBIDDEN_OR_QUOTA: (&str, &str) = (
    "403",
    "The principal lacks the role or the type prefix needed, or the change would take it past \
     its quota of subscriptions or of filter bytes (the detail says which).",
);
const BAD_REQUEST: (&str, &str) = ("400", "The request is invalid; every problem is listed.");
const NOT_FOUND: (&str, &str) = ("404", "No such subscription is visible to the principal.");

/// `pageSize` and `cursor` of a list of `items`; `last` says what the cursor is.
fn page_parameters(items: &str, last: &str) -> Value {
    json!([
        {"name": "pageSize", "in": "query", "required": false,
         "description": format!("How many {items} per page (1 to 1000, default 100)."),
         "schema": {"type": "integer", "format": "int32", "minimum": 1, "maximum": 1000}},
        {"name": "cursor", "in": "query", "required": false,
         "description": format!("{last} of the previous page, as given in the `next` link; empty or left out for the first page."),
         "schema": {"type": "string"}}
    ])
}

fn operation(
    id: &str,
    summary: &str,
    ok: (&str, Value),
    error_codes: &[(&str, &str)],
    extra: Map<String, Value>,
) -> Value {
    let mut responses = Map::new();
    responses.insert(ok.0.into(), ok.1);
    errors(&mut responses, error_codes);
    let mut operation = Map::new();
    operation.insert("operationId".into(), json!(id));
    operation.insert("summary".into(), json!(summary));
    operation.insert("tags".into(), json!(["subscriptions"]));
    operation.insert("responses".into(), Value::Object(responses));
    operation.extend(extra);
    Value::Object(operation)
}

fn body_extra() -> Map<String, Value> {
    let mut extra = Map::new();
    extra.insert(
        "requestBody".into(),
        json!({"required": true, "content": {"application/json": {"schema": subscription_ref()}}}),
    );
    extra
}

/// The `config` keys, with this hub's defaults.
fn config_schema(defaults: &ConfigDefaults) -> Value {
    let properties: Map<String, Value> = CONFIG_KEYS
        .iter()
        .map(|key| {
            (
                key.name.to_owned(),
                json!({"type": "string", "default": defaults.get(key.name), "description": key.description}),
            )
        })
        .collect();
    json!({
        "type": "object",
        "description": "Delivery settings, every value a string. Unknown keys and bad values are refused \
                        with 400 naming the key; on read every default is filled in.",
        "additionalProperties": false,
        "properties": properties
    })
}

/// The `id` path parameter of a subscription's resources.
fn id_parameter() -> Value {
    json!([{
        "name": "id", "in": "path", "required": true,
        "description": "The id the hub assigned to the subscription.",
        "schema": {"type": "string"}
    }])
}

/// `/subscriptions` and `/subscriptions/{id}`.
fn subscription_paths(paths: &mut Map<String, Value>) {
    let id_parameter = id_parameter();
    let page_parameters = page_parameters("subscriptions", "The id of the last subscription");
    let allow = |value: &str| json!({"description": "The methods this resource supports.", "schema": {"type": "string", "example": value}});

    let mut list_extra = Map::new();
    list_extra.insert("parameters".into(), page_parameters);
    let list = operation(
        "listSubscriptions",
        "List the subscriptions visible to the principal (its own; all for an admin), in creation order.",
        (
            "200",
            json!({
                "description": "A page of subscriptions. A `Link` header with rel=\"next\" points to the next page.",
                "headers": headers(&[("Link", json!({"description": "RFC 8288 link to the next page, when there is one.", "schema": {"type": "string"}}))]),
                "content": {"application/json": {"schema": {"type": "array", "items": subscription_ref()}}}
            }),
        ),
        &[BAD_REQUEST, UNAUTHORIZED, FORBIDDEN],
        list_extra,
    );
    let create = operation(
        "createSubscription",
        "Create a subscription; the hub assigns the id and fills in the defaults.",
        (
            "201",
            json!({
                "description": "Created.",
                "headers": headers(&[("Location", json!({"description": "The new subscription's URL.", "schema": {"type": "string"}}))]),
                "content": {"application/json": {"schema": subscription_ref()}}
            }),
        ),
        &[
            BAD_REQUEST,
            UNAUTHORIZED,
            FORBIDDEN_OR_QUOTA,
            ("413", "The body is too large."),
            ("415", "The body is not application/json."),
        ],
        body_extra(),
    );
    let options = |id: &str, methods: &str, codes: &[(&str, &str)]| {
        operation(
            id,
            "Discover the methods this resource supports.",
            (
                "200",
                json!({"description": "The methods are in the `Allow` header.", "headers": headers(&[("Allow", allow(methods))])}),
            ),
            codes,
            Map::new(),
        )
    };
    let read = operation(
        "getSubscription",
        "Read a subscription (the sink credential is never returned).",
        (
            "200",
            json!({"description": "The subscription.", "headers": headers(&[]), "content": {"application/json": {"schema": subscription_ref()}}}),
        ),
        &[BAD_REQUEST, UNAUTHORIZED, FORBIDDEN, NOT_FOUND],
        Map::new(),
    );
    let replace = operation(
        "updateSubscription",
        "Replace a subscription; an `id` in the body must equal the path's.",
        (
            "200",
            json!({"description": "The subscription as stored.", "headers": headers(&[]), "content": {"application/json": {"schema": subscription_ref()}}}),
        ),
        &[
            BAD_REQUEST,
            UNAUTHORIZED,
            FORBIDDEN_OR_QUOTA,
            NOT_FOUND,
            ("413", "The body is too large."),
            ("415", "The body is not application/json."),
        ],
        body_extra(),
    );
    let delete = operation(
        "deleteSubscription",
        "Delete a subscription; returns it as it was.",
        (
            "200",
            json!({"description": "Deleted.", "headers": headers(&[]), "content": {"application/json": {"schema": subscription_ref()}}}),
        ),
        &[BAD_REQUEST, UNAUTHORIZED, FORBIDDEN, NOT_FOUND],
        Map::new(),
    );
    let added = json!({
    "/subscriptions": {
        "get": list,
        "post": create,
        "options": options("getSubscriptionsFeatures", COLLECTION_ALLOW, &[UNAUTHORIZED, FORBIDDEN])
    },
    "/subscriptions/{id}": {
        "parameters": id_parameter,
        "get": read,
        "put": replace,
        "delete": delete,
        "options": options("getSubscriptionFeatures", ITEM_ALLOW, &[UNAUTHORIZED, FORBIDDEN, NOT_FOUND])
    }
    });
    paths.extend(added.as_object().expect("an object").clone());
}

pub(crate) fn document(defaults: &ConfigDefaults) -> Value {
    let filter_description = format!(
        "One filter expression of the CloudEvents Subscriptions API: an object with exactly one \
         member naming its dialect ({}). `exact`, `prefix` and `suffix` map attribute names to \
         string values; `all` and `any` hold arrays of filters; `not` holds one filter; `sql` \
         holds a CESQL 1.0 expression.",
        DIALECTS.join(", ")
    );

    let mut document = json!({
        "openapi": "3.0.3",
        "info": {
            "title": "Knooppunt",
            "version": API_VERSION,
            "description": "Knooppunt is a CloudEvents 1.0 event hub following the NL GOV profile for CloudEvents. \
                            Subscribers register subscriptions (CloudEvents Subscriptions API); the hub delivers \
                            every matching event to their webhook. Every endpoint but this document needs a \
                            principal: `Authorization: Bearer <token>` with a token the hub issued, or with an \
                            access token (JWT) of an authorization server the hub trusts (OAuth NL GOV), or, on a \
                            hub serving HTTPS with client certificates, a PKIoverheid client certificate whose \
                            subject serialNumber is the OIN of a principal (mutual TLS; OpenAPI 3.0 has no scheme \
                            for it).",
            "contact": {"name": "Knooppunt maintainers", "email": "knooppunt@example.nl", "url": "https://example.nl/knooppunt"}
        },
        "servers": [{"url": BASE_PATH, "description": "This hub."}],
        "tags": [
            {"name": "events", "description": "Publishing events."},
            {"name": "subscriptions", "description": "Subscriptions: what to deliver where."},
            {"name": "dead letters", "description": "Deliveries the hub gave up on."},
            {"name": "pull", "description": "Pull subscriptions: receive events under a lock, then acknowledge, release, reject or renew."},
            {"name": "principals", "description": "Who may call the API (administrators)."},
            {"name": "event types", "description": "The catalog: what publishers say their events are."},
            {"name": "approvals", "description": "Which subscriptions a data owner lets receive its approval-required events."},
            {"name": "audit", "description": "The tamper-evident record of who changed what and who was refused."},
            {"name": "status", "description": "How deliveries fare: a subscription's backlog, breaker and latest attempts, test events, and the hub at a glance."},
            {"name": "api", "description": "This description of the API."}
        ],
        "security": [{"bearerAuth": []}, {"accessToken": []}],
        "paths": {
            "/events": {"post": publish_operation()},
            "/openapi.json": {
                "get": {
                    "operationId": "getOpenApi",
                    "summary": "This document. No authentication; CORS allows any origin.",
                    "tags": ["api"],
                    "security": [],
                    "responses": {
                        "200": {
                            "description": "The OpenAPI document.",
                            "headers": headers(&[("Access-Control-Allow-Origin", json!({"description": "Always `*`.", "schema": {"type": "string"}}))]),
                            "content": {"application/json": {"schema": {"type": "object"}}}
                        }
                    }
                }
            }
        },
        "components": {
            "securitySchemes": {
                "bearerAuth": {"type": "http", "scheme": "bearer", "description": "A token the hub issued to a principal (shown once when an administrator creates the principal or issues a new token; the hub keeps only its SHA-256), or one configured in the hub's file."},
                "accessToken": {"type": "http", "scheme": "bearer", "bearerFormat": "JWT", "description": "An access token (OAuth NL GOV profile) of an authorization server the hub trusts: signed RS256, PS256 or ES256 with a key of the issuer's JWKS, with the hub's audience, not expired. A claim names the principal (`sub` by default) and scopes give its roles (`knooppunt:publisher`, `knooppunt:subscriber`, `knooppunt:admin`, `knooppunt:metrics` by default)."}
            },
            "schemas": {
                "Subscription": {
                    "type": "object",
                    "description": "A subscription (CloudEvents Subscriptions API section 3.2.1).",
                    "required": ["id", "protocol"],
                    "properties": {
                        "id": {"type": "string", "readOnly": true, "description": "Assigned by the hub; ignored on create.", "example": "0193a5b2-7c1d-7e3f-8a9b-0c1d2e3f4a5b"},
                        "owner": {"type": "string", "readOnly": true, "description": "The principal that created the subscription."},
                        "sink": {"type": "string", "format": "uri", "description": "Required for a push subscription; a pull subscription (`config.delivery` `pull`) leaves it out and reads here the hub's receive URL of the subscription. Absolute https URL events are delivered to (the hub checks its certificate). A plain http URL is accepted only for a sink on the hub's own machine, or on a hub configured to allow it for testing. Its host must not be (or resolve to) a loopback, private, link-local or other reserved address unless the hub's operator allows that network; this is checked again on every connection. Query values and a password are write-only: they read as `********`, and a replacement that sends them back so keeps the stored ones.", "example": "https://gemeente.example.nl/events"},
                        "protocol": {"type": "string", "enum": ["HTTP"], "description": "The delivery protocol; only HTTP is delivered."},
                        "source": {"type": "string", "format": "uri-reference", "description": "Only events with exactly this `source`."},
                        "types": {"type": "array", "items": {"type": "string", "minLength": 1}, "description": "Only events whose `type` is one of these. Left out: any type; an empty list: no type (kept as sent)."},
                        "filters": {"type": "array", "items": {"$ref": "#/components/schemas/Filter"}, "description": "Filters that must all match."},
                        "protocolsettings": {"$ref": "#/components/schemas/HttpSettings"},
                        "sinkcredential": {"$ref": "#/components/schemas/SinkCredential"},
                        "clientcertificate": {"$ref": "#/components/schemas/ClientCertificate"},
                        "config": {"$ref": "#/components/schemas/Config"},
                        "state": {"type": "string", "readOnly": true, "enum": ["active", "pending", "disabled", "suspended"],
                                  "description": "`active`: deliveries flow. `pending`: the sink has not consented yet (validation \
                                                  handshake); matching events are queued, not delivered. `disabled`: the sink \
                                                  answered 410 Gone (nothing is delivered or queued, what was pending became dead letters), \
                                                  or the stored filters break the hub's limits (see disabledReason). `suspended`: its \
                                                  owner principal is disabled: nothing is routed to it, delivered, received or read \
                                                  until an admin enables the principal again (see suspendedReason)."},
                        "suspendedReason": {"type": "string", "readOnly": true,
                                            "description": "While suspended: why (its owner principal is disabled)."},
                        "validatedBy": {"type": "string", "readOnly": true, "enum": ["handshake", "callback", "agreement"],
                                        "description": "While active: how the sink's consent was established."},
                        "validationProblem": {"type": "string", "readOnly": true,
                                              "description": "While pending: why the handshake did not make it active."},
                        "disabledReason": {"type": "string", "readOnly": true,
                                           "description": "While disabled: why. The sink answered 410 Gone (replace the \
                                                           subscription with another sink), or its stored filters break the hub's \
                                                           filter limits (replacing it with filters within the limits brings it back, \
                                                           through the validation handshake)."},
                        "signingsecret": {"type": "string", "readOnly": true, "pattern": "^whsec_",
                                          "description": "The secret deliveries are signed with (Standard Webhooks `v1`: \
                                                          HMAC-SHA256 over `webhook-id.webhook-timestamp.body`), in the \
                                                          answer that creates the subscription only; rotate it with \
                                                          POST /subscriptions/{id}/signing-secret."},
                        "approvals": {
                            "type": "array", "readOnly": true,
                            "description": "Its approvals for approval-required event types its filters can match: \
                                            it receives their events only when `granted`.",
                            "items": approval_schema(false)
                        },
                        "filterBudget": {
                            "type": "object", "readOnly": true,
                            "description": "Present when the subscription's filters ran out of their evaluation budget on \
                                            some event since the hub started: that event was not routed to it. Simplify \
                                            the filters (fewer string functions over large attributes, prefixes instead \
                                            of LIKE) or ask the operator about filters.max_evaluation_cost.",
                            "required": ["exceeded", "lastExceededTime"],
                            "properties": {
                                "exceeded": {"type": "integer", "format": "int64", "description": "How many evaluations ran out of budget."},
                                "lastExceededTime": {"type": "string", "format": "date-time"}
                            }
                        },
                        "lastDelivery": {
                            "type": "object", "readOnly": true,
                            "description": "The last delivery attempt since the hub started.",
                            "properties": {
                                "time": {"type": "string", "format": "date-time"},
                                "sequence": {"type": "integer", "format": "int64", "description": "The event's sequence number."},
                                "outcome": {"type": "string", "enum": ["delivered", "retry", "deadLetter", "test"],
                                            "description": "`test`: a test delivery (`POST …/test`)."},
                                "statusCode": {"type": "integer", "format": "int32"},
                                "error": {"type": "string"}
                            }
                        }
                    }
                },
                "Filter": {
                    "type": "object",
                    "description": filter_description,
                    "minProperties": 1,
                    "maxProperties": 1,
                    "additionalProperties": true,
                    "example": {"prefix": {"type": "nl.brp."}}
                },
                "HttpSettings": {
                    "type": "object",
                    "description": "HTTP delivery settings.",
                    "additionalProperties": false,
                    "properties": {
                        "headers": {"type": "object", "additionalProperties": {"type": "string"}, "description": "Headers added to every delivery. Their values are write-only: they read as `********`, and a replacement that sends `********` back keeps the stored value."},
                        "method": {"type": "string", "enum": ["POST", "PUT", "PATCH"], "default": "POST"}
                    }
                },
                "SinkCredential": {
                    "description": "How the hub authenticates at the sink (Subscriptions API 3.2.3, and CLIENTCREDENTIALS). Write-only: never returned. \
                                    ACCESSTOKEN is sent as `Authorization: Bearer <accesstoken>` until `accesstokenexpiresutc`; after \
                                    it, nothing is sent and the events become dead letters saying so. PLAIN is sent as HTTP Basic. \
                                    REFRESHTOKEN is not supported.",
                    "oneOf": [
                        {
                            "type": "object",
                            "title": "ACCESSTOKEN",
                            "writeOnly": true,
                            "additionalProperties": false,
                            "required": ["credentialtype", "accesstoken", "accesstokentype", "accesstokenexpiresutc"],
                            "properties": {
                                "credentialtype": {"type": "string", "enum": ["ACCESSTOKEN"]},
                                "accesstoken": {"type": "string", "minLength": 1},
                                "accesstokentype": {"type": "string", "pattern": "^[Bb][Ee][Aa][Rr][Ee][Rr]$", "description": "`bearer` (any case): the token is sent as a bearer token (RFC 6750)."},
                                "accesstokenexpiresutc": {"type": "string", "format": "date-time", "description": "When the token expires; must be in the future."}
                            }
                        },
                        {
                            "type": "object",
                            "title": "CLIENTCREDENTIALS",
                            "writeOnly": true,
                            "additionalProperties": false,
                            "description": "OAuth 2.0 client credentials (RFC 6749 section 4.4): the hub fetches an access token from `tokenurl` \
                                            (HTTP Basic with the id and secret, presenting the subscription's client certificate if it has one), \
                                            keeps it until shortly before it expires, fetches a new one when the sink answers 401, and sends it \
                                            as `Authorization: Bearer`. `tokenurl` follows the rules of `sink` (https; the same address checks).",
                            "required": ["credentialtype", "tokenurl", "clientid", "clientsecret"],
                            "properties": {
                                "credentialtype": {"type": "string", "enum": ["CLIENTCREDENTIALS"]},
                                "tokenurl": {"type": "string", "format": "uri"},
                                "clientid": {"type": "string", "minLength": 1},
                                "clientsecret": {"type": "string", "minLength": 1},
                                "scope": {"type": "string", "minLength": 1, "description": "Space-separated scopes to ask for."}
                            }
                        },
                        {
                            "type": "object",
                            "title": "PLAIN",
                            "writeOnly": true,
                            "additionalProperties": false,
                            "required": ["credentialtype", "identifier", "secret"],
                            "properties": {
                                "credentialtype": {"type": "string", "enum": ["PLAIN"]},
                                "identifier": {"type": "string", "minLength": 1},
                                "secret": {"type": "string", "minLength": 1}
                            }
                        }
                    ]
                },
                "ClientCertificate": {
                    "type": "object",
                    "description": "The client certificate the hub presents to the sink (mutual TLS, e.g. PKIoverheid), in the handshake, \
                                    the deliveries and the token requests of CLIENTCREDENTIALS. Both PEM. `privatekey` is write-only: it \
                                    reads as `********`, and a replacement that sends `********` back with the same certificate keeps it.",
                    "additionalProperties": false,
                    "required": ["certificate", "privatekey"],
                    "properties": {
                        "certificate": {"type": "string", "description": "The certificate, then any intermediates (PEM).", "minLength": 1, "maxLength": 65536},
                        "privatekey": {"type": "string", "description": "Its private key (PEM, PKCS#8, PKCS#1 or SEC1).", "maxLength": 65536}
                    }
                },
                "Config": config_schema(defaults),
                "CloudEvent": cloud_event_schema(),
                "Problem": problem_schema()
            }
        }
    });
    let paths = document["paths"].as_object_mut().expect("paths");
    subscription_paths(paths);
    add_catalog(&mut document);
    let mut described = Document::new();
    super::replays::describe(&mut described);
    super::dead_letters::describe(&mut described);
    super::status::describe(&mut described);
    super::consent::describe(&mut described);
    super::pull::describe(&mut described);
    super::stream::describe(&mut described);
    super::principals::describe(&mut described);
    super::subscriptions::describe_signing(&mut described);
    described.finish(&mut document);
    add_boundary_answers(&mut document);
    document
}

/// What the hub's boundary may answer to any operation, before its handler runs: 503 when
/// the store takes no writes or an issuer's keys cannot be had (every operation that needs
/// a principal or the store), and for an operation that takes a body, 413 for a body larger
/// than any route takes (announced or sent) and 408 for one that does not arrive within
/// `server.body_timeout`.
fn add_boundary_answers(document: &mut Value) {
    const TOO_LARGE: &str = "The body is larger than this operation takes (or its \
                             `Content-Length` announces so); nothing was kept.";
    const TOO_SLOW: &str = "The body did not arrive within the hub's body timeout \
                            (`server.body_timeout`); nothing was kept.";
    let Some(paths) = document["paths"].as_object_mut() else {
        return;
    };
    for (path, item) in paths.iter_mut() {
        if path == "/openapi.json" || path == "/signing-keys" {
            continue;
        }
        let Some(item) = item.as_object_mut() else {
            continue;
        };
        for (method, operation) in item.iter_mut() {
            if method == "parameters" {
                continue;
            }
            let takes_body = operation.get("requestBody").is_some();
            let Some(responses) = operation["responses"].as_object_mut() else {
                continue;
            };
            let mut add = |code: &str, description: &str| {
                if !responses.contains_key(code) {
                    responses.insert(code.into(), problem(description));
                }
            };
            add(UNAVAILABLE.0, UNAVAILABLE.1);
            if takes_body {
                add("408", TOO_SLOW);
                add("413", TOO_LARGE);
            }
        }
    }
}

/// `/eventtypes`: the catalog's operations and schemas.
fn add_catalog(document: &mut Value) {
    let entry_ref = json!({"$ref": "#/components/schemas/EventType"});
    let not_owner: (&str, &str) = (
        "403",
        "Not a publisher that may publish the entry's source, or not the entry's owner (or an admin).",
    );
    let no_entry: (&str, &str) = ("404", "There is no catalog entry with this id.");
    let conflict: (&str, &str) = (
        "409",
        "Another entry covers exactly the same type and source.",
    );
    let tagged = |mut operation: Value| {
        operation["tags"] = json!(["event types"]);
        operation
    };
    let body = || {
        let mut extra = Map::new();
        extra.insert(
            "requestBody".into(),
            json!({"required": true, "content": {"application/json": {"schema": entry_ref.clone()}}}),
        );
        extra
    };
    let mut page = Map::new();
    page.insert(
        "parameters".into(),
        page_parameters("entries", "The id of the last entry"),
    );
    let list = tagged(operation(
        "listEventTypes",
        "List the catalog, oldest entry first. Any authenticated principal reads it.",
        (
            "200",
            json!({"description": "A page of entries. A `Link` header with rel=\"next\" points to the next page.",
                   "headers": headers(&[("Link", json!({"description": "RFC 8288 link to the next page, when there is one.", "schema": {"type": "string"}}))]),
                   "content": {"application/json": {"schema": {"type": "array", "items": entry_ref.clone()}}}}),
        ),
        &[BAD_REQUEST, UNAUTHORIZED],
        page,
    ));
    let created = |description: &str| {
        json!({"description": description,
               "headers": headers(&[("Location", json!({"description": "The new entry.", "schema": {"type": "string"}}))]),
               "content": {"application/json": {"schema": entry_ref.clone()}}})
    };
    let create = tagged(operation(
        "createEventType",
        "Describe events one publishes: a source prefix it may publish, a type (exact or a prefix), what \
         they are, and whether the owner must approve who receives them.",
        ("201", created("Created; the caller owns it.")),
        &[
            BAD_REQUEST,
            UNAUTHORIZED,
            not_owner,
            conflict,
            ("415", "The body is not application/json."),
            UNAVAILABLE,
        ],
        body(),
    ));
    let ok = |description: &str| {
        json!({"description": description, "headers": headers(&[]),
               "content": {"application/json": {"schema": entry_ref.clone()}}})
    };
    let read = tagged(operation(
        "getEventType",
        "Read a catalog entry.",
        ("200", ok("The entry.")),
        &[UNAUTHORIZED, no_entry],
        Map::new(),
    ));
    let replace = tagged(operation(
        "replaceEventType",
        "Replace a catalog entry (its owner or an admin).",
        ("200", ok("The entry as replaced.")),
        &[
            BAD_REQUEST,
            UNAUTHORIZED,
            not_owner,
            no_entry,
            conflict,
            ("415", "The body is not application/json."),
            UNAVAILABLE,
        ],
        body(),
    ));
    let delete = tagged(operation(
        "deleteEventType",
        "Delete a catalog entry (its owner or an admin).",
        (
            "204",
            json!({"description": "Deleted.", "headers": headers(&[])}),
        ),
        &[UNAUTHORIZED, not_owner, no_entry, UNAVAILABLE],
        Map::new(),
    ));
    let paths = document["paths"].as_object_mut().expect("paths");
    paths.insert("/eventtypes".into(), json!({"get": list, "post": create}));
    paths.insert(
        "/eventtypes/{id}".into(),
        json!({"parameters": [{"name": "id", "in": "path", "required": true,
                               "description": "The entry's id.", "schema": {"type": "string"}}],
               "get": read, "put": replace, "delete": delete}),
    );
    let text = |description: &str| json!({"type": "string", "minLength": 1, "maxLength": 2048, "description": description});
    let schema = json!({
        "type": "object",
        "description": "A catalog entry: events of a source prefix and a type, described by their publisher.",
        "required": ["source", "type", "description"],
        "properties": {
            "id": {"type": "string", "readOnly": true},
            "owner": {"type": "string", "readOnly": true, "description": "The principal that made it."},
            "source": text("The `source` prefix of the events it covers; one the owner may publish."),
            "type": text("The event type, or a prefix of types (`typeMatch`)."),
            "typeMatch": {"type": "string", "enum": ["exact", "prefix"], "default": "exact"},
            "description": text("What these events are."),
            "documentation": {"type": "string", "format": "uri", "maxLength": 2048,
                              "description": "A link to their documentation."},
            "dataschema": {"type": "string", "format": "uri", "maxLength": 2048,
                           "description": "The `dataschema` of their data."},
            "schema": {"oneOf": [{"type": "object"}, {"type": "boolean"}],
                       "description": "A JSON Schema (at most 64 KiB; an object, or `true` or `false` as JSON Schema allows) \
                       the events' data is checked against when they are published; nothing outside it is fetched, \
                       patterns use a linear-time engine."},
            "schemaCheck": {"type": "string", "enum": ["off", "warn", "enforce"],
                            "description": "`warn` (the default with a schema): accepted, with warnings in the receipt; \
                                            `enforce`: refused (400) with every problem; `off`."},
            "deprecated": {"type": "boolean", "default": false},
            "approval": {"type": "string", "enum": ["open", "approval-required"], "default": "open",
                         "description": "`approval-required`: only subscriptions the owner granted receive these \
                                         events; every subscription whose filters can match them gets a request \
                                         (see /approvals)."},
            "kenmerken": {"type": "array", "maxItems": 100,
                          "items": {"type": "string", "minLength": 1, "maxLength": 100},
                          "description": "The attributes subscribers may filter these events on (a ZGW kanaal's \
                                          `filters`)."},
            "created": {"type": "string", "format": "date-time", "readOnly": true},
            "updated": {"type": "string", "format": "date-time", "readOnly": true}
        }
    });
    document["components"]["schemas"]["EventType"] = schema;
    add_approvals(document);
    add_audit(document);
}

/// `/audit` and `/audit/verify`: the audit trail.
fn add_audit(document: &mut Value) {
    let tagged = |mut operation: Value| {
        operation["tags"] = json!(["audit"]);
        operation
    };
    let mut page = Map::new();
    let mut parameters = page_parameters("entries", "The sequence number of the last entry read");
    let items = parameters.as_array_mut().expect("parameters");
    for (name, description, format) in [
        (
            "from",
            "Only entries at or after this time (RFC 3339).",
            Some("date-time"),
        ),
        (
            "until",
            "Only entries before this time (RFC 3339).",
            Some("date-time"),
        ),
        (
            "name",
            "Only entries of this operation, or of every operation under it (`approval` for `approval.grant`, …).",
            None,
        ),
        ("actor", "Only entries of this principal's actions.", None),
        (
            "object",
            "Only entries about this object, or about objects under it (`subscription/<id>`).",
            None,
        ),
    ] {
        let mut schema = json!({"type": "string"});
        if let Some(format) = format {
            schema["format"] = json!(format);
        }
        items.push(json!({"name": name, "in": "query", "required": false,
                          "description": description, "schema": schema}));
    }
    page.insert("parameters".into(), parameters);
    let list = tagged(operation(
        "listAuditEntries",
        "Read the audit trail, oldest first: an admin all of it, others what they did and what concerns them \
         (their subscriptions, their event types). With `Accept: application/x-ndjson` the same page comes as JSON \
         lines in the trail's own field names (Logboek Dataverwerkingen: `trace_id`, `name`, `start_time`, \
         `status_code`, `processing_activity_id`, `data_subject_id`), as `knooppunt audit verify --file` checks them. \
         A page may come back short, with a link to go on: one request reads at most 20,000 entries.",
        (
            "200",
            json!({"description": "A page of entries. A `Link` header with rel=\"next\" points to the next page.",
            "headers": headers(&[("Link", json!({"description": "RFC 8288 link to the next page, when there may be one.", "schema": {"type": "string"}}))]),
            "content": {
                "application/json": {"schema": {"type": "array", "items": {"$ref": "#/components/schemas/AuditEntry"}}},
                "application/x-ndjson": {"schema": {"type": "string", "description": "One entry per line."}}
            }}),
        ),
        &[BAD_REQUEST, UNAUTHORIZED],
        page,
    ));
    let mut head_parameter = Map::new();
    head_parameter.insert(
        "parameters".into(),
        json!([{"name": "head", "in": "query", "required": false,
                "description": "A head kept outside the store, `<sequence>:<hash>` (as `GET /audit/head` and the hub's log \
                                give it): the trail must still hold that entry, unchanged, so that entries removed from \
                                its end show.",
                "schema": {"type": "string", "pattern": "^[0-9]+:[0-9a-fA-F]{64}$"}}]),
    );
    let verify = tagged(operation(
        "verifyAuditTrail",
        "Check the whole chain (admins): every entry's hash, that each names the hash of the one before, and, with \
         `head`, that no entry was removed from its end.",
        (
            "200",
            json!({"description": "The outcome; `intact: false` names the first broken entry, or says the trail was truncated.",
                   "headers": headers(&[]),
                   "content": {"application/json": {"schema": {"$ref": "#/components/schemas/AuditVerification"}}}}),
        ),
        &[
            BAD_REQUEST,
            UNAUTHORIZED,
            ("403", "Only an administrator verifies the trail."),
        ],
        head_parameter,
    ));
    let head = tagged(operation(
        "getAuditHead",
        "The chain's head (admins): the newest entry's sequence number and hash, signed with the hub's Ed25519 key \
         when it has one (verify with `GET /signing-keys`). Keep it elsewhere; `GET /audit/verify?head=` shows later \
         whether entries were removed from the trail's end.",
        (
            "200",
            json!({"description": "The head.", "headers": headers(&[]),
            "content": {"application/json": {"schema": {
                "type": "object", "required": ["sequence", "hash"],
                "properties": {
                    "sequence": {"type": "integer", "format": "int64", "description": "The newest entry's number (0: none yet)."},
                    "hash": {"type": "string", "description": "Its hash."},
                    "head": {"type": "string", "description": "`<sequence>:<hash>`, as `verify?head=` takes it."},
                    "signature": {"type": "object", "required": ["alg", "kid", "signed", "value"],
                        "description": "The hub's Ed25519 signature of `signed`.",
                        "properties": {
                            "alg": {"type": "string", "enum": ["EdDSA"]},
                            "kid": {"type": "string"},
                            "signed": {"type": "string", "description": "`knooppunt-audit-head:<sequence>:<hash>`."},
                            "value": {"type": "string", "description": "The signature, base64url without padding."}
                        }}
                }}}}}),
        ),
        &[
            UNAUTHORIZED,
            ("403", "Only an administrator reads the head."),
        ],
        Map::new(),
    ));
    let receipt_item = json!({
        "type": "object",
        "required": ["subscription", "deliveredTime"],
        "properties": {
            "subscription": {"type": "string"},
            "subscriber": {"type": "string", "nullable": true, "description": "The subscription's owner (also once the subscription is deleted)."},
            "deliveredTime": {"type": "string", "format": "date-time"}
        }
    });
    let of_event = tagged(operation(
        "listEventReceipts",
        "Who received an event (by the `sequence` its publish answer gave): an admin, the owner of a catalog \
         entry covering it and the organisation in whose source space it is (its publisher) see every \
         subscription that took it and when; a subscriber that received it only its own; anyone else gets 404, \
         as for an event that does not exist.",
        (
            "200",
            json!({"description": "The event's receipts.", "headers": headers(&[]),
            "content": {"application/json": {"schema": {
                "type": "object", "required": ["sequence", "receipts"],
                "properties": {
                    "sequence": {"type": "integer", "format": "int64"},
                    "source": {"type": "string", "description": "While the event is retained."},
                    "id": {"type": "string"},
                    "type": {"type": "string"},
                    "receipts": {"type": "array", "items": receipt_item}
                }}}}}),
        ),
        &[
            BAD_REQUEST,
            UNAUTHORIZED,
            (
                "404",
                "No such event whose receipts the principal may read.",
            ),
        ],
        Map::new(),
    ));
    let mut page = Map::new();
    page.insert(
        "parameters".into(),
        page_parameters(
            "receipts",
            "The sequence number of the last event of the previous page",
        ),
    );
    let of_subscription = tagged(operation(
        "listSubscriptionReceipts",
        "What a subscription received: the events its sink took (2xx), in the order they were delivered.",
        (
            "200",
            json!({"description": "A page of receipts. A `Link` header with rel=\"next\" points to the next page.",
            "headers": headers(&[("Link", json!({"description": "RFC 8288 link to the next page, when there is one.", "schema": {"type": "string"}}))]),
            "content": {"application/json": {"schema": {"type": "array", "items": {
                "type": "object", "required": ["sequence", "deliveredTime"],
                "properties": {
                    "sequence": {"type": "integer", "format": "int64"},
                    "deliveredTime": {"type": "string", "format": "date-time"},
                    "source": {"type": "string", "description": "While the event is retained."},
                    "id": {"type": "string"},
                    "type": {"type": "string"}
                }}}}}}),
        ),
        &[BAD_REQUEST, UNAUTHORIZED, NOT_FOUND],
        page,
    ));
    let paths = document["paths"].as_object_mut().expect("paths");
    paths.insert(
        "/events/{sequence}/receipts".into(),
        json!({"parameters": [{"name": "sequence", "in": "path", "required": true,
                               "description": "The sequence number the hub gave the event.",
                               "schema": {"type": "integer", "format": "int64"}}],
               "get": of_event}),
    );
    paths.insert(
        "/subscriptions/{id}/receipts".into(),
        json!({"parameters": [{"name": "id", "in": "path", "required": true,
                               "description": "The subscription's id.", "schema": {"type": "string"}}],
               "get": of_subscription}),
    );
    paths.insert("/audit".into(), json!({"get": list}));
    paths.insert("/audit/verify".into(), json!({"get": verify}));
    paths.insert("/audit/head".into(), json!({"get": head}));
    let schemas = document["components"]["schemas"]
        .as_object_mut()
        .expect("schemas");
    let text =
        |description: &str| json!({"type": "string", "nullable": true, "description": description});
    let names: Vec<&str> = crate::audit::ActionName::ALL
        .iter()
        .map(|name| name.as_str())
        .collect();
    schemas.insert(
        "AuditEntry".into(),
        json!({
            "type": "object",
            "description": "One entry of the audit trail.",
            "required": ["sequence", "startTime", "name", "statusCode", "details", "concerns", "prevHash", "hash"],
            "properties": {
                "sequence": {"type": "integer", "format": "int64"},
                "startTime": {"type": "string", "format": "date-time"},
                "name": {"type": "string", "enum": names, "description": "The operation: `<resource>.<verb>`."},
                "statusCode": {"type": "string", "enum": ["OK", "ERROR"], "description": "`ERROR` for a refused request."},
                "actor": text("The principal that acted (`knooppunt`: the hub itself)."),
                "actorOin": text("The actor's OIN."),
                "object": text("What it acted on, e.g. `subscription/<id>`."),
                "requestId": text("The request's `X-Request-Id`."),
                "traceId": text("The trace id of the request's `traceparent`."),
                "processingActivityId": text("The kind of processing (Logboek Dataverwerkingen)."),
                "dataSubjectId": text("Whom the data is about, when known."),
                "details": {"type": "object", "description": "What changed, or why it was refused; never a secret."},
                "concerns": {"type": "array", "items": {"type": "string"}, "description": "The principals it concerns besides the actor."},
                "prevHash": {"type": "string", "description": "The hash of the entry before it."},
                "hash": {"type": "string", "description": "SHA-256 over prevHash, the sequence number and the entry."}
            }
        }),
    );
    schemas.insert(
        "AuditVerification".into(),
        json!({
            "type": "object",
            "required": ["intact", "entries"],
            "properties": {
                "intact": {"type": "boolean"},
                "entries": {"type": "integer", "format": "int64", "description": "Entries checked."},
                "first": {"type": "integer", "format": "int64", "nullable": true,
                          "description": "The oldest entry kept (older ones were removed by retention)."},
                "last": {"type": "integer", "format": "int64", "nullable": true},
                "brokenAt": {"type": "integer", "format": "int64", "description": "The first broken entry."},
                "truncated": {"type": "boolean", "description": "The head given is missing or replaced: entries were removed."},
                "why": {"type": "string"}
            }
        }),
    );
}

/// `/approvals` and `/eventtypes/{id}/approvals/{subscription}`: the owners' decisions.
fn add_approvals(document: &mut Value) {
    let approval_ref = json!({"$ref": "#/components/schemas/Approval"});
    let tagged = |mut operation: Value| {
        operation["tags"] = json!(["approvals"]);
        operation
    };
    let no_grant: (&str, &str) = (
        "404",
        "No approval of this event type for this subscription is visible to the principal.",
    );
    let mut page = Map::new();
    let mut parameters = page_parameters(
        "approvals",
        "The event type and subscription of the last approval",
    );
    let items = parameters.as_array_mut().expect("parameters");
    items.push(json!({"name": "state", "in": "query", "required": false,
                      "description": "Only approvals in this state.",
                      "schema": {"type": "string", "enum": ["requested", "granted", "refused", "revoked"]}}));
    items.push(json!({"name": "eventtype", "in": "query", "required": false,
                      "description": "Only approvals of this catalog entry.", "schema": {"type": "string"}}));
    items.push(json!({"name": "subscription", "in": "query", "required": false,
                      "description": "Only approvals of this subscription.", "schema": {"type": "string"}}));
    page.insert("parameters".into(), parameters);
    let list = tagged(operation(
        "listApprovals",
        "List the approvals the principal may see: an admin all, a data owner those of its event types, a \
         subscriber those of its subscriptions; by event type, then subscription.",
        (
            "200",
            json!({"description": "A page of approvals. A `Link` header with rel=\"next\" points to the next page.",
                   "headers": headers(&[("Link", json!({"description": "RFC 8288 link to the next page, when there is one.", "schema": {"type": "string"}}))]),
                   "content": {"application/json": {"schema": {"type": "array", "items": approval_ref.clone()}}}}),
        ),
        &[BAD_REQUEST, UNAUTHORIZED],
        page,
    ));
    let ok = |description: &str| {
        json!({"description": description, "headers": headers(&[]),
               "content": {"application/json": {"schema": approval_ref.clone()}}})
    };
    let read = tagged(operation(
        "getApproval",
        "Read the approval of an event type for a subscription.",
        ("200", ok("The approval.")),
        &[UNAUTHORIZED, no_grant],
        Map::new(),
    ));
    let mut body = Map::new();
    body.insert(
        "requestBody".into(),
        json!({"required": true, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ApprovalDecision"}}}}),
    );
    let decide = tagged(operation(
        "decideApproval",
        "Grant, refuse or revoke a subscription's approval (the event type's owner or an admin; never the \
         subscription's own owner). A revocation turns the queued deliveries of the event type's events into \
         dead letters (\"approval revoked\") before it answers.",
        ("200", ok("The approval as decided.")),
        &[
            BAD_REQUEST,
            UNAUTHORIZED,
            (
                "403",
                "Not the event type's owner or an admin, or the subscription's own owner.",
            ),
            no_grant,
            (
                "409",
                "The decision does not follow the approval's state (refuse a request, revoke a grant).",
            ),
            ("415", "The body is not application/json."),
            UNAVAILABLE,
        ],
        body,
    ));
    let paths = document["paths"].as_object_mut().expect("paths");
    paths.insert("/approvals".into(), json!({"get": list}));
    paths.insert(
        "/eventtypes/{id}/approvals/{subscription}".into(),
        json!({"parameters": [
                   {"name": "id", "in": "path", "required": true,
                    "description": "The event type's (catalog entry's) id.", "schema": {"type": "string"}},
                   {"name": "subscription", "in": "path", "required": true,
                    "description": "The subscription's id.", "schema": {"type": "string"}}],
               "get": read, "put": decide}),
    );
    let schemas = document["components"]["schemas"]
        .as_object_mut()
        .expect("schemas");
    schemas.insert("Approval".into(), approval_schema(true));
    schemas.insert(
        "ApprovalDecision".into(),
        json!({
            "type": "object",
            "description": "An owner's decision.",
            "required": ["state"],
            "properties": {
                "state": {"type": "string", "enum": ["granted", "refused", "revoked"],
                          "description": "`granted` (from any other state), `refused` (a request), `revoked` (a grant)."},
                "reason": {"type": "string", "maxLength": 1000,
                           "description": "Why; required to refuse or revoke. The subscriber sees it."}
            }
        }),
    );
}

/// An approval as `/approvals` shows it (`full`) or as its subscription does.
fn approval_schema(full: bool) -> Value {
    let mut schema = json!({
        "type": "object",
        "description": "A subscription's approval for an approval-required event type: only a `granted` one \
                        receives the event type's events.",
        "required": ["eventtype", "state", "requested"],
        "properties": {
            "eventtype": {"type": "string", "description": "The catalog entry's id."},
            "state": {"type": "string", "enum": ["requested", "granted", "refused", "revoked"]},
            "requested": {"type": "string", "format": "date-time"},
            "type": {"type": "string", "description": "The entry's type (or type prefix)."},
            "source": {"type": "string", "description": "The entry's source prefix."},
            "owner": {"type": "string", "description": "The data owner: the principal that decides."},
            "decidedBy": {"type": "string", "description": "Who decided (`knooppunt` for the owner's own subscription)."},
            "decided": {"type": "string", "format": "date-time"},
            "reason": {"type": "string"}
        }
    });
    if full {
        let properties = schema["properties"].as_object_mut().expect("properties");
        properties.insert("subscription".into(), json!({"type": "string"}));
        properties.insert(
            "subscriber".into(),
            json!({"type": "string", "description": "The subscription's owner."}),
        );
        schema["required"] = json!(["eventtype", "subscription", "state", "requested"]);
    }
    schema
}
