//! The administrator's pages: principals (create, disable or enable, a new token shown
//! once), the hub's health, and the audit trail with search.

use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::response::Response;
use http::{Method, StatusCode};
use maud::{Markup, html};
use serde_json::{Value, json};

use crate::forms::{Posted, Problem, encode};
use crate::identity::Role;
use crate::layout::{self, Section, badge, csrf, data_list, page, respond, text, time};
use crate::{BASE, Console, Lang, Visitor};

type Params = Query<std::collections::HashMap<String, String>>;

/// A token shown once, with what to do with it.
fn token_shown(lang: Lang, name: &str, token: &str) -> Markup {
    html! {
        div class="utrecht-alert utrecht-alert--ok" role="status" {
            div class="utrecht-alert__message" {
                p class="utrecht-paragraph" {
                    (lang.t("Het token van ", "The token of ")) strong { (name) }
                    (lang.t(" — alleen nu te zien; bewaar het veilig en geef het aan de eigenaar:", " — shown only now; keep it safe and hand it to its owner:"))
                }
                p class="utrecht-paragraph kp-secret" id="new-token" { (token) }
            }
        }
    }
}

/// `GET /console/principals`.
pub(crate) async fn principals(State(console): State<Arc<Console>>, visitor: Visitor) -> Response {
    principals_page(&console, &visitor, None, StatusCode::OK).await
}

async fn principals_page(
    console: &Console,
    visitor: &Visitor,
    shown: Option<Markup>,
    status: StatusCode,
) -> Response {
    let lang = visitor.lang;
    let answer = console.get(visitor, "/v1/principals?pageSize=100").await;
    if !answer.ok() {
        return layout::api_refusal(lang, visitor, answer.status, &answer.problem());
    }
    let list = answer.body.as_array().cloned().unwrap_or_default();
    let content = html! {
        @if let Some(shown) = shown { (shown) }
        (layout::table("principals-caption", lang.t("Principals", "Principals"), &[lang.t("Naam", "Name"), lang.t("Rollen", "Roles"), "OIN", lang.t("Status", "State"), lang.t("Herkomst", "Origin"), lang.t("Acties", "Actions")], list.iter().map(|p| {
            let name = text(p, "name");
            let disabled = p["disabled"] == true;
            vec![
                layout::long(&name),
                html! { (p["roles"].as_array().map(|r| r.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(", ")).unwrap_or_default()) },
                html! { (text(p, "oin")) },
                badge(lang, if disabled { "disabled" } else { "active" }),
                html! { (text(p, "origin")) },
                html! {
                    form method="post" action={ (BASE) "/principals/" (encode(&name)) } class="kp-inline" {
                        (csrf(visitor))
                        @if disabled {
                            button type="submit" name="action" value="enable" class="utrecht-button utrecht-button--secondary-action" {
                                (lang.t("Inschakelen", "Enable")) span class="kp-visually-hidden" { " " (name) }
                            }
                        } @else {
                            button type="submit" name="action" value="disable" class="utrecht-button utrecht-button--secondary-action" {
                                (lang.t("Uitschakelen", "Disable")) span class="kp-visually-hidden" { " " (name) }
                            }
                        }
                        " "
                        button type="submit" name="action" value="rotate" class="utrecht-button utrecht-button--secondary-action" {
                            (lang.t("Nieuw token", "New token")) span class="kp-visually-hidden" { " " (name) }
                        }
                    }
                },
            ]
        }).collect()))
        section aria-labelledby="h-new-principal" {
            h2 class="utrecht-heading-2" id="h-new-principal" { (lang.t("Nieuwe principal", "New principal")) }
            form method="post" action={ (BASE) "/principals" } class="kp-form" {
                (csrf(visitor))
                div class="utrecht-form-field" {
                    label class="utrecht-form-label" for="p-name" { (lang.t("Naam", "Name")) }
                    input class="utrecht-textbox utrecht-textbox--html-input" type="text" id="p-name" name="name" required;
                }
                fieldset class="utrecht-form-fieldset" {
                    legend class="utrecht-form-fieldset__legend" { (lang.t("Rollen", "Roles")) }
                    @for role in Role::ALL {
                        div class="utrecht-form-field utrecht-form-field--checkbox" {
                            input class="utrecht-checkbox utrecht-checkbox--html-input" type="checkbox" name="roles" value=(role.name()) id={ "role-" (role.name()) };
                            label class="utrecht-form-label utrecht-form-label--checkbox" for={ "role-" (role.name()) } { (role.name()) }
                        }
                    }
                }
                div class="utrecht-form-field" {
                    label class="utrecht-form-label" for="p-oin" { (lang.t("OIN (optioneel)", "OIN (optional)")) }
                    input class="utrecht-textbox utrecht-textbox--html-input" type="text" inputmode="numeric" id="p-oin" name="oin";
                }
                div class="utrecht-form-field" {
                    label class="utrecht-form-label" for="p-types" { (lang.t("Mag abonneren op typen die beginnen met (één per regel; leeg: alle)", "May subscribe to types starting with (one per line; empty: any)")) }
                    textarea class="utrecht-textarea utrecht-textarea--html-textarea" id="p-types" name="subscribeTypePrefixes" rows="2" {}
                }
                div { button type="submit" class="utrecht-button utrecht-button--primary-action" { (lang.t("Aanmaken", "Create")) } }
            }
        }
    };
    respond(
        status,
        page(
            lang,
            Some(visitor),
            Section::Principals,
            lang.t("Principals", "Principals"),
            content,
        ),
    )
}

