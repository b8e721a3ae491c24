//! The catalog's pages: every event type the hub knows, for everyone signed in (with its
//! description, schema and approval policy, and the way to ask access: a subscription to
//! it), and, for its data owner, creating, editing and deleting an entry.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::response::Response;
use http::{Method, StatusCode};
use maud::{Markup, html};
use serde_json::Value;

use crate::forms::{Fields, Posted, Problem, encode};
use crate::forms::{field, request};
use crate::identity::Role;
use crate::layout::{self, Ask, Section, csrf, data_list, json_block, page, respond};
use crate::{Answer, BASE, Console, Lang, Visitor, redirect};
use knooppunt_api::EventTypeOut;
use knooppunt_api::{EventTypeIn, Field};

type Params = Query<HashMap<String, String>>;

/// An approval policy in words.
pub(crate) fn policy(lang: Lang, approval: &str) -> &'static str {
    match approval {
        "approval-required" => lang.t(
            "toestemming van de gegevenseigenaar nodig",
            "the data owner's approval required",
        ),
        _ => lang.t(
            "open: elk abonnement ontvangt ze",
            "open: every subscription receives them",
        ),
    }
}

/// A schema check mode in words.
fn check_mode(lang: Lang, mode: &str) -> &'static str {
    match mode {
        "enforce" => lang.t(
            "afdwingen: afwijkende gegevens worden geweigerd",
            "enforce: data that differs is refused",
        ),
        "warn" => lang.t(
            "waarschuwen: afwijkende gegevens worden aangenomen en gemeld",
            "warn: data that differs is taken and reported",
        ),
        _ => lang.t("uit", "off"),
    }
}

/// Whether the visitor may change `entry`: its owner, or an administrator.
fn may_change(visitor: &Visitor, entry: &EventTypeOut) -> bool {
    visitor.principal.is_admin() || entry.owner == visitor.principal.name
}

/// `GET /console/eventtypes`: the catalog; `?mine=1` for an owner's own entries.
pub(crate) async fn list(
    State(console): State<Arc<Console>>,
    visitor: Visitor,
    Query(query): Params,
) -> Result<Response, Response> {
    let lang = visitor.lang;
    let path = layout::with_cursor("/v1/eventtypes?pageSize=100", &query);
    let answer = console.get(&visitor, &path).await.checked(&visitor)?;
    let mine = query.get("mine").is_some_and(|m| m == "1");
    let publisher = visitor.has(Role::Publisher);
    let mut entries: Vec<EventTypeOut> = answer.parse(&visitor)?;
    entries.retain(|e| !mine || e.owner == visitor.principal.name);
    let notice = match query.get("notice").map(String::as_str) {
        Some("deleted") => Some(lang.t(
            "Het gebeurtenistype is verwijderd.",
            "The event type was deleted.",
        )),
        _ => None,
    };
    let here = if mine {
        format!("{BASE}/eventtypes?mine=1")
    } else {
        format!("{BASE}/eventtypes")
    };
    let content = html! {
        @if let Some(notice) = notice { (layout::notice(true, notice)) }
        p class="utrecht-paragraph" { (lang.t(
            "De gebeurtenistypen die organisaties via de hub publiceren, met wie er de gegevenseigenaar van is en of er toestemming nodig is.",
            "The event types organisations publish through the hub, with their data owner and whether approval is needed.")) }
        div class="kp-actions" {
            @if publisher {
                a class="utrecht-button-link utrecht-button-link--html-a utrecht-button-link--primary-action" href={ (BASE) "/eventtypes/new" } {
                    (lang.t("Nieuw gebeurtenistype", "New event type"))
                }
                @if mine {
                    a class="utrecht-link" href={ (BASE) "/eventtypes" } { (lang.t("Alle gebeurtenistypen", "All event types")) }
                } @else {
                    a class="utrecht-link" href={ (BASE) "/eventtypes?mine=1" } { (lang.t("Alleen de mijne", "Only mine")) }
                }
            }
        }
        @if entries.is_empty() {
            p class="utrecht-paragraph" { (lang.t("Geen gebeurtenistypen.", "No event types.")) }
        } @else {
            (layout::table("catalog-caption", lang.t("Gebeurtenistypen", "Event types"),
                &[lang.t("Type", "Type"), lang.t("Eigenaar", "Owner"), lang.t("Toegang", "Access"), lang.t("Omschrijving", "Description")],
                entries.iter().map(|e| vec![
                    html! {
                        a class="utrecht-link kp-break" href={ (BASE) "/eventtypes/" (encode(&e.id)) } { (e.event_type) }
                        @if e.type_match == "prefix" { " " small { (lang.t("(en alles wat ermee begint)", "(and all that start with it)")) } }
                        @if e.deprecated { " " span class="utrecht-status-badge utrecht-status-badge--warning" { (lang.t("verouderd", "deprecated")) } }
                    },
                    html! { (e.owner) },
                    html! { (policy(lang, &e.approval)) },
                    html! { (e.description) },
                ]).collect()))
        }
        (layout::next_page(lang, &here, answer.next_cursor().as_deref()))
    };
    Ok(respond(
        StatusCode::OK,
        page(
            lang,
            Some(&visitor),
            Section::EventTypes,
            lang.t("Gebeurtenistypen", "Event types"),
            content,
        ),
    ))
}

