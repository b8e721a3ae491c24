//! The form that creates or edits a subscription: its fields (a name, push or pull, the
//! sink, types, source, a CESQL filter and other filters, the delivery settings as fields),
//! checked by the API's own rules as it is typed, and the page that shows a new signing
//! secret once.

use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Response};
use http::{Method, StatusCode};
use maud::{Markup, html};
use serde::Deserialize;
use serde_json::Value;

use crate::forms::{Fields, Posted, Problem, encode};
use crate::layout::{self, Section, csrf, page, respond};
use crate::{Answer, BASE, Console, Lang, Visitor, redirect};
use knooppunt_api::auth::Caller;
use knooppunt_api::{Field, FilterIn, Strings, SubscriptionOut, SubscriptionRequest};

type Params = Query<std::collections::HashMap<String, String>>;
/// The subscription a form describes, on top of `base` (the stored one, when editing: what
/// the form does not show is kept, secrets included, which the API keeps when sent back
/// redacted), as the API's own request type: the representation's read-only members are
/// not part of it.
fn body_of(fields: &Fields, base: Option<&Value>, lang: Lang) -> Result<Value, Problem> {
    let mut request = match base {
        Some(stored) => SubscriptionRequest::deserialize(stored).unwrap_or_default(),
        None => SubscriptionRequest::default(),
    };
    request.id = Field::Absent;
    let pull = fields.get("delivery") == "pull";
    request.label = crate::forms::field(fields.get("label"));
    request.sink = match fields.get("sink") {
        "" => Field::Absent,
        sink => Field::Given(sink.to_owned()),
    };
    // A broker's endpoint (mqtt://, mqtts://, nats://, tls://) is a subscription of its
    // protocol (MQTT 5 for MQTT, or the MQTT3 it was), published to the topic or subject of
    // the form's one field; the other settings, when editing, are kept. Which protocol a
    // scheme names is the store's rule (`Sink::is_for`, `Sink::protocol`), not the form's.
    use knooppunt_store::Protocol;
    let sink = knooppunt_store::Sink::parse(fields.get("sink")).ok();
    let stored = match &request.protocol {
        Field::Given(name) => Protocol::parse(name),
        _ => None,
    };
    let protocol = match (&sink, stored) {
        (Some(sink), Some(stored)) if sink.is_for(stored) => stored,
        (Some(sink), _) => sink.protocol(),
        (None, _) => Protocol::Http,
    };
    let broker = protocol != Protocol::Http;
    if base.is_none() || broker {
        request.protocol = Field::Given(protocol.as_str().into());
    }
    if broker {
        let mut settings = match std::mem::take(&mut request.protocolsettings) {
            Field::Given(settings)
                if match protocol {
                    Protocol::Nats => settings.subject.is_sent(),
                    Protocol::Amqp => true,
                    _ => settings.topicname.is_sent(),
                } =>
            {
                settings
            }
            _ => knooppunt_api::ProtocolSettingsIn::default(),
        };
        let topic = match fields.get("topic").trim() {
            "" => Field::Absent,
            topic => Field::Given(topic.to_owned()),
        };
        match protocol {
            Protocol::Nats => settings.subject = topic,
            // AMQP's target address may be the endpoint's path instead.
            Protocol::Amqp => settings.address = topic,
            _ => settings.topicname = topic,
        }
        request.protocolsettings = Field::Given(settings);
    }
    let types: Vec<Field<String>> = fields
        .get("types")
        .split([',', '\n'])
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(|t| Field::Given(t.to_owned()))
        .collect();
    request.types = if types.is_empty() {
        Field::Absent
    } else {
        Field::Given(types)
    };
    request.source = match fields.get("source") {
        "" => Field::Absent,
        source => Field::Given(source.to_owned()),
    };
    // The CESQL field's expression, after the filters of the JSON box (all must match).
    let mut filters = match fields.get("filters").trim() {
        "" => Vec::new(),
        text => match serde_json::from_str::<Value>(text) {
            Ok(Value::Array(filters)) => filters,
            Ok(_) => {
                return Err(Problem {
                    code: None,
                    detail: lang
                        .t(
                            "De andere filters moeten een JSON-lijst zijn: [ … ].",
                            "The other filters must be a JSON list: [ … ].",
                        )
                        .into(),
                    params: vec![("filters".into(), "not a list".into())],
                });
            }
            Err(e) => {
                return Err(Problem {
                    code: None,
                    detail: lang
                        .t(
                            "De andere filters zijn geen geldige JSON.",
                            "The other filters are not valid JSON.",
                        )
                        .into(),
                    params: vec![("filters".into(), e.to_string())],
                });
            }
        },
    };
    match fields.get("sql").trim() {
        "" => {}
        sql => filters.push(
            serde_json::to_value(FilterIn::Sql(sql.to_owned())).expect("a filter serializes"),
        ),
    }
    request.filters = if filters.is_empty() {
        Field::Absent
    } else {
        Field::Given(filters)
    };
    // The stored settings (when editing), each field's value over them: an empty field is
    // the hub's default.
    let mut config = match std::mem::take(&mut request.config) {
        Field::Given(config) => config,
        _ => Strings::new(),
    };
    for setting in &SETTINGS {
        match fields.get(&format!("config.{}", setting.key)).trim() {
            "" => config.remove(setting.key),
            value => config.insert(setting.key.into(), Field::Given(value.to_owned())),
        };
    }
    if pull {
        config.insert(DELIVERY.into(), Field::Given("pull".into()));
        request.protocolsettings = Field::Absent;
    } else {
        config.remove(DELIVERY);
    }
    request.config = Field::Given(config);
    Ok(serde_json::to_value(&request).expect("a subscription request serializes"))
}