fn lines(text: &str) -> Vec<&str> {
    text.split(['\n', ','])
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect()
}

/// `POST /console/principals`: creates one through the API; its token is shown once.
pub(crate) async fn create_principal(
    State(console): State<Arc<Console>>,
    posted: Posted,
) -> Response {
    let visitor = &posted.visitor;
    let f = &posted.fields;
    let mut body = json!({
        "name": f.get("name"),
        "roles": f.all("roles"),
    });
    if !f.get("oin").is_empty() {
        body["oin"] = json!(f.get("oin"));
    }
    let prefixes = lines(f.get("subscribeTypePrefixes"));
    if !prefixes.is_empty() {
        body["subscribeTypePrefixes"] = json!(prefixes);
    }
    let answer = console
        .call(visitor, Method::POST, "/v1/principals", Some(&body))
        .await;
    if !answer.ok() {
        let shown = layout::problem(visitor.lang, &answer.problem());
        let status = if answer.status.is_client_error() {
            answer.status
        } else {
            StatusCode::BAD_GATEWAY
        };
        return principals_page(&console, visitor, Some(shown), status).await;
    }
    let name = text(&answer.body, "name");
    let shown = match answer.body["token"].as_str() {
        Some(token) => token_shown(visitor.lang, &name, token),
        None => layout::notice(
            true,
            visitor
                .lang
                .t("Aangemaakt (zonder token).", "Created (without a token)."),
        ),
    };
    principals_page(&console, visitor, Some(shown), StatusCode::CREATED).await
}

/// `POST /console/principals/{name}`: `action` = `disable`, `enable` or `rotate`.
pub(crate) async fn change_principal(
    State(console): State<Arc<Console>>,
    Path(name): Path<String>,
    posted: Posted,
) -> Response {
    let visitor = &posted.visitor;
    let lang = visitor.lang;
    let path = format!("/v1/principals/{}", encode(&name));
    let (answer, rotated) = match posted.fields.get("action") {
        "disable" | "enable" => {
            let body = json!({"disabled": posted.fields.get("action") == "disable"});
            (
                console
                    .call(visitor, Method::PATCH, &path, Some(&body))
                    .await,
                false,
            )
        }
        "rotate" => (
            console
                .call(visitor, Method::POST, &format!("{path}/token"), None)
                .await,
            true,
        ),
        _ => {
            let problem = Problem::message(lang.t("Onbekende actie.", "Unknown action."));
            return principals_page(
                &console,
                visitor,
                Some(layout::problem(lang, &problem)),
                StatusCode::BAD_REQUEST,
            )
            .await;
        }
    };
    if !answer.ok() {
        let shown = layout::problem(lang, &answer.problem());
        let status = if answer.status.is_client_error() {
            answer.status
        } else {
            StatusCode::BAD_GATEWAY
        };
        return principals_page(&console, visitor, Some(shown), status).await;
    }
    let shown = match (rotated, answer.body["token"].as_str()) {
        (true, Some(token)) => token_shown(lang, &name, token),
        _ => layout::notice(true, lang.t("Opgeslagen.", "Saved.")),
    };
    principals_page(&console, visitor, Some(shown), StatusCode::OK).await
}