/// `GET /console/eventtypes/{id}`: one entry, everything it says.
pub(crate) async fn detail(
    State(console): State<Arc<Console>>,
    visitor: Visitor,
    Path(id): Path<String>,
    Query(query): Params,
) -> Result<Response, Response> {
    let lang = visitor.lang;
    let answer = console
        .get(&visitor, &format!("/v1/eventtypes/{}", encode(&id)))
        .await
        .checked(&visitor)?;
    let e: EventTypeOut = answer.parse(&visitor)?;
    let page_path = format!("{BASE}/eventtypes/{}", encode(&id));
    let link = |url: &Option<String>| match url {
        Some(url) => {
            html! { a class="utrecht-link kp-break" href=(url) rel="noopener noreferrer" { (url) } }
        }
        None => html! { "—" },
    };
    let prefix = e.type_match == "prefix";
    let approval_required = e.approval == "approval-required";
    let mut items = vec![
        (
            lang.t("Type", "Type"),
            html! {
                span class="kp-break" { (e.event_type) }
                @if prefix { " " (lang.t("(en alles wat ermee begint)", "(and all that start with it)")) }
            },
        ),
        (
            lang.t("Bron (begin)", "Source (prefix)"),
            layout::long(&e.source),
        ),
        (
            lang.t("Gegevenseigenaar", "Data owner"),
            html! { (e.owner) },
        ),
        (
            lang.t("Toegang", "Access"),
            html! { (policy(lang, &e.approval)) },
        ),
        (
            lang.t("Omschrijving", "Description"),
            html! { (e.description) },
        ),
        (
            lang.t("Documentatie", "Documentation"),
            link(&e.documentation),
        ),
        (
            lang.t("Dataschema (URI)", "Data schema (URI)"),
            link(&e.dataschema),
        ),
        (
            lang.t("Controle op het schema", "Schema check"),
            html! { (check_mode(lang, &e.schema_check)) },
        ),
        (
            lang.t("Verouderd", "Deprecated"),
            html! { (if e.deprecated { lang.t("ja", "yes") } else { lang.t("nee", "no") }) },
        ),
    ];
    if !e.kenmerken.is_empty() {
        items.push((
            lang.t("Kenmerken", "Kenmerken"),
            html! { (e.kenmerken.join(", ")) },
        ));
    }
    items.push((lang.t("Bijgewerkt", "Updated"), layout::at(&e.updated)));
    let subscribe = format!("{BASE}/subscriptions/new?type={}", encode(&e.event_type));
    let notice = match query.get("notice").map(String::as_str) {
        Some("created") => Some(lang.t(
            "Het gebeurtenistype is aangemaakt.",
            "The event type was created.",
        )),
        Some("saved") => Some(lang.t("De wijzigingen zijn opgeslagen.", "The changes were saved.")),
        _ => None,
    };
    let content = html! {
        @if let Some(notice) = notice { (layout::notice(true, notice)) }
        (data_list(items))
        @if let Some(schema) = &e.schema {
            section aria-labelledby="h-schema" {
                h2 class="utrecht-heading-2" id="h-schema" { (lang.t("Schema van de gegevens", "Schema of the data")) }
                (json_block(schema))
            }
        }
        div class="kp-actions" {
            @if visitor.has(Role::Subscriber) && !prefix {
                a class="utrecht-button-link utrecht-button-link--html-a utrecht-button-link--primary-action" href=(subscribe) {
                    @if approval_required { (lang.t("Toegang vragen", "Ask access")) } @else { (lang.t("Abonneren", "Subscribe")) }
                }
            }
            @if may_change(&visitor, &e) {
                a class="utrecht-link" href={ (page_path) "/edit" } { (lang.t("Bewerken", "Edit")) }
                form method="post" action={ (page_path) "/delete" } class="kp-inline" {
                    (csrf(&visitor))
                    button type="submit" class="utrecht-button utrecht-button--secondary-action" { (lang.t("Verwijderen", "Delete")) }
                }
            }
        }
        @if approval_required && visitor.has(Role::Subscriber) {
            p class="utrecht-paragraph" { (lang.t(
                "Toegang vragen is een abonnement op dit type maken: de gegevenseigenaar ziet het verzoek en beslist; tot dan ontvangt het abonnement deze gebeurtenissen niet.",
                "Asking access is making a subscription to this type: the data owner sees the request and decides; until then the subscription does not receive these events.")) }
        }
    };
    Ok(respond(
        StatusCode::OK,
        page(
            lang,
            Some(&visitor),
            Section::EventTypes,
            &e.event_type,
            content,
        ),
    ))
}