/// The `config` key of push or pull delivery.
const DELIVERY: &str = "delivery";

/// A delivery setting (a `config` key but `delivery`) as the form shows it: its label and
/// help in both languages, and its choices when it has a few (value, Dutch, English).
pub(crate) struct Setting {
    pub(crate) key: &'static str,
    pub(crate) label: (&'static str, &'static str),
    pub(crate) help: (&'static str, &'static str),
    pub(crate) choices: &'static [(&'static str, &'static str, &'static str)],
}

/// The settings, in the order the form shows them (`knooppunt_store::CONFIG_KEYS` holds
/// their defaults and the API's own description).
pub(crate) const SETTINGS: [Setting; 8] = [
    Setting {
        key: "mode",
        label: ("Vorm van de bezorging", "Form of delivery"),
        help: (
            "Hoe de gebeurtenis bij uw eindpunt aankomt.",
            "How the event arrives at your endpoint.",
        ),
        choices: &[
            (
                "structured",
                "gestructureerd: de gebeurtenis als application/cloudevents+json",
                "structured: the event as application/cloudevents+json",
            ),
            (
                "binary",
                "binair: ce-headers, de gegevens als body",
                "binary: ce- headers, the data as the body",
            ),
            (
                "cbor",
                "CBOR: application/cloudevents+cbor",
                "CBOR: application/cloudevents+cbor",
            ),
            (
                "notificatie",
                "notificatie: zoals een ZGW Notificaties-callback",
                "notificatie: as a ZGW Notificaties callback",
            ),
            (
                "zgw-cloudevent",
                "ZGW-CloudEvent: zoals Open Notificaties ze maakt",
                "ZGW CloudEvent: as Open Notificaties makes them",
            ),
        ],
    },
    Setting {
        key: "ordering",
        label: ("Volgorde", "Order"),
        help: (
            "Op volgorde: één bezorging tegelijk; een mislukte houdt de volgende tegen (alleen voor dit abonnement).",
            "In order: one delivery at a time; a failing one holds back the next (for this subscription only).",
        ),
        choices: &[
            ("ordered", "op volgorde", "in order"),
            (
                "unordered",
                "zonder volgorde, meer tegelijk",
                "unordered, several at once",
            ),
        ],
    },
    Setting {
        key: "maxAttempts",
        label: ("Pogingen per gebeurtenis", "Attempts per event"),
        help: (
            "1 tot 1000; daarna wordt de gebeurtenis een dode brief.",
            "1 to 1000; then the event becomes a dead letter.",
        ),
        choices: &[],
    },
    Setting {
        key: "ttl",
        label: ("Levensduur", "Time to live"),
        help: (
            "Na hoelang een onbezorgde gebeurtenis een dode brief wordt (ISO 8601, bijvoorbeeld PT24H of P2D).",
            "After how long an undelivered event becomes a dead letter (ISO 8601, e.g. PT24H or P2D).",
        ),
        choices: &[],
    },
    Setting {
        key: "initialBackoff",
        label: ("Eerste wachttijd", "First retry delay"),
        help: (
            "Voor de eerste herhaling; daarna steeds langer (ISO 8601, bijvoorbeeld PT1S).",
            "Before the first retry; longer each time after (ISO 8601, e.g. PT1S).",
        ),
        choices: &[],
    },
    Setting {
        key: "maxBackoff",
        label: ("Langste wachttijd", "Longest retry delay"),
        help: (
            "Ten minste de eerste (ISO 8601, bijvoorbeeld PT1H).",
            "At least the first (ISO 8601, e.g. PT1H).",
        ),
        choices: &[],
    },
    Setting {
        key: "timeout",
        label: ("Tijd per poging", "Time per attempt"),
        help: (
            "Hoelang één poging mag duren, ten hoogste PT5M.",
            "How long one attempt may take, at most PT5M.",
        ),
        choices: &[],
    },
    Setting {
        key: "lockDuration",
        label: ("Vergrendeling (pull)", "Lock (pull)"),
        help: (
            "Alleen bij pull: hoelang een opgehaalde gebeurtenis voor u vastligt (PT1S tot PT10M).",
            "Pull only: how long a received event stays locked to you (PT1S to PT10M).",
        ),
        choices: &[],
    },
];