fn bytes(value: &Value) -> String {
    let Some(n) = value.as_u64() else {
        return "—".into();
    };
    match n {
        0..1024 => format!("{n} B"),
        1024..1_048_576 => format!("{:.1} KiB", n as f64 / 1024.0),
        1_048_576..1_073_741_824 => format!("{:.1} MiB", n as f64 / 1_048_576.0),
        _ => format!("{:.1} GiB", n as f64 / 1_073_741_824.0),
    }
}

/// `GET /console/status`: the hub at a glance, refreshed live.
pub(crate) async fn status(
    State(console): State<Arc<Console>>,
    visitor: Visitor,
) -> Result<Response, Response> {
    let lang = visitor.lang;
    let answer = console
        .get(&visitor, "/v1/status")
        .await
        .checked(&visitor)?;
    let s = &answer.body;
    let open = s["openBreakers"].as_array().cloned().unwrap_or_default();
    let stuck = s["stuckWorkers"].as_array().cloned().unwrap_or_default();
    let content = html! {
        div id="hub-status" data-refresh="5" aria-live="polite" {
            (data_list(vec![
                (lang.t("Gebeurtenissen in per seconde (laatste minuut)", "Events in per second (last minute)"), html! { (text(s, "eventsAcceptedPerSecond")) }),
                (lang.t("Afgeleverd per seconde (laatste minuut)", "Delivered per second (last minute)"), html! { (text(s, "eventsDeliveredPerSecond")) }),
                (lang.t("Achterstand", "Backlog"), html! {
                    (text(s, "backlog")) (lang.t(" bezorgingen, ", " deliveries, ")) (bytes(&s["backlogBytes"]))
                    @if s.get("backlogMaxBytes").is_some() { (lang.t(" van de grens ", " of the limit ")) (bytes(&s["backlogMaxBytes"])) }
                }),
                (lang.t("Neemt publicaties aan", "Accepting publishes"), html! {
                    @if s["accepting"] == false {
                        (badge(lang, "refusing")) " " (s["refusing"].as_str().unwrap_or_default())
                    } @else { (badge(lang, "accepting")) }
                }),
                (lang.t("Oudste wachtende gebeurtenis", "Oldest waiting event"), html! { @if let Some(a) = s["oldestPendingAgeSeconds"].as_u64() { (a) " s" } @else { "—" } }),
                (lang.t("Dode brieven", "Dead letters"), html! { (text(s, "deadLetters")) }),
                (lang.t("Abonnementen", "Subscriptions"), html! {
                    @for (state, count) in s["subscriptions"].as_object().into_iter().flatten() {
                        (badge(lang, state)) " " (count) " "
                    }
                }),
                (lang.t("Principals", "Principals"), html! { (text(s, "principals")) }),
                (lang.t("Opslag", "Store"), html! { (bytes(&s["store"]["bytes"])) (lang.t(", waarvan gebeurtenissen ", ", of which events ")) (bytes(&s["store"]["eventBytes"]))
                    @if s["store"].get("freeBytes").is_some() { (lang.t("; vrij op de schijf ", "; free on the disk ")) (bytes(&s["store"]["freeBytes"])) }
                }),
            ]))
            h2 class="utrecht-heading-2" { (lang.t("Eindpunten met open breaker", "Endpoints with an open breaker")) }
            @if open.is_empty() {
                p class="utrecht-paragraph" { (lang.t("Geen: alle eindpunten nemen aan.", "None: every endpoint takes deliveries.")) }
            } @else {
                ul class="utrecht-unordered-list" { @for sink in &open { li class="utrecht-unordered-list__item" { (sink.as_str().unwrap_or_default()) } } }
            }
            @if !stuck.is_empty() {
                h2 class="utrecht-heading-2" { (lang.t("Vastgelopen bezorgers", "Stuck delivery workers")) }
                ul class="utrecht-unordered-list" { @for w in &stuck { li class="utrecht-unordered-list__item" { (w.as_str().unwrap_or_default()) } } }
            }
        }
    };
    Ok(respond(
        StatusCode::OK,
        page(
            lang,
            Some(&visitor),
            Section::Status,
            lang.t("Hubstatus", "Hub status"),
            content,
        ),
    ))
}