/// The entry a form describes, as the API's own request type.
fn body_of(fields: &Fields, lang: Lang) -> Result<Value, Problem> {
    let kenmerken: Vec<String> = fields
        .get("kenmerken")
        .split([',', '\n'])
        .map(str::trim)
        .filter(|k| !k.is_empty())
        .map(str::to_owned)
        .collect();
    let schema = match fields.get("schema").trim() {
        "" => Field::Absent,
        schema => Field::Given(serde_json::from_str::<Value>(schema).map_err(|e| {
            Problem {
                code: None,
                detail: lang
                    .t(
                        "Het schema is geen geldige JSON.",
                        "The schema is not valid JSON.",
                    )
                    .into(),
                params: vec![("schema".into(), e.to_string())],
            }
        })?),
    };
    let entry = EventTypeIn {
        source: field(fields.get("source")),
        event_type: field(fields.get("type")),
        description: field(fields.get("description")),
        documentation: field(fields.get("documentation")),
        dataschema: field(fields.get("dataschema")),
        type_match: Field::Given(fields.get("typeMatch").to_owned()),
        approval: Field::Given(fields.get("approval").to_owned()),
        schema_check: Field::Given(fields.get("schemaCheck").to_owned()),
        deprecated: Field::Given(fields.get("deprecated") == "yes"),
        kenmerken: if kenmerken.is_empty() {
            Field::Absent
        } else {
            Field::Given(kenmerken)
        },
        schema,
        ..EventTypeIn::default()
    };
    Ok(request(&entry))
}

