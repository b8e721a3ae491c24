//! The administrator's pages: principals (create, disable or enable, a new token shown
//! once), the hub's health, and the audit trail with search.

use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Response};
use http::{Method, StatusCode};
use maud::{Markup, html};
use serde_json::Value;

use crate::forms::{Posted, Problem, encode};
use crate::forms::{field, request};
use crate::identity::Role;
use crate::layout::{self, Section, badge, csrf, data_list, page, respond};
use crate::{BASE, Console, Lang, Visitor, redirect};
use knooppunt_api::{AuditEntryOut, CreatedPrincipalOut, HubStatusOut, SubscriptionOut, TokenOut};
use knooppunt_api::{Field, NewPrincipal, PrincipalChange};
use knooppunt_services::app::{AuditHead, AuditVerification};
use knooppunt_services::use_case::principals::PrincipalOut;

type Params = Query<std::collections::HashMap<String, String>>;

/// A token shown once, with what to do with it.
fn token_shown(lang: Lang, name: &str, token: &str) -> Markup {
    layout::secret_shown(
        lang,
        "new-token",
        html! {
            (lang.t("Het token van ", "The token of ")) strong { (name) }
            (lang.t(" — alleen nu te zien; bewaar het veilig en geef het aan de eigenaar:", " — shown only now; keep it safe and hand it to its owner:"))
        },
        token,
        None,
    )
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
    let list: Vec<PrincipalOut> = match answer.parse(visitor) {
        Ok(list) => list,
        Err(page) => return page,
    };
    let content = html! {
        @if let Some(shown) = shown { (shown) }
        (layout::table("principals-caption", lang.t("Principals", "Principals"), &[lang.t("Naam", "Name"), lang.t("Rollen", "Roles"), "OIN", lang.t("Status", "State"), lang.t("Herkomst", "Origin"), lang.t("Acties", "Actions")], list.iter().map(|p| {
            let name = p.name.clone();
            let disabled = p.disabled;
            vec![
                html! { a class="utrecht-link kp-break" href={ (BASE) "/principals/" (encode(&name)) } { (name) } },
                html! { (p.roles.iter().map(|r| layout::role_label(lang, r)).collect::<Vec<_>>().join(", ")) },
                html! { (p.oin.as_deref().unwrap_or("—")) },
                badge(lang, if disabled { "disabled" } else { "active" }),
                html! { (layout::origin_label(lang, &p.origin)) },
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
                            label class="utrecht-form-label utrecht-form-label--checkbox" for={ "role-" (role.name()) } { (layout::role_label(lang, role.name())) }
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

/// The texts, owned (for a typed request).
fn owned(texts: Vec<&str>) -> Vec<String> {
    texts.into_iter().map(str::to_owned).collect()
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
    let prefixes = lines(f.get("subscribeTypePrefixes"));
    let body = request(&NewPrincipal {
        name: Field::Given(f.get("name").to_owned()),
        roles: Field::Given(f.all("roles").iter().map(|r| r.to_string()).collect()),
        oin: field(f.get("oin")),
        subscribe_type_prefixes: if prefixes.is_empty() {
            Field::Absent
        } else {
            Field::Given(owned(prefixes))
        },
        ..NewPrincipal::default()
    });
    let answer = console
        .call(visitor, Method::POST, "/v1/principals", Some(&body))
        .await;
    if !answer.ok() {
        let shown = layout::problem(visitor.lang, &answer.problem());
        let status = answer.refused_status();
        return principals_page(&console, visitor, Some(shown), status).await;
    }
    let created: CreatedPrincipalOut = match answer.parse(visitor) {
        Ok(created) => created,
        Err(page) => return page,
    };
    let shown = match &created.token {
        Some(token) => token_shown(visitor.lang, &created.principal.name, token),
        None => layout::notice(
            true,
            visitor
                .lang
                .t("Aangemaakt (zonder token).", "Created (without a token)."),
        ),
    };
    principals_page(&console, visitor, Some(shown), StatusCode::CREATED).await
}

/// `POST /console/principals/{name}`: `action` = `save` (its rights, from its page),
/// `enable`, or, after confirming, `disable`, `rotate` or `delete`.
pub(crate) async fn change_principal(
    State(console): State<Arc<Console>>,
    Path(name): Path<String>,
    posted: Posted,
) -> Response {
    let visitor = &posted.visitor;
    let lang = visitor.lang;
    let path = format!("/v1/principals/{}", encode(&name));
    let action = posted.fields.get("action");
    let here = format!("{BASE}/principals/{}", encode(&name));
    let principals = format!("{BASE}/principals");
    let ask = |title: &str, consequences: &[&str], button: &str| {
        layout::confirm_first(
            &posted,
            &layout::Ask {
                action: &here,
                title,
                consequences,
                button,
                back: &principals,
            },
        )
    };
    let asked = match action {
        "disable" => ask(
            lang.t("Principal uitschakelen?", "Disable the principal?"),
            &[lang.t(
                "Zijn token en certificaat werken dan niet meer, en zijn abonnementen krijgen niets meer (opgeschort) tot hij weer wordt ingeschakeld.",
                "Its token and certificate stop working, and its subscriptions receive nothing (suspended) until it is enabled again.",
            )],
            lang.t("Uitschakelen", "Disable"),
        ),
        "rotate" => ask(
            lang.t("Nieuw token maken?", "Make a new token?"),
            &[lang.t(
                "Het huidige token werkt daarna meteen niet meer; geef het nieuwe aan de eigenaar.",
                "The current token stops working at once; hand the new one to its owner.",
            )],
            lang.t("Nieuw token maken", "Make a new token"),
        ),
        "delete" => {
            let owned = console
                .get(visitor, &format!("/v1/subscriptions?pageSize=100&owner={}", encode(&name)))
                .await;
            let count = owned.read::<Vec<SubscriptionOut>>().map_or(0, |list| list.len()) as u64;
            let more = owned.next_cursor().is_some();
            let subscriptions = if more {
                lang.t(
                    "Zijn abonnementen (meer dan 100) worden mee verwijderd: de hub bezorgt er niets meer voor en wat nog wacht vervalt.",
                    "Its subscriptions (more than 100) are deleted with it: the hub delivers nothing more for them and what still waits is dropped.",
                ).to_owned()
            } else {
                format!(
                    "{}{}",
                    lang.count(
                        count,
                        ("abonnement van hem wordt mee verwijderd", "abonnementen van hem worden mee verwijderd"),
                        ("subscription of it is deleted with it", "subscriptions of it are deleted with it"),
                    ),
                    lang.t(
                        ": de hub bezorgt er niets meer voor en wat nog wacht vervalt.",
                        ": the hub delivers nothing more for them and what still waits is dropped.",
                    )
                )
            };
            ask(
                lang.t("Principal verwijderen?", "Delete the principal?"),
                &[
                    lang.t("Zijn token en certificaat werken dan niet meer.", "Its token and certificate stop working."),
                    &subscriptions,
                    lang.t(
                        "Zijn gebeurtenistypen blijven in de catalogus; een beheerder kan ze wijzigen of verwijderen. De audittrail houdt wat hij deed.",
                        "Its event types stay in the catalog; an administrator can change or delete them. The audit trail keeps what it did.",
                    ),
                    lang.t("Dit kan niet ongedaan worden gemaakt.", "This cannot be undone."),
                ],
                lang.t("Verwijderen", "Delete"),
            )
        }
        _ => None,
    };
    if let Some(page) = asked {
        return page;
    }
    let (answer, rotated) = match action {
        "disable" | "enable" => {
            let body = request(&PrincipalChange {
                disabled: Field::Given(action == "disable"),
                ..PrincipalChange::default()
            });
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
        "delete" => (
            console.call(visitor, Method::DELETE, &path, None).await,
            false,
        ),
        "save" => {
            let f = &posted.fields;
            let body = request(&PrincipalChange {
                roles: Field::Given(f.all("roles").iter().map(|r| r.to_string()).collect()),
                // An empty OIN field takes the OIN away.
                oin: match field(f.get("oin")) {
                    Field::Absent => Field::Null,
                    oin => oin,
                },
                subscribe_type_prefixes: Field::Given(owned(lines(f.get("subscribeTypePrefixes")))),
                publish_source_prefixes: Field::Given(owned(lines(f.get("publishSourcePrefixes")))),
                ..PrincipalChange::default()
            });
            let answer = console
                .call(visitor, Method::PATCH, &path, Some(&body))
                .await;
            if !answer.ok() {
                return principal_page(
                    &console,
                    visitor,
                    &name,
                    Some(&posted.fields),
                    Some(answer.problem()),
                )
                .await;
            }
            return redirect(&format!("{here}?notice=saved"));
        }
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
        let status = answer.refused_status();
        return principals_page(&console, visitor, Some(shown), status).await;
    }
    let shown = match rotated {
        true => {
            let issued: TokenOut = match answer.parse(visitor) {
                Ok(issued) => issued,
                Err(page) => return page,
            };
            token_shown(lang, &name, &issued.token)
        }
        _ if action == "delete" => layout::notice(true, lang.t("Verwijderd.", "Deleted.")),
        _ => layout::notice(true, lang.t("Opgeslagen.", "Saved.")),
    };
    principals_page(&console, visitor, Some(shown), StatusCode::OK).await
}

/// `GET /console/principals/{name}`: one principal, its rights as a form.
pub(crate) async fn principal(
    State(console): State<Arc<Console>>,
    visitor: Visitor,
    Path(name): Path<String>,
) -> Response {
    principal_page(&console, &visitor, &name, None, None).await
}

/// A principal's page; `posted` and `problem` when the API refused a change.
async fn principal_page(
    console: &Console,
    visitor: &Visitor,
    name: &str,
    posted: Option<&crate::forms::Fields>,
    problem: Option<Problem>,
) -> Response {
    let lang = visitor.lang;
    let answer = console
        .get(visitor, &format!("/v1/principals/{}", encode(name)))
        .await;
    let answer = match answer.checked(visitor) {
        Ok(answer) => answer,
        Err(page) => return page,
    };
    let p: PrincipalOut = match answer.parse(visitor) {
        Ok(p) => p,
        Err(page) => return page,
    };
    let roles: Vec<String> = match posted {
        Some(f) => f.all("roles").into_iter().map(str::to_owned).collect(),
        None => p.roles.clone(),
    };
    let value = |key: &str, stored: String| posted.map_or(stored, |f| f.get(key).to_owned());
    let here = format!("{BASE}/principals/{}", encode(name));
    let saved = visitor.path.contains("notice=saved");
    let content = html! {
        @if saved { (layout::notice(true, lang.t("Opgeslagen.", "Saved."))) }
        @if let Some(problem) = &problem { (layout::problem(lang, problem)) }
        (data_list(vec![
            (lang.t("Naam", "Name"), html! { (name) }),
            (lang.t("Status", "State"), badge(lang, if p.disabled { "disabled" } else { "active" })),
            (lang.t("Herkomst", "Origin"), html! { (layout::origin_label(lang, &p.origin)) }),
        ]))
        form method="post" action=(here) class="kp-form" novalidate {
            (csrf(visitor))
            input type="hidden" name="action" value="save";
            fieldset class="utrecht-form-fieldset" {
                legend class="utrecht-form-fieldset__legend" { (lang.t("Rollen", "Roles")) }
                @for role in Role::ALL {
                    div class="utrecht-form-field utrecht-form-field--checkbox" {
                        input class="utrecht-checkbox utrecht-checkbox--html-input" type="checkbox" name="roles" value=(role.name()) id={ "role-" (role.name()) } checked[roles.iter().any(|r| r == role.name())];
                        label class="utrecht-form-label utrecht-form-label--checkbox" for={ "role-" (role.name()) } { (layout::role_label(lang, role.name())) }
                    }
                }
            }
            div class="utrecht-form-field" {
                label class="utrecht-form-label" for="p-oin" { (lang.t("OIN (optioneel)", "OIN (optional)")) }
                input class="utrecht-textbox utrecht-textbox--html-input" type="text" inputmode="numeric" id="p-oin" name="oin" value=(value("oin", p.oin.clone().unwrap_or_default()));
            }
            div class="utrecht-form-field" {
                label class="utrecht-form-label" for="p-types" { (lang.t("Mag abonneren op typen die beginnen met (één per regel; leeg: alle)", "May subscribe to types starting with (one per line; empty: any)")) }
                textarea class="utrecht-textarea utrecht-textarea--html-textarea" id="p-types" name="subscribeTypePrefixes" rows="3" { (value("subscribeTypePrefixes", p.subscribe_type_prefixes.join("\n"))) }
            }
            div class="utrecht-form-field" {
                label class="utrecht-form-label" for="p-sources" { (lang.t("Mag publiceren met bronnen die beginnen met (één per regel; leeg: alle)", "May publish with sources starting with (one per line; empty: any)")) }
                textarea class="utrecht-textarea utrecht-textarea--html-textarea" id="p-sources" name="publishSourcePrefixes" rows="3" { (value("publishSourcePrefixes", p.publish_source_prefixes.join("\n"))) }
            }
            div { button type="submit" class="utrecht-button utrecht-button--primary-action" { (lang.t("Opslaan", "Save")) } }
        }
        section aria-labelledby="h-danger" {
            h2 class="utrecht-heading-2" id="h-danger" { (lang.t("Verwijderen", "Delete")) }
            form method="post" action=(here) class="kp-actions" {
                (csrf(visitor))
                button type="submit" name="action" value="delete" class="utrecht-button utrecht-button--secondary-action" { (lang.t("Principal verwijderen…", "Delete the principal…")) }
            }
        }
        p class="utrecht-paragraph" { a class="utrecht-link" href={ (BASE) "/principals" } { (lang.t("Terug naar de principals", "Back to the principals")) } }
    };
    let status = if problem.is_some() {
        StatusCode::BAD_REQUEST
    } else {
        StatusCode::OK
    };
    respond(
        status,
        page(lang, Some(visitor), Section::Principals, name, content),
    )
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
    let s: HubStatusOut = answer.parse(&visitor)?;
    let content = html! {
        div id="hub-status" data-refresh="5" aria-live="polite" {
            (data_list(vec![
                (lang.t("Gebeurtenissen in per seconde (laatste minuut)", "Events in per second (last minute)"), html! { (s.events_accepted_per_second) }),
                (lang.t("Afgeleverd per seconde (laatste minuut)", "Delivered per second (last minute)"), html! { (s.events_delivered_per_second) }),
                (lang.t("Achterstand", "Backlog"), html! {
                    (s.backlog) (lang.t(" bezorgingen, ", " deliveries, ")) (layout::bytes(s.backlog_bytes))
                    @if let Some(max) = s.backlog_max_bytes { (lang.t(" van de grens ", " of the limit ")) (layout::bytes(max)) }
                }),
                (lang.t("Neemt publicaties aan", "Accepting publishes"), html! {
                    @if !s.accepting {
                        (badge(lang, "refusing")) " " (s.refusing.as_deref().unwrap_or_default())
                    } @else { (badge(lang, "accepting")) }
                }),
                (lang.t("Oudste wachtende gebeurtenis", "Oldest waiting event"), html! { @if let Some(a) = s.oldest_pending_age_seconds { (a) " s" } @else { "—" } }),
                (lang.t("Dode brieven", "Dead letters"), html! { (s.dead_letters) }),
                (lang.t("Abonnementen", "Subscriptions"), html! {
                    @for (state, count) in &s.subscriptions {
                        (badge(lang, state)) " " (count) " "
                    }
                }),
                (lang.t("Principals", "Principals"), html! { (s.principals) }),
                (lang.t("Opslag", "Store"), html! {
                    @if let Some(store) = &s.store {
                        (layout::bytes(store.bytes)) (lang.t(", waarvan gebeurtenissen ", ", of which events ")) (layout::bytes(store.event_bytes))
                        @if let Some(free) = store.free_bytes { (lang.t("; vrij op de schijf ", "; free on the disk ")) (layout::bytes(free)) }
                    } @else { "—" }
                }),
            ]))
            h2 class="utrecht-heading-2" { (lang.t("Eindpunten met open stroomonderbreker", "Endpoints with an open breaker")) }
            @if s.open_breakers.is_empty() {
                p class="utrecht-paragraph" { (lang.t("Geen: alle eindpunten nemen aan.", "None: every endpoint takes deliveries.")) }
            } @else {
                ul class="utrecht-unordered-list" { @for sink in &s.open_breakers { li class="utrecht-unordered-list__item" { (sink) } } }
            }
            @if !s.stuck_workers.is_empty() {
                h2 class="utrecht-heading-2" { (lang.t("Vastgelopen bezorgers", "Stuck delivery workers")) }
                ul class="utrecht-unordered-list" { @for w in &s.stuck_workers { li class="utrecht-unordered-list__item" { (w) } } }
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
    let mut path = "/v1/audit?pageSize=50&order=newest".to_owned();
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
    let entries: Vec<AuditEntryOut<'static>> = if answer.ok() {
        match answer.parse(&visitor) {
            Ok(entries) => entries,
            Err(page) => return page,
        }
    } else {
        Vec::new()
    };
    let export = match search.strip_prefix('&') {
        Some(search) => format!("{BASE}/audit/export?{search}"),
        None => format!("{BASE}/audit/export"),
    };
    let may_verify = console.state.may_verify_audit(&visitor.principal).is_ok();
    // Only an admin's export without a search is the whole chain; any other is a selection,
    // which is checked entry by entry (`knooppunt audit verify --file … --selection`).
    let whole_chain = may_verify && search.is_empty();
    let content = html! {
        div class="kp-actions" {
            @if may_verify {
                a class="utrecht-link" href={ (BASE) "/audit/verify" } { (lang.t("De keten controleren", "Verify the chain")) }
            }
            a class="utrecht-link" href=(export) download="audittrail.ndjson" { (lang.t("Exporteren (JSON-regels, wat de zoekvelden kiezen)", "Export (JSON lines, what the search fields select)")) }
        }
        @if whole_chain {
            p class="utrecht-paragraph" id="audit-export-check" {
                (lang.t("De export is de hele keten; ", "The export is the whole chain; "))
                code { "knooppunt audit verify --file audittrail.ndjson" }
                (lang.t(" controleert haar.", " verifies it."))
            }
        } @else {
            p class="utrecht-paragraph" id="audit-export-check" {
                (lang.t(
                    "De export is een selectie uit de keten (wat de zoekvelden kiezen, of alleen wat u mag zien). ",
                    "The export is a selection of the chain (what the search fields select, or only what you may see). ",
                ))
                code { "knooppunt audit verify --file audittrail.ndjson --selection" }
                (lang.t(
                    " controleert elke regel tegen haar eigen hash, en de schakel tussen regels die op elkaar volgen. Of er tussen de regels iets ontbreekt, toont alleen de hele keten.",
                    " checks each entry against its own hash, and the link between entries that follow each other. Whether anything is missing between them only the whole chain shows.",
                ))
            }
        }
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
            (layout::table("audit-caption", lang.t("Auditregels, nieuwste eerst", "Audit entries, newest first"), &["#", lang.t("Tijd", "Time"), lang.t("Handeling", "Action"), lang.t("Uitkomst", "Outcome"), lang.t("Wie", "Who"), lang.t("Waarop", "On what"), lang.t("Details", "Details")], entries.iter().map(|e| vec![
                html! { (e.sequence) },
                layout::at(&e.start_time),
                html! { (e.name) },
                html! { (e.status_code) },
                html! { (e.actor.as_deref().unwrap_or("—")) },
                layout::long(e.object.as_deref().unwrap_or("—")),
                details(&e.details),
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

/// A number the answer may leave out, or a dash.
fn number(value: Option<u64>) -> Markup {
    match value {
        Some(n) => html! { (n) },
        None => html! { "—" },
    }
}

/// An audit entry's details, readable: each member as a term and its value (text as it
/// is, anything else as compact JSON).
fn details(details: &Value) -> Markup {
    match details.as_object() {
        // The trail's own member names and values, as the API records them: English.
        Some(members) if !members.is_empty() => html! {
            dl class="kp-details" lang="en" {
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

/// `GET /console/audit/verify?head=<sequence>:<hash>`: the chain checked, whole, and against
/// a head kept elsewhere when one is given; the current head, to keep.
pub(crate) async fn verify_audit(
    State(console): State<Arc<Console>>,
    visitor: Visitor,
    Query(query): Params,
) -> Result<Response, Response> {
    let lang = visitor.lang;
    let head_asked = query
        .get("head")
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty());
    let path = match &head_asked {
        Some(head) => format!("/v1/audit/verify?head={}", encode(head)),
        None => "/v1/audit/verify".to_owned(),
    };
    let report = console.get(&visitor, &path).await;
    let head: AuditHead = console
        .get(&visitor, "/v1/audit/head")
        .await
        .checked(&visitor)?
        .parse(&visitor)?;
    let r: Option<AuditVerification> = if report.ok() {
        Some(report.parse(&visitor)?)
    } else {
        None
    };
    let content = html! {
        form method="get" action={ (BASE) "/audit/verify" } class="kp-form" {
            div class="utrecht-form-field" {
                label class="utrecht-form-label" for="v-head" { (lang.t("Eerder bewaarde kop (optioneel: volgnummer:hash)", "A head kept earlier (optional: sequence:hash)")) }
                div class="utrecht-form-field-description" id="v-head-hint" {
                    (lang.t("Met een kop die u buiten de hub bewaarde, ziet u ook of er aan het eind regels zijn weggehaald.", "With a head you kept outside the hub, you also see whether entries were removed from the end."))
                }
                input class="utrecht-textbox utrecht-textbox--html-input" type="text" id="v-head" name="head" aria-describedby="v-head-hint" value=(head_asked.clone().unwrap_or_default()) spellcheck="false";
            }
            div { button type="submit" class="utrecht-button utrecht-button--primary-action" { (lang.t("Controleren", "Verify")) } }
        }
        @if let Some(r) = &r {
            @if r.intact {
                (layout::notice(true, lang.t("De keten is heel: geen regel is veranderd of weggehaald.", "The chain is intact: no entry was changed or removed.")))
            } @else {
                div class="utrecht-alert utrecht-alert--error" role="alert" {
                    div class="utrecht-alert__message" {
                        p class="utrecht-paragraph" { strong { (lang.t("De keten is niet heel.", "The chain is not intact.")) } }
                        @if let Some(why) = &r.why { p class="utrecht-paragraph" lang="en" { (why) } }
                    }
                }
            }
            (data_list(vec![
                (lang.t("Gecontroleerde regels", "Entries checked"), html! { (r.entries) }),
                (lang.t("Oudste bewaarde regel", "Oldest entry kept"), number(r.first)),
                (lang.t("Nieuwste regel", "Newest entry"), number(r.last)),
                (lang.t("Eerste gebroken regel", "First broken entry"), number(r.broken_at)),
                (lang.t("Eind weggehaald", "End removed"), html! { @if r.truncated == Some(true) { (lang.t("ja", "yes")) } @else if head_asked.is_some() { (lang.t("nee", "no")) } @else { "—" } }),
            ]))
        } @else {
            (layout::problem(lang, &report.problem()))
        }
        section aria-labelledby="h-head" {
            h2 class="utrecht-heading-2" id="h-head" { (lang.t("De kop van nu", "The head now")) }
            p class="utrecht-paragraph" { (lang.t("Bewaar deze buiten de hub; controleer er later tegen.", "Keep this outside the hub; verify against it later.")) }
            p class="utrecht-paragraph kp-secret" id="audit-head" { (head.head.as_deref().unwrap_or("—")) }
        }
        p class="utrecht-paragraph" { a class="utrecht-link" href={ (BASE) "/audit" } { (lang.t("Terug naar de audittrail", "Back to the audit trail")) } }
    };
    Ok(respond(
        StatusCode::OK,
        page(
            lang,
            Some(&visitor),
            Section::Audit,
            lang.t("Audittrail controleren", "Verify the audit trail"),
            content,
        ),
    ))
}

/// `GET /console/audit/export`: the entries the search fields select, oldest first, as the
/// API's JSON lines (the whole chain only for an admin without a search: any other export is
/// a selection, which `knooppunt audit verify --file … --selection` checks), streamed a page of 1,000
/// at a time, so that no export holds more than a page in memory. A refusal of the first
/// page is a page that says why; one later (rare: the store failing) ends the download
/// short, which the verifier reports.
pub(crate) async fn export_audit(
    State(console): State<Arc<Console>>,
    visitor: Visitor,
    Query(query): Params,
) -> Result<Response, Response> {
    let mut path = "/v1/audit?pageSize=1000".to_owned();
    for key in ["name", "actor", "object", "from", "until"] {
        if let Some(value) = query.get(key).map(|v| v.trim()).filter(|v| !v.is_empty()) {
            path.push_str(&format!("&{key}={}", encode(value)));
        }
    }
    let first = export_page(&console, &visitor, &path).await;
    let (bytes, mut next) = match first {
        Ok(page) => page,
        Err((status, problem)) => {
            return Err(layout::api_refusal(
                visitor.lang,
                &visitor,
                status,
                &problem,
            ));
        }
    };
    let (send, receive) = tokio::sync::mpsc::channel::<axum::body::Bytes>(1);
    tokio::spawn(async move {
        if send.send(bytes).await.is_err() {
            return;
        }
        while let Some(cursor) = next.take() {
            let page = format!("{path}&cursor={}", encode(&cursor));
            let Ok((bytes, cursor)) = export_page(&console, &visitor, &page).await else {
                return;
            };
            // The download was abandoned: stop reading.
            if send.send(bytes).await.is_err() {
                return;
            }
            next = cursor;
        }
    });
    Ok((
        [
            (http::header::CONTENT_TYPE, "application/x-ndjson"),
            (
                http::header::CONTENT_DISPOSITION,
                "attachment; filename=\"audittrail.ndjson\"",
            ),
        ],
        axum::body::Body::new(Pages(receive)),
    )
        .into_response())
}

/// One page of the export: its lines and the cursor of the next, or the API's refusal.
async fn export_page(
    console: &Console,
    visitor: &Visitor,
    path: &str,
) -> Result<(axum::body::Bytes, Option<String>), (StatusCode, Problem)> {
    let (status, headers, bytes) = console.fetch(visitor, path, "application/x-ndjson").await;
    if !status.is_success() {
        let problem = Problem::of(&serde_json::from_slice(&bytes).unwrap_or(Value::Null));
        return Err((status, problem));
    }
    let next = crate::Answer {
        status,
        headers,
        body: Value::Null,
    }
    .next_cursor();
    Ok((bytes, next))
}

/// The export's pages as a response body, as the task reading them sends them.
struct Pages(tokio::sync::mpsc::Receiver<axum::body::Bytes>);

impl http_body::Body for Pages {
    type Data = axum::body::Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        self.0
            .poll_recv(cx)
            .map(|page| page.map(|bytes| Ok(http_body::Frame::data(bytes))))
    }
}