/// `GET /console/audit`: the trail, searched by name, actor, object and time.
pub(crate) async fn audit(
    State(console): State<Arc<Console>>,
    visitor: Visitor,
    Query(query): Params,
) -> Response {
    let lang = visitor.lang;
    let keys = ["name", "actor", "object", "from", "until", "cursor"];
    let mut path = "/v1/audit?pageSize=50".to_owned();
    let mut search = String::new();
    for key in keys {
        if let Some(value) = query.get(key).map(|v| v.trim()).filter(|v| !v.is_empty()) {
            path.push_str(&format!("&{key}={}", encode(value)));
            if key != "cursor" {
                search.push_str(&format!("&{key}={}", encode(value)));
            }
        }
    }
    let answer = console.get(&visitor, &path).await;
    let audit_page = match search.strip_prefix('&') {
        Some(search) => format!("{BASE}/audit?{search}"),
        None => format!("{BASE}/audit"),
    };
    let value = |key: &str| query.get(key).cloned().unwrap_or_default();
    let field = |id: &str, nl: &'static str, en: &'static str| {
        html! {
            div class="utrecht-form-field" {
                label class="utrecht-form-label" for={ "a-" (id) } { (lang.t(nl, en)) }
                input class="utrecht-textbox utrecht-textbox--html-input" type="text" id={ "a-" (id) } name=(id) value=(value(id));
            }
        }
    };
    let entries = answer.body.as_array().cloned().unwrap_or_default();
    let content = html! {
        form method="get" action={ (BASE) "/audit" } class="kp-form" role="search" {
            (field("name", "Handeling (bijv. subscription of approval.grant)", "Action (e.g. subscription or approval.grant)"))
            (field("actor", "Wie", "Who"))
            (field("object", "Waarop (bijv. subscription/<id>)", "On what (e.g. subscription/<id>)"))
            (field("from", "Vanaf (RFC 3339)", "From (RFC 3339)"))
            (field("until", "Tot (RFC 3339)", "Until (RFC 3339)"))
            div { button type="submit" class="utrecht-button utrecht-button--primary-action" { (lang.t("Zoeken", "Search")) } }
        }
        @if !answer.ok() {
            (layout::problem(lang, &answer.problem()))
        } @else if entries.is_empty() {
            p class="utrecht-paragraph" { (lang.t("Niets gevonden.", "Nothing found.")) }
        } @else {
            (layout::table("audit-caption", lang.t("Auditregels", "Audit entries"), &["#", lang.t("Tijd", "Time"), lang.t("Handeling", "Action"), lang.t("Uitkomst", "Outcome"), lang.t("Wie", "Who"), lang.t("Waarop", "On what"), lang.t("Details", "Details")], entries.iter().map(|e| vec![
                html! { (text(e, "sequence")) },
                time(e.get("startTime")),
                html! { (text(e, "name")) },
                html! { (text(e, "statusCode")) },
                html! { (text(e, "actor")) },
                layout::long(&text(e, "object")),
                details(&e["details"]),
            ]).collect()))
            (layout::next_page(lang, &audit_page, answer.next_cursor().as_deref()))
        }
    };
    respond(
        StatusCode::OK,
        page(
            lang,
            Some(&visitor),
            Section::Audit,
            lang.t("Audittrail", "Audit trail"),
            content,
        ),
    )
}

/// An audit entry's details, readable: each member as a term and its value (text as it
/// is, anything else as compact JSON).
fn details(details: &Value) -> Markup {
    match details.as_object() {
        Some(members) if !members.is_empty() => html! {
            dl class="kp-details" {
                @for (key, value) in members {
                    div {
                        dt { (key) }
                        dd { span class="kp-break" { @if let Some(text) = value.as_str() { (text) } @else { (value.to_string()) } } }
                    }
                }
            }
        },
        _ => html! { "—" },
    }
}