/// The entry form, with `values` (what was posted, or the stored entry).
fn form(
    visitor: &Visitor,
    action: &str,
    values: &HashMap<&str, String>,
    problem: Option<&Problem>,
) -> Markup {
    let lang = visitor.lang;
    let value = |key: &str| values.get(key).cloned().unwrap_or_default();
    let invalid = |name: &str| {
        problem.is_some_and(|p| {
            p.params
                .iter()
                .any(|(n, _)| n == name || n.starts_with(&format!("{name}.")))
        })
    };
    let field = |name: &str, label: &str, hint: Option<&str>, kind: &str| {
        let id = format!("e-{name}");
        let hint_id = format!("{id}-hint");
        html! {
            div class={ "utrecht-form-field" @if invalid(name) { " utrecht-form-field--invalid" } } {
                label class="utrecht-form-label" for=(id) { (label) }
                @if let Some(hint) = hint { div class="utrecht-form-field-description" id=(hint_id) { (hint) } }
                @if kind == "textarea" {
                    textarea class="utrecht-textarea utrecht-textarea--html-textarea" id=(id) name=(name) rows="4"
                        aria-invalid=(invalid(name)) aria-describedby=[hint.map(|_| hint_id.clone())] spellcheck="false" { (value(name)) }
                } @else {
                    input class="utrecht-textbox utrecht-textbox--html-input" type=(kind) id=(id) name=(name) value=(value(name))
                        aria-invalid=(invalid(name)) aria-describedby=[hint.map(|_| hint_id.clone())];
                }
            }
        }
    };
    let select = |name: &str, label: &str, options: &[(&str, &str)]| {
        let id = format!("e-{name}");
        let current = value(name);
        html! {
            div class="utrecht-form-field" {
                label class="utrecht-form-label" for=(id) { (label) }
                select class="utrecht-select utrecht-select--html-select" id=(id) name=(name) {
                    @for (option, words) in options {
                        option value=(option) selected[current == *option] { (words) }
                    }
                }
            }
        }
    };
    html! {
        @if let Some(problem) = problem { (layout::problem(lang, problem)) }
        form method="post" action=(action) class="kp-form" novalidate {
            (csrf(visitor))
            (field("type", lang.t("Type", "Type"), Some(lang.t("Bijvoorbeeld nl.brp.persoon-verhuisd", "For example nl.brp.persoon-verhuisd")), "text"))
            (select("typeMatch", lang.t("Geldt voor", "Covers"), &[("exact", lang.t("precies dit type", "exactly this type")), ("prefix", lang.t("elk type dat hiermee begint", "every type that starts with this"))]))
            (field("source", lang.t("Bron (begin)", "Source (prefix)"), Some(lang.t("Een bron die u mag publiceren, bijvoorbeeld urn:nld:oin:…:systeem:BRP", "A source you may publish, for example urn:nld:oin:…:systeem:BRP")), "text"))
            (field("description", lang.t("Omschrijving", "Description"), None, "textarea"))
            (select("approval", lang.t("Toegang", "Access"), &[("open", policy(lang, "open")), ("approval-required", policy(lang, "approval-required"))]))
            (field("documentation", lang.t("Documentatie (URL, optioneel)", "Documentation (URL, optional)"), None, "url"))
            (field("dataschema", lang.t("Dataschema (URI, optioneel)", "Data schema (URI, optional)"), None, "url"))
            (field("schema", lang.t("JSON Schema van de gegevens (optioneel)", "JSON Schema of the data (optional)"), Some(lang.t("De hub controleert de gegevens van elke gebeurtenis ermee, zoals hieronder gekozen.", "The hub checks each event's data with it, as chosen below.")), "textarea"))
            (select("schemaCheck", lang.t("Controle op het schema", "Schema check"), &[("off", check_mode(lang, "off")), ("warn", check_mode(lang, "warn")), ("enforce", check_mode(lang, "enforce"))]))
            (field("kenmerken", lang.t("Kenmerken (één per regel, optioneel)", "Kenmerken (one per line, optional)"), Some(lang.t("De attributen waarop abonnees mogen filteren.", "The attributes subscribers may filter on.")), "textarea"))
            div class="utrecht-form-field utrecht-form-field--checkbox" {
                input class="utrecht-checkbox utrecht-checkbox--html-input" type="checkbox" id="e-deprecated" name="deprecated" value="yes" checked[value("deprecated") == "yes"];
                label class="utrecht-form-label utrecht-form-label--checkbox" for="e-deprecated" { (lang.t("Verouderd: abonnees horen over te stappen", "Deprecated: subscribers should move on")) }
            }
            div { button type="submit" class="utrecht-button utrecht-button--primary-action" { (lang.t("Opslaan", "Save")) } }
        }
    }
}

