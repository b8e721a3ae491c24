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
    let mut described = Document::new();
    super::replays::describe(&mut described);
    super::dead_letters::describe(&mut described);
    super::status::describe(&mut described);
    super::consent::describe(&mut described);
    super::pull::describe(&mut described);
    super::stream::describe(&mut described);
    super::principals::describe(&mut described);
    super::catalog::describe(&mut described);
    super::approvals::describe(&mut described);
    super::audit::describe(&mut described);
    super::receipts::describe(&mut described);
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