/// The form's values (from what was posted, else from the stored subscription).
struct FormValues {
    label: String,
    sink: String,
    /// The MQTT topic or NATS subject, for a broker's endpoint.
    topic: String,
    delivery: String,
    types: String,
    source: String,
    /// A lone CESQL filter (`{"sql": …}`), shown in a field of its own.
    sql: String,
    /// The other filters, as JSON.
    filters: String,
    /// Each setting's value by key (absent: the default).
    config: std::collections::HashMap<&'static str, String>,
}

impl FormValues {
    fn of_subscription(s: &SubscriptionOut) -> FormValues {
        // One filter that is only CESQL goes to its own field; the rest stay JSON.
        let mut rest: Vec<Value> = s.filters.clone();
        let lone_sql = |f: &Value| {
            f.as_object()
                .filter(|o| o.len() == 1)
                .and_then(|o| o.get("sql"))
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        let sql = match rest.iter().filter(|f| lone_sql(f).is_some()).count() {
            1 => {
                let at = rest
                    .iter()
                    .position(|f| lone_sql(f).is_some())
                    .expect("one");
                lone_sql(&rest.remove(at))
            }
            _ => None,
        };
        let delivery = s
            .config
            .get("delivery")
            .cloned()
            .unwrap_or_else(|| "push".into());
        FormValues {
            label: s.label.clone().unwrap_or_default(),
            sink: if delivery == "pull" {
                String::new()
            } else {
                s.sink.clone()
            },
            topic: match &s.protocol_settings {
                Some(knooppunt_api::ProtocolSettingsOut::Mqtt { topicname, .. }) => {
                    topicname.clone()
                }
                Some(knooppunt_api::ProtocolSettingsOut::Nats { subject, .. }) => subject.clone(),
                Some(knooppunt_api::ProtocolSettingsOut::Amqp { address, .. }) => {
                    address.clone().unwrap_or_default()
                }
                _ => String::new(),
            },
            delivery,
            types: s
                .types
                .as_ref()
                .map(|types| types.join("\n"))
                .unwrap_or_default(),
            source: s.source.clone().unwrap_or_default(),
            sql: sql.unwrap_or_default(),
            filters: if rest.is_empty() {
                String::new()
            } else {
                serde_json::to_string_pretty(&rest).unwrap_or_default()
            },
            config: SETTINGS
                .iter()
                .filter_map(|setting| {
                    s.config
                        .get(setting.key)
                        .map(|value| (setting.key, value.clone()))
                })
                .collect(),
        }
    }

    fn of_fields(fields: &Fields) -> FormValues {
        FormValues {
            label: fields.get("label").to_owned(),
            sink: fields.get("sink").to_owned(),
            topic: fields.get("topic").to_owned(),
            delivery: fields.get("delivery").to_owned(),
            types: fields.get("types").to_owned(),
            source: fields.get("source").to_owned(),
            sql: fields.get("sql").to_owned(),
            filters: fields.get("filters").to_owned(),
            config: SETTINGS
                .iter()
                .map(|setting| {
                    (
                        setting.key,
                        fields.get(&format!("config.{}", setting.key)).to_owned(),
                    )
                })
                .collect(),
        }
    }
}

/// The create or edit form; `action` is where it posts.
fn subscription_form(
    visitor: &Visitor,
    defaults: &knooppunt_store::ConfigDefaults,
    action: &str,
    values: &FormValues,
    problem: Option<&Problem>,
    creating: bool,
) -> Markup {
    let lang = visitor.lang;
    let invalid = |name: &str| {
        problem.is_some_and(|p| {
            p.params.iter().any(|(n, _)| {
                n == name
                    || n.starts_with(&format!("{name}."))
                    || n.starts_with(&format!("{name}["))
            })
        })
    };
    // The CESQL field's filter comes after the JSON box's: its problems name that index.
    let json_filters = serde_json::from_str::<Value>(&values.filters)
        .ok()
        .and_then(|f| f.as_array().map(Vec::len))
        .unwrap_or(0);
    let sql_index = format!("filters[{json_filters}]");
    let invalid_sql = !values.sql.trim().is_empty()
        && problem.is_some_and(|p| p.params.iter().any(|(n, _)| n.starts_with(&sql_index)));
    let invalid = |name: &str| {
        invalid(name)
            && !(name == "filters" && invalid_sql && {
                // Only the CESQL field's filter is wrong: the JSON box is not marked.
                problem.is_some_and(|p| {
                    p.params
                        .iter()
                        .filter(|(n, _)| n.starts_with("filters"))
                        .all(|(n, _)| n.starts_with(&sql_index))
                })
            })
    };
    html! {
        @if let Some(problem) = problem { (layout::problem(lang, problem)) }
        form method="post" action=(action) class="kp-form" novalidate
            data-check-url=(if creating { format!("{BASE}/subscriptions/check") } else { format!("{action}/check") })
            data-check-target="check-result" {
            (csrf(visitor))
            div class={ "utrecht-form-field" @if invalid("label") { " utrecht-form-field--invalid" } } {
                label class="utrecht-form-label" for="f-label" { (lang.t("Naam (optioneel)", "Name (optional)")) }
                div class="utrecht-form-field-description" id="f-label-hint" {
                    (lang.t("Waaraan u en uw collega's het abonnement herkennen, bijvoorbeeld ‘Verhuizingen voor Burgerzaken’.",
                            "What you and your colleagues know the subscription by, for example ‘Removals for civil affairs’."))
                }
                input class="utrecht-textbox utrecht-textbox--html-input" type="text" id="f-label" name="label" value=(values.label)
                    maxlength="200" aria-describedby="f-label-hint" aria-invalid=(invalid("label"));
            }
            div class="utrecht-form-field" {
                label class="utrecht-form-label" for="f-delivery" { (lang.t("Levering", "Delivery")) }
                select class="utrecht-select utrecht-select--html-select" id="f-delivery" name="delivery" {
                    option value="push" selected[values.delivery != "pull"] { (lang.t("Push: de hub stuurt naar uw eindpunt", "Push: the hub sends to your endpoint")) }
                    option value="pull" selected[values.delivery == "pull"] { (lang.t("Pull: u haalt op bij de hub", "Pull: you receive from the hub")) }
                }
            }
            div class={ "utrecht-form-field" @if invalid("sink") { " utrecht-form-field--invalid" } } {
                label class="utrecht-form-label" for="f-sink" { (lang.t("Eindpunt (URL; leeg bij pull)", "Endpoint (URL; empty for pull)")) }
                input class="utrecht-textbox utrecht-textbox--html-input" type="url" id="f-sink" name="sink" value=(values.sink) aria-invalid=(invalid("sink"));
            }
            @let invalid_topic = invalid("protocolsettings.topicname") || invalid("protocolsettings.subject") || invalid("protocolsettings.address");
            div class={ "utrecht-form-field" @if invalid_topic { " utrecht-form-field--invalid" } } {
                label class="utrecht-form-label" for="f-topic" { (lang.t("Onderwerp: MQTT-topic, NATS-subject of AMQP-adres (alleen bij een brokereindpunt: mqtt(s)://, nats://, tls://, amqp(s)://; een AMQP-adres mag ook het pad van het eindpunt zijn)", "Topic: MQTT topic, NATS subject or AMQP address (only for a broker endpoint: mqtt(s)://, nats://, tls://, amqp(s)://; an AMQP address may be the endpoint's path instead)")) }
                input class="utrecht-textbox utrecht-textbox--html-input" type="text" id="f-topic" name="topic" value=(values.topic) aria-invalid=(invalid_topic);
            }
            div class={ "utrecht-form-field" @if invalid("types") { " utrecht-form-field--invalid" } } {
                label class="utrecht-form-label" for="f-types" { (lang.t("Typen (één per regel; leeg: alle)", "Types (one per line; empty: all)")) }
                textarea class="utrecht-textarea utrecht-textarea--html-textarea" id="f-types" name="types" rows="3" aria-invalid=(invalid("types")) { (values.types) }
            }
            div class="utrecht-form-field" {
                label class="utrecht-form-label" for="f-source" { (lang.t("Bron (optioneel)", "Source (optional)")) }
                input class="utrecht-textbox utrecht-textbox--html-input" type="text" id="f-source" name="source" value=(values.source);
            }
            div class={ "utrecht-form-field" @if invalid_sql { " utrecht-form-field--invalid" } } {
                label class="utrecht-form-label" for="f-sql" { (lang.t("Filter (CESQL-expressie, optioneel)", "Filter (CESQL expression, optional)")) }
                div class="utrecht-form-field-description" id="f-sql-hint" {
                    (lang.t("Alleen gebeurtenissen waarvoor de expressie waar is, bijvoorbeeld ", "Only events for which the expression is true, for example "))
                    code class="utrecht-code" { "subject LIKE 'zaak-%' AND gemeente = '0363'" }
                }
                textarea class="utrecht-textarea utrecht-textarea--html-textarea kp-one-line" id="f-sql" name="sql" rows="2"
                    aria-describedby="f-sql-hint" aria-invalid=(invalid_sql) spellcheck="false" { (values.sql) }
            }
            div class={ "utrecht-form-field" @if invalid("filters") { " utrecht-form-field--invalid" } } {
                label class="utrecht-form-label" for="f-filters" { (lang.t("Andere filters (JSON, CloudEvents Subscriptions API; optioneel)", "Other filters (JSON, CloudEvents Subscriptions API; optional)")) }
                div class="utrecht-form-field-description" id="f-filters-hint" {
                    (lang.t("Een lijst; alle filters moeten kloppen. Bijvoorbeeld ", "A list; every filter must match. For example ")) code class="utrecht-code" { r#"[{"prefix": {"subject": "zaak-"}}]"# }
                }
                textarea class="utrecht-textarea utrecht-textarea--html-textarea" id="f-filters" name="filters" rows="6"
                    aria-describedby="f-filters-hint" aria-invalid=(invalid("filters")) spellcheck="false" { (values.filters) }
            }
            fieldset class="utrecht-form-fieldset" {
                legend class="utrecht-form-fieldset__legend" { (lang.t("Bezorging (leeg: de standaard van de hub)", "Delivery (empty: the hub's default)")) }
                @for setting in &SETTINGS {
                    @let id = format!("f-config-{}", setting.key);
                    @let name = format!("config.{}", setting.key);
                    @let value = values.config.get(setting.key).cloned().unwrap_or_default();
                    @let invalid = invalid(&name);
                    @let (help_nl, help_en) = setting.help;
                    div class={ "utrecht-form-field" @if invalid { " utrecht-form-field--invalid" } } {
                        label class="utrecht-form-label" for=(id) { (lang.t(setting.label.0, setting.label.1)) }
                        div class="utrecht-form-field-description" id={ (id) "-hint" } {
                            (lang.t(help_nl, help_en))
                            " " (lang.t("Standaard: ", "Default: ")) code class="utrecht-code" { (defaults.get(setting.key)) } "."
                        }
                        @if setting.choices.is_empty() {
                            input class="utrecht-textbox utrecht-textbox--html-input" type="text" id=(id) name=(name) value=(value)
                                aria-describedby={ (id) "-hint" } aria-invalid=(invalid) spellcheck="false"
                                inputmode=[(setting.key == "maxAttempts").then_some("numeric")];
                        } @else {
                            select class="utrecht-select utrecht-select--html-select" id=(id) name=(name) aria-describedby={ (id) "-hint" } {
                                option value="" selected[value.is_empty()] { (lang.t("standaard", "default")) }
                                @for (choice, nl, en) in setting.choices {
                                    option value=(choice) selected[value == *choice] { (lang.t(nl, en)) }
                                }
                            }
                        }
                    }
                }
            }
            div id="check-result" aria-live="polite" {}
            div { button type="submit" class="utrecht-button utrecht-button--primary-action" { (lang.t("Opslaan", "Save")) } }
        }
    }
}

/// `GET /console/subscriptions/new`, with `?type=` when it comes from a catalog entry.
pub(crate) async fn new_form(
    State(console): State<Arc<Console>>,
    visitor: Visitor,
    Query(query): Params,
) -> Response {
    let lang = visitor.lang;
    let values = FormValues {
        label: String::new(),
        sink: String::new(),
        topic: String::new(),
        delivery: "push".into(),
        types: query.get("type").cloned().unwrap_or_default(),
        source: String::new(),
        sql: String::new(),
        filters: String::new(),
        config: Default::default(),
    };
    let form = subscription_form(
        &visitor,
        console.state.subscription_defaults(),
        &format!("{BASE}/subscriptions"),
        &values,
        None,
        true,
    );
    respond(
        StatusCode::OK,
        page(
            lang,
            Some(&visitor),
            Section::Subscriptions,
            lang.t("Nieuw abonnement", "New subscription"),
            form,
        ),
    )
}

/// `GET /console/subscriptions/{id}/edit`.
pub(crate) async fn edit_form(
    State(console): State<Arc<Console>>,
    visitor: Visitor,
    Path(id): Path<String>,
) -> Result<Response, Response> {
    let lang = visitor.lang;
    let answer = console
        .get(&visitor, &format!("/v1/subscriptions/{}", encode(&id)))
        .await
        .checked(&visitor)?;
    let form = subscription_form(
        &visitor,
        console.state.subscription_defaults(),
        &format!("{BASE}/subscriptions/{}", encode(&id)),
        &FormValues::of_subscription(&answer.parse(&visitor)?),
        None,
        false,
    );
    Ok(respond(
        StatusCode::OK,
        page(
            lang,
            Some(&visitor),
            Section::Subscriptions,
            lang.t("Abonnement bewerken", "Edit the subscription"),
            form,
        ),
    ))
}

/// A form posted again with what the API found wrong.
fn form_again(
    console: &Console,
    visitor: &Visitor,
    action: &str,
    fields: &Fields,
    problem: &Problem,
    creating: bool,
    status: StatusCode,
) -> Response {
    let lang = visitor.lang;
    let title = if creating {
        lang.t("Nieuw abonnement", "New subscription")
    } else {
        lang.t("Abonnement bewerken", "Edit the subscription")
    };
    let form = subscription_form(
        visitor,
        console.state.subscription_defaults(),
        action,
        &FormValues::of_fields(fields),
        Some(problem),
        creating,
    );
    respond(
        status,
        page(lang, Some(visitor), Section::Subscriptions, title, form),
    )
}

/// `POST /console/subscriptions`: creates it through the API.
pub(crate) async fn create(State(console): State<Arc<Console>>, posted: Posted) -> Response {
    let visitor = &posted.visitor;
    let action = format!("{BASE}/subscriptions");
    let body = match body_of(&posted.fields, None, visitor.lang) {
        Ok(body) => body,
        Err(problem) => {
            return form_again(
                &console,
                visitor,
                &action,
                &posted.fields,
                &problem,
                true,
                StatusCode::BAD_REQUEST,
            );
        }
    };
    let answer = console
        .call(visitor, Method::POST, "/v1/subscriptions", Some(&body))
        .await;
    saved(
        &console,
        answer,
        visitor,
        &action,
        &posted.fields,
        true,
        "created",
    )
}

/// `POST /console/subscriptions/{id}`: replaces it through the API (what the form does not
/// show is kept).
pub(crate) async fn update(
    State(console): State<Arc<Console>>,
    Path(id): Path<String>,
    posted: Posted,
) -> Response {
    let visitor = &posted.visitor;
    let path = format!("/v1/subscriptions/{}", encode(&id));
    let action = format!("{BASE}/subscriptions/{}", encode(&id));
    let current = console.get(visitor, &path).await;
    if !current.ok() {
        return layout::api_refusal(visitor.lang, visitor, current.status, &current.problem());
    }
    let body = match body_of(&posted.fields, Some(&current.body), visitor.lang) {
        Ok(body) => body,
        Err(problem) => {
            return form_again(
                &console,
                visitor,
                &action,
                &posted.fields,
                &problem,
                false,
                StatusCode::BAD_REQUEST,
            );
        }
    };
    let answer = console.call(visitor, Method::PUT, &path, Some(&body)).await;
    saved(
        &console,
        answer,
        visitor,
        &action,
        &posted.fields,
        false,
        "saved",
    )
}

fn saved(
    console: &Console,
    answer: Answer,
    visitor: &Visitor,
    action: &str,
    fields: &Fields,
    creating: bool,
    notice: &str,
) -> Response {
    if !answer.ok() {
        let status = answer.refused_status();
        return form_again(
            console,
            visitor,
            action,
            fields,
            &answer.problem(),
            creating,
            status,
        );
    }
    let saved: SubscriptionOut = match answer.parse(visitor) {
        Ok(saved) => saved,
        Err(page) => return page,
    };
    if creating && let Some(secret) = &saved.signing_secret {
        // Shown once, on this page: never in a URL.
        return secret_page(visitor, &saved.id, secret, None, true);
    }
    redirect(&format!(
        "{BASE}/subscriptions/{}?notice={notice}",
        encode(&saved.id)
    ))
}

/// `POST /console/subscriptions/check`: the new subscription's form checked by the API's
/// own rules, as a fragment the page shows as it is typed.
pub(crate) async fn check(State(console): State<Arc<Console>>, posted: Posted) -> Response {
    check_form(&console, posted, None).await
}

/// `POST /console/subscriptions/{id}/check`: the same for the edit form of `id`.
pub(crate) async fn check_existing(
    State(console): State<Arc<Console>>,
    Path(id): Path<String>,
    posted: Posted,
) -> Response {
    check_form(&console, posted, Some(&id)).await
}

async fn check_form(console: &Console, posted: Posted, existing: Option<&str>) -> Response {
    let visitor = &posted.visitor;
    let lang = visitor.lang;
    let result = match body_of(&posted.fields, None, lang) {
        Err(problem) => Err(problem),
        Ok(body) => {
            let caller = Caller(Arc::clone(&visitor.principal));
            let mut headers = http::HeaderMap::new();
            if let Some(host) = &visitor.host {
                headers.insert(http::header::HOST, host.clone());
            }
            match knooppunt_api::subscriptions::check(
                &console.state,
                &caller,
                &headers,
                &body,
                existing,
            )
            .await
            {
                Ok(()) => Ok(()),
                Err(error) => {
                    let response = error.into_response();
                    let bytes = axum::body::to_bytes(response.into_body(), 1024 * 1024)
                        .await
                        .unwrap_or_default();
                    Err(Problem::of(
                        &serde_json::from_slice(&bytes).unwrap_or(Value::Null),
                    ))
                }
            }
        }
    };
    let fragment = match result {
        Ok(()) => layout::notice(
            true,
            lang.t(
                "De hub neemt dit abonnement zo aan.",
                "The hub accepts this subscription as it is.",
            ),
        ),
        Err(problem) => layout::problem(lang, &problem),
    };
    (
        [(http::header::CONTENT_TYPE, "text/html; charset=utf-8")],
        fragment.into_string(),
    )
        .into_response()
}

/// The page that shows a subscription's signing secret once: after creating it, or after a
/// rotation (with until when the previous one signs too).
pub(crate) fn secret_page(
    visitor: &Visitor,
    id: &str,
    secret: &str,
    previous_until: Option<&str>,
    created: bool,
) -> Response {
    let lang = visitor.lang;
    let page_path = format!("{BASE}/subscriptions/{}", encode(id));
    let intro = html! {
        @if created { (lang.t("Het abonnement is aangemaakt. ", "The subscription was created. ")) }
        (lang.t("Het ondertekeningsgeheim — alleen nu te zien; zet het in uw ontvanger, die er de handtekening (Standard Webhooks: webhook-signature) van elke bezorging mee controleert:",
                "The signing secret — shown only now; put it in your receiver, which checks each delivery's signature (Standard Webhooks: webhook-signature) with it:"))
    };
    let after = previous_until.map(|until| {
        html! {
            (lang.t("Het vorige geheim ondertekent ook nog tot ", "The previous secret signs too until "))
            (layout::at(until)) "."
        }
    });
    let content = html! {
        (layout::secret_shown(lang, "new-secret", intro, secret, after))
        p class="utrecht-paragraph" {
            a class="utrecht-link" href=(page_path) { (lang.t("Naar het abonnement", "To the subscription")) }
        }
    };
    let title = if created {
        lang.t("Abonnement aangemaakt", "Subscription created")
    } else {
        lang.t("Nieuw ondertekeningsgeheim", "New signing secret")
    };
    respond(
        StatusCode::OK,
        page(lang, Some(visitor), Section::Subscriptions, title, content),
    )
}

#[cfg(test)]
mod tests {
    use knooppunt_store::{CONFIG_KEYS, ConfigValues};

    /// The form offers each setting's values as the hub takes them: a choice for each word
    /// of a key that takes words, a field where it takes more; every key but `delivery`
    /// (which the form asks as push or pull).
    #[test]
    fn the_settings_are_the_hubs() {
        for key in CONFIG_KEYS {
            let Some(setting) = super::SETTINGS.iter().find(|s| s.key == key.name) else {
                assert_eq!(key.name, "delivery", "the form lacks `{}`", key.name);
                continue;
            };
            let offered: Vec<&str> = setting.choices.iter().map(|(value, ..)| *value).collect();
            match key.values {
                ConfigValues::OneOf(words) => assert_eq!(offered, words, "{}", key.name),
                _ => assert!(offered.is_empty(), "{}", key.name),
            }
        }
    }
}