fn values_of_entry(e: &EventTypeOut) -> HashMap<&'static str, String> {
    let text = |value: &Option<String>| value.clone().unwrap_or_default();
    let mut values = HashMap::from([
        ("source", e.source.clone()),
        ("type", e.event_type.clone()),
        ("description", e.description.clone()),
        ("documentation", text(&e.documentation)),
        ("dataschema", text(&e.dataschema)),
        ("typeMatch", e.type_match.to_string()),
        ("approval", e.approval.to_string()),
        ("schemaCheck", e.schema_check.to_string()),
        ("kenmerken", e.kenmerken.join("\n")),
    ]);
    if e.deprecated {
        values.insert("deprecated", "yes".into());
    }
    if let Some(schema) = &e.schema {
        values.insert(
            "schema",
            serde_json::to_string_pretty(schema).unwrap_or_default(),
        );
    }
    values
}

fn values_of_fields(fields: &Fields) -> HashMap<&'static str, String> {
    [
        "source",
        "type",
        "description",
        "documentation",
        "dataschema",
        "typeMatch",
        "approval",
        "schemaCheck",
        "deprecated",
        "kenmerken",
        "schema",
    ]
    .into_iter()
    .map(|key| (key, fields.get(key).to_owned()))
    .collect()
}

fn form_page(visitor: &Visitor, status: StatusCode, title: &str, form: Markup) -> Response {
    respond(
        status,
        page(
            visitor.lang,
            Some(visitor),
            Section::EventTypes,
            title,
            form,
        ),
    )
}

/// `GET /console/eventtypes/new`.
pub(crate) async fn new_form(visitor: Visitor) -> Response {
    let lang = visitor.lang;
    let values = HashMap::from([
        ("typeMatch", "exact".to_owned()),
        ("approval", "open".to_owned()),
        ("schemaCheck", "off".to_owned()),
    ]);
    let form = form(&visitor, &format!("{BASE}/eventtypes"), &values, None);
    form_page(
        &visitor,
        StatusCode::OK,
        lang.t("Nieuw gebeurtenistype", "New event type"),
        form,
    )
}

/// `GET /console/eventtypes/{id}/edit`.
pub(crate) async fn edit_form(
    State(console): State<Arc<Console>>,
    visitor: Visitor,
    Path(id): Path<String>,
) -> Result<Response, Response> {
    let lang = visitor.lang;
    if let Err(why) = console.state.catalog().may_change(&visitor.principal, &id) {
        return Err(crate::layout::api_refusal(
            lang,
            &visitor,
            StatusCode::FORBIDDEN,
            &crate::forms::Problem {
                code: Some("forbidden".into()),
                detail: why.to_string(),
                params: Vec::new(),
            },
        ));
    }
    let answer = console
        .get(&visitor, &format!("/v1/eventtypes/{}", encode(&id)))
        .await
        .checked(&visitor)?;
    let form = form(
        &visitor,
        &format!("{BASE}/eventtypes/{}", encode(&id)),
        &values_of_entry(&answer.parse(&visitor)?),
        None,
    );
    Ok(form_page(
        &visitor,
        StatusCode::OK,
        lang.t("Gebeurtenistype bewerken", "Edit the event type"),
        form,
    ))
}

/// The answer to a create or an edit: to the entry, or the form again with the problem.
fn saved(
    answer: Answer,
    visitor: &Visitor,
    action: &str,
    fields: &Fields,
    title: &str,
    notice: &str,
) -> Response {
    if !answer.ok() {
        let status = answer.refused_status();
        let form = form(
            visitor,
            action,
            &values_of_fields(fields),
            Some(&answer.problem()),
        );
        return form_page(visitor, status, title, form);
    }
    match answer.parse::<EventTypeOut>(visitor) {
        Ok(entry) => redirect(&format!(
            "{BASE}/eventtypes/{}?notice={notice}",
            encode(&entry.id)
        )),
        Err(page) => page,
    }
}

/// `POST /console/eventtypes`.
pub(crate) async fn create(State(console): State<Arc<Console>>, posted: Posted) -> Response {
    let lang = posted.visitor.lang;
    let to = (Method::POST, "/v1/eventtypes".to_owned());
    let title = lang.t("Nieuw gebeurtenistype", "New event type");
    submit(
        &console,
        &posted,
        &format!("{BASE}/eventtypes"),
        title,
        to,
        "created",
    )
    .await
}

/// `POST /console/eventtypes/{id}`: replaces the entry.
pub(crate) async fn update(
    State(console): State<Arc<Console>>,
    Path(id): Path<String>,
    posted: Posted,
) -> Response {
    let lang = posted.visitor.lang;
    let to = (Method::PUT, format!("/v1/eventtypes/{}", encode(&id)));
    let title = lang.t("Gebeurtenistype bewerken", "Edit the event type");
    let action = format!("{BASE}/eventtypes/{}", encode(&id));
    submit(&console, &posted, &action, title, to, "saved").await
}

/// The posted form sent `to` the API; the form again with what was wrong, or the entry.
async fn submit(
    console: &Console,
    posted: &Posted,
    action: &str,
    title: &str,
    (method, path): (Method, String),
    notice: &str,
) -> Response {
    let visitor = &posted.visitor;
    let body = match body_of(&posted.fields, visitor.lang) {
        Ok(body) => body,
        Err(problem) => {
            let values = values_of_fields(&posted.fields);
            let form = form(visitor, action, &values, Some(&problem));
            return form_page(visitor, StatusCode::BAD_REQUEST, title, form);
        }
    };
    let answer = console.call(visitor, method, &path, Some(&body)).await;
    saved(answer, visitor, action, &posted.fields, title, notice)
}

/// `POST /console/eventtypes/{id}/delete`, after saying what that means.
pub(crate) async fn delete(
    State(console): State<Arc<Console>>,
    Path(id): Path<String>,
    posted: Posted,
) -> Result<Response, Response> {
    let visitor = &posted.visitor;
    let lang = visitor.lang;
    let page_path = format!("{BASE}/eventtypes/{}", encode(&id));
    console
        .confirmed(
            &posted,
            Ask {
                action: &format!("{page_path}/delete"),
                title: lang.t("Gebeurtenistype verwijderen?", "Delete the event type?"),
                consequences: &[
                    lang.t(
                        "Het verdwijnt uit de catalogus, met alle besluiten over toegang erop. Zonder dit item houdt de hub deze gebeurtenissen niet meer tegen: elk abonnement op het type ontvangt ze, tenzij een ander item met toestemming ze dekt. Hun gegevens worden er niet meer op gecontroleerd.",
                        "It leaves the catalog, with every access decision on it. Without this entry the hub no longer holds these events back: every subscription to the type receives them, unless another entry that needs approval covers them. Their data is no longer checked against it.",
                    ),
                    lang.t("Dit kan niet ongedaan worden gemaakt.", "This cannot be undone."),
                ],
                button: lang.t("Verwijderen", "Delete"),
                back: &page_path,
            },
            Method::DELETE,
            &format!("/v1/eventtypes/{}", encode(&id)),
        )
        .await?;
    Ok(redirect(&format!("{BASE}/eventtypes?notice=deleted")))
}
