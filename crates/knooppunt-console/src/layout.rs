//! The page shell every console page shares (skip link, header with the navigation the
//! visitor's roles allow, language switch, sign-out, main, footer) and the small pieces
//! pages are built of, in the NL Design System's (Utrecht) component classes.

use axum::response::{Html, IntoResponse, Response};
use http::{HeaderMap, StatusCode};
use maud::{DOCTYPE, Markup, html};
use serde_json::Value;

use crate::forms::{CSRF_FIELD, Problem, encode};
use crate::identity::Role;
use crate::{BASE, Lang, Visitor, assets, lang_of};

/// The navigation's sections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Section {
    Home,
    Subscriptions,
    EventTypes,
    Approvals,
    Receipts,
    Principals,
    Status,
    Audit,
    None,
}

/// The sections `visitor` may reach: what the API lets its roles do.
fn sections(visitor: &Visitor) -> Vec<(Section, &'static str, &'static str, &'static str)> {
    let mut sections = vec![(Section::Home, "", "Overzicht", "Overview")];
    if visitor.has(Role::Subscriber) {
        sections.push((
            Section::Subscriptions,
            "/subscriptions",
            "Abonnementen",
            "Subscriptions",
        ));
    }
    sections.push((
        Section::EventTypes,
        "/eventtypes",
        "Gebeurtenistypen",
        "Event types",
    ));
    if visitor.has(Role::Publisher) {
        sections.push((
            Section::Approvals,
            "/approvals",
            "Goedkeuringen",
            "Approvals",
        ));
        sections.push((Section::Receipts, "/receipts", "Ontvangsten", "Receipts"));
    }
    if visitor.principal.is_admin() {
        sections.push((
            Section::Principals,
            "/principals",
            "Principals",
            "Principals",
        ));
        sections.push((Section::Status, "/status", "Hubstatus", "Hub status"));
        sections.push((Section::Audit, "/audit", "Audittrail", "Audit trail"));
    }
    sections
}

/// A whole page.
pub(crate) fn page(
    lang: Lang,
    visitor: Option<&Visitor>,
    section: Section,
    title: &str,
    content: Markup,
) -> Markup {
    let back = visitor.map_or_else(|| format!("{BASE}/login"), |v| v.path.clone());
    html! {
        (DOCTYPE)
        html lang=(lang.code()) class="utrecht-root voorbeeld-theme" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " — Knooppunt" }
                link rel="stylesheet" href=(assets::url("voorbeeld-theme.css"));
                // The operator's theme, if any: its tokens over the built-in ones.
                link rel="stylesheet" href={ (BASE) "/assets/theme.css" };
                link rel="stylesheet" href=(assets::url("utrecht-components.css"));
                link rel="stylesheet" href=(assets::url("console.css"));
                script src=(assets::url("console.js")) defer {}
            }
            body class="utrecht-page-body utrecht-document voorbeeld-theme" {
                a class="utrecht-skip-link utrecht-skip-link--visible-on-focus" href="#inhoud" {
                    (lang.t("Naar de inhoud", "Skip to content"))
                }
                header class="utrecht-page-header kp-header" {
                    div class="kp-header__bar" {
                        a class="kp-brand utrecht-link" href=(BASE) { "Knooppunt" }
                        div class="kp-header__tools" {
                            @if let Some(visitor) = visitor {
                                span class="kp-who" {
                                    (lang.t("Ingelogd als ", "Signed in as "))
                                    strong { (visitor.principal.name) }
                                }
                            }
                            a class="utrecht-link" lang=(lang.other().code())
                                href={ (BASE) "/language?to=" (lang.other().code()) "&back=" (encode(&back)) } {
                                (lang.other().name())
                            }
                            @if let Some(visitor) = visitor {
                                form method="post" action={ (BASE) "/logout" } class="kp-inline" {
                                    (csrf(visitor))
                                    button type="submit" class="utrecht-button utrecht-button--secondary-action" {
                                        (lang.t("Uitloggen", "Sign out"))
                                    }
                                }
                            }
                        }
                    }
                    @if let Some(visitor) = visitor {
                        nav class="utrecht-nav-bar kp-nav" aria-label=(lang.t("Hoofdmenu", "Main menu")) {
                            div class="utrecht-nav-bar__content" {
                                ul class="utrecht-nav-list" {
                                    @for (s, path, nl, en) in sections(visitor) {
                                        li class="utrecht-nav-list__item" {
                                            @if s == section {
                                                a class="utrecht-nav-list__link kp-current" href={ (BASE) (path) } aria-current="page" { (lang.t(nl, en)) }
                                            } @else {
                                                a class="utrecht-nav-list__link" href={ (BASE) (path) } { (lang.t(nl, en)) }
                                            }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
                main class="utrecht-page-content kp-main" id="inhoud" tabindex="-1" {
                    h1 class="utrecht-heading-1" { (title) }
                    (content)
                }
                footer class="utrecht-page-footer kp-footer" {
                    p class="utrecht-paragraph" {
                        (lang.t("Knooppunt — de gebeurtenissenhub van de overheid. De API staat beschreven in ",
                                "Knooppunt — the government's event hub. The API is described in "))
                        a class="utrecht-link" href="/v1/openapi.json" { "/v1/openapi.json" }
                        "."
                    }
                }
            }
        }
    }
}

/// A page as a response.
pub(crate) fn respond(status: StatusCode, markup: Markup) -> Response {
    (status, Html(markup.into_string())).into_response()
}

/// The hidden CSRF field of a form.
pub(crate) fn csrf(visitor: &Visitor) -> Markup {
    html! { input type="hidden" name=(CSRF_FIELD) value=(visitor.csrf); }
}

/// A notice after an action.
pub(crate) fn notice(ok: bool, text: &str) -> Markup {
    html! {
        div class={ "utrecht-alert " (if ok { "utrecht-alert--ok" } else { "utrecht-alert--warning" }) } role="status" {
            div class="utrecht-alert__message" { p class="utrecht-paragraph" { (text) } }
        }
    }
}

/// The API's problem, with what to fix: what its code means in the page's language, then
/// the API's own detail and each invalid parameter (in English, and marked so on a Dutch
/// page).
pub(crate) fn problem(lang: Lang, problem: &Problem) -> Markup {
    let english = problem.code.is_some() && lang == Lang::Nl;
    let meaning = problem.code.as_deref().map(|code| {
        crate::texts::problem(lang, code)
            .unwrap_or(lang.t("De hub weigerde dit", "The hub refused this"))
    });
    html! {
        div class="utrecht-alert utrecht-alert--error" role="alert" {
            div class="utrecht-alert__message" {
                p class="utrecht-paragraph" {
                    strong { (lang.t("Dat ging niet: ", "That did not work: ")) }
                    @if let Some(meaning) = meaning { (meaning) "." } @else { (problem.detail) }
                }
                @if meaning.is_some() && !problem.detail.is_empty() {
                    p class="utrecht-paragraph" {
                        @if english {
                            @if let Some(dutch) = crate::texts::refusal(&problem.detail) { (dutch) }
                            @else { (lang.t("Toelichting van de hub (in het Engels): ", "")) span lang="en" { (problem.detail) } }
                        }
                        @else { (problem.detail) }
                    }
                }
                @if !problem.params.is_empty() {
                    ul class="utrecht-unordered-list" {
                        @for (name, reason) in &problem.params {
                            li class="utrecht-unordered-list__item" {
                                code class="utrecht-code" { (name) } ": "
                                @if english {
                                    @if let Some(dutch) = crate::texts::refusal(reason) { (dutch) }
                                    @else { span lang="en" { (reason) } }
                                }
                                @else { (reason) }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// [`at`] of an optional member.
pub(crate) fn maybe_at(text: Option<&str>) -> Markup {
    text.map_or_else(|| html! { "—" }, at)
}

/// A time of an answer (RFC 3339), readable, as a `time` element.
pub(crate) fn at(text: &str) -> Markup {
    let shown = text.replace('T', " ").replace('Z', " UTC");
    html! { time datetime=(text) { (shown) } }
}

/// A state as a badge: its word, and a colour that is never the only sign of it.
/// An ISO 8601 duration (`PT10S`, `P1DT2H`) in words in the reader's language ("10
/// seconden", "1 dag en 2 uur"); `None` when `text` is not one.
pub(crate) fn duration(lang: Lang, text: &str) -> Option<String> {
    let total = knooppunt_store::parse_iso8601_duration(text).ok()?;
    let mut ms = total.as_millis();
    let units: [(u128, &str, &str, &str, &str); 5] = [
        (86_400_000, "dag", "dagen", "day", "days"),
        (3_600_000, "uur", "uur", "hour", "hours"),
        (60_000, "minuut", "minuten", "minute", "minutes"),
        (1_000, "seconde", "seconden", "second", "seconds"),
        (
            1,
            "milliseconde",
            "milliseconden",
            "millisecond",
            "milliseconds",
        ),
    ];
    let mut parts = Vec::new();
    for (size, nl_one, nl_many, en_one, en_many) in units {
        let n = ms / size;
        ms %= size;
        if n > 0 {
            let word = match (lang.t("nl", "en"), n) {
                ("nl", 1) => nl_one,
                ("nl", _) => nl_many,
                (_, 1) => en_one,
                _ => en_many,
            };
            parts.push(format!("{n} {word}"));
        }
    }
    let and = lang.t(" en ", " and ");
    Some(match parts.len() {
        0 => format!("0 {}", lang.t("seconden", "seconds")),
        1 => parts.remove(0),
        _ => {
            let last = parts.pop().unwrap_or_default();
            format!("{}{and}{last}", parts.join(", "))
        }
    })
}

/// A role in the reader's language; the API's name beside it in Dutch (it is what the API,
/// the command line and the documentation call it).
pub(crate) fn role_label(lang: Lang, role: &str) -> String {
    let nl = match role {
        "publisher" => "publiceren",
        "subscriber" => "abonneren",
        "admin" => "beheer",
        "metrics" => "metingen",
        _ => return role.to_owned(),
    };
    match lang.t("nl", "en") {
        "nl" => format!("{nl} ({role})"),
        _ => role.to_owned(),
    }
}

/// Where a principal was made, in the reader's language.
pub(crate) fn origin_label(lang: Lang, origin: &str) -> &'static str {
    match origin {
        "api" => lang.t("API of console", "API or console"),
        "configuration" => lang.t("configuratiebestand", "configuration file"),
        _ => lang.t("onbekend", "unknown"),
    }
}

pub(crate) fn badge(lang: Lang, state: &str) -> Markup {
    let (class, nl, en) = match state {
        "active" => ("utrecht-status-badge--safe", "actief", "active"),
        "pending" => (
            "utrecht-status-badge--warning",
            "wacht op instemming",
            "awaiting consent",
        ),
        "disabled" => ("utrecht-status-badge--danger", "uitgeschakeld", "disabled"),
        "suspended" => (
            "utrecht-status-badge--danger",
            "opgeschort: eigenaar uitgeschakeld",
            "suspended: owner disabled",
        ),
        "open" => (
            "utrecht-status-badge--danger",
            "open: eindpunt gepauzeerd",
            "open: endpoint paused",
        ),
        "closed" => ("utrecht-status-badge--safe", "dicht", "closed"),
        "delivered" => ("utrecht-status-badge--safe", "afgeleverd", "delivered"),
        "retry" => ("utrecht-status-badge--warning", "opnieuw", "retry"),
        "deadLetter" => ("utrecht-status-badge--danger", "dode brief", "dead letter"),
        "failed" => ("utrecht-status-badge--danger", "mislukt", "failed"),
        "test" => ("utrecht-status-badge--neutral", "test", "test"),
        "granted" => ("utrecht-status-badge--safe", "toegestaan", "granted"),
        "requested" => ("utrecht-status-badge--warning", "aangevraagd", "requested"),
        "refused" => ("utrecht-status-badge--danger", "geweigerd", "refused"),
        "revoked" => ("utrecht-status-badge--danger", "ingetrokken", "revoked"),
        "running" => ("utrecht-status-badge--warning", "bezig", "running"),
        "accepting" => ("utrecht-status-badge--safe", "ja", "yes"),
        "refusing" => (
            "utrecht-status-badge--danger",
            "nee: achterstand vol",
            "no: backlog full",
        ),
        "completed" => ("utrecht-status-badge--safe", "klaar", "completed"),
        "cancelled" => ("utrecht-status-badge--neutral", "geannuleerd", "cancelled"),
        _ => ("utrecht-status-badge--neutral", "", ""),
    };
    let word = if nl.is_empty() {
        state.to_owned()
    } else {
        lang.t(nl, en).to_owned()
    };
    html! { span class={ "utrecht-status-badge " (class) } { (word) } }
}

/// A list of terms and their descriptions.
pub(crate) fn data_list(items: Vec<(&str, Markup)>) -> Markup {
    html! {
        dl class="utrecht-data-list kp-data-list" {
            @for (key, value) in items {
                div class="utrecht-data-list__item" {
                    dt class="utrecht-data-list__item-key" { (key) }
                    dd class="utrecht-data-list__item-value" { (value) }
                }
            }
        }
    }
}

/// A table in a keyboard-scrollable region: its caption (`id` names it), its column
/// headings, and its rows of cells. Each cell carries its column's heading (`data-label`):
/// on a narrow screen the rows are stacked, each cell under its heading (console.css), so
/// nothing scrolls sideways.
pub(crate) fn table(id: &str, caption: &str, headings: &[&str], rows: Vec<Vec<Markup>>) -> Markup {
    html! {
        div class="kp-table-wrap" tabindex="0" role="region" aria-labelledby=(id) {
            table class="utrecht-table utrecht-table--html-table kp-stacking" {
                caption class="utrecht-table__caption" id=(id) { (caption) }
                thead class="utrecht-table__header" { tr class="utrecht-table__row" {
                    @for heading in headings {
                        th class="utrecht-table__header-cell" scope="col" { (heading) }
                    }
                } }
                tbody class="utrecht-table__body" {
                    @for row in rows {
                        tr class="utrecht-table__row" {
                            @for (i, cell) in row.into_iter().enumerate() {
                                td class="utrecht-table__cell" data-label=(headings.get(i).copied().unwrap_or_default()) { (cell) }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// An id or a URL, which may wrap anywhere but only where it must.
pub(crate) fn long(text: &str) -> Markup {
    html! { span class="kp-break" { (text) } }
}

/// A list's path with the cursor of the page asked for, if any.
pub(crate) fn with_cursor(path: &str, query: &std::collections::HashMap<String, String>) -> String {
    match query.get("cursor") {
        Some(cursor) => format!("{path}&cursor={}", encode(cursor)),
        None => path.to_owned(),
    }
}

/// The link to a list's next page (`page` is the console's path of the list, with its
/// query if any), when there is one.
pub(crate) fn next_page(lang: Lang, page: &str, cursor: Option<&str>) -> Markup {
    let separator = if page.contains('?') { '&' } else { '?' };
    html! {
        @if let Some(cursor) = cursor {
            p class="utrecht-paragraph" {
                a class="utrecht-link" href={ (page) (separator) "cursor=" (encode(cursor)) } { (lang.t("Volgende pagina", "Next page")) }
            }
        }
    }
}

/// JSON shown as code.
pub(crate) fn json_block(value: &Value) -> Markup {
    let text = serde_json::to_string_pretty(value).unwrap_or_default();
    html! { pre class="utrecht-code-block kp-pre" { code { (text) } } }
}

impl axum::response::IntoResponse for crate::forms::Unread {
    fn into_response(self) -> Response {
        match self {
            crate::forms::Unread::Visitor(response) => response,
            crate::forms::Unread::Refused { lang, status, why } => refusal(lang, status, why),
        }
    }
}

/// A page that says why something was refused (a form without its CSRF token, say).
pub(crate) fn refusal(lang: Lang, status: StatusCode, why: &str) -> Response {
    respond(
        status,
        page(
            lang,
            None,
            Section::None,
            lang.t("Niet uitgevoerd", "Not done"),
            html! {
                div class="utrecht-alert utrecht-alert--error" role="alert" {
                    div class="utrecht-alert__message" { p class="utrecht-paragraph" { (why) } }
                }
                p class="utrecht-paragraph" { a class="utrecht-link" href=(BASE) { (lang.t("Naar het overzicht", "To the overview")) } }
            },
        ),
    )
}

/// A page for when the hub could not answer.
pub(crate) fn failure(lang: Lang, status: StatusCode) -> Response {
    refusal(
        lang,
        status,
        lang.t(
            "De hub kon dit nu niet beantwoorden; probeer het zo opnieuw.",
            "The hub could not answer this now; try again shortly.",
        ),
    )
}

/// The page of a path the console does not have: with the header and the navigation of a
/// signed-in visitor, so that they can go on from there.
pub(crate) async fn not_found(visitor: Result<Visitor, Response>, headers: HeaderMap) -> Response {
    let lang = visitor
        .as_ref()
        .map_or_else(|_| lang_of(&headers), |v| v.lang);
    let why = lang.t(
        "Deze pagina bestaat niet, of is niet voor u zichtbaar.",
        "This page does not exist, or is not visible to you.",
    );
    let Ok(visitor) = visitor else {
        return refusal(lang, StatusCode::NOT_FOUND, why);
    };
    respond(
        StatusCode::NOT_FOUND,
        page(
            lang,
            Some(&visitor),
            Section::None,
            lang.t("Niet gevonden", "Not found"),
            html! {
                div class="utrecht-alert utrecht-alert--error" role="alert" {
                    div class="utrecht-alert__message" { p class="utrecht-paragraph" { (why) } }
                }
                p class="utrecht-paragraph" { a class="utrecht-link" href=(BASE) { (lang.t("Naar het overzicht", "To the overview")) } }
            },
        ),
    )
}

/// What the API refused or could not find, as a whole page (a direct URL to another's
/// subscription ends here).
pub(crate) fn api_refusal(
    lang: Lang,
    visitor: &Visitor,
    status: StatusCode,
    problem: &Problem,
) -> Response {
    let title = match status {
        StatusCode::NOT_FOUND => lang.t("Niet gevonden", "Not found"),
        StatusCode::FORBIDDEN => lang.t("Geen toegang", "No access"),
        _ => lang.t("Dat ging niet", "That did not work"),
    };
    let status = if status.is_success() {
        StatusCode::BAD_GATEWAY
    } else {
        status
    };
    respond(
        status,
        page(
            lang,
            Some(visitor),
            Section::None,
            title,
            html! {
                (self::problem(lang, problem))
                p class="utrecht-paragraph" { a class="utrecht-link" href=(BASE) { (lang.t("Naar het overzicht", "To the overview")) } }
            },
        ),
    )
}

/// An irreversible action's confirmation: where its form posts, its title, what will
/// happen, the confirming button's words, and the way back.
pub(crate) struct Ask<'a> {
    pub(crate) action: &'a str,
    pub(crate) title: &'a str,
    pub(crate) consequences: &'a [&'a str],
    pub(crate) button: &'a str,
    pub(crate) back: &'a str,
}

/// Asks before an irreversible action: unless the form was confirmed, the page that says
/// what will happen, with the same form (its fields kept, the CSRF token new) and a button
/// that confirms, and a way back. `None` once confirmed: the action goes ahead.
pub(crate) fn confirm_first(posted: &crate::forms::Posted, ask: &Ask<'_>) -> Option<Response> {
    if posted.fields.get(CONFIRMED) == "yes" {
        return None;
    }
    let visitor = &posted.visitor;
    let lang = visitor.lang;
    let content = html! {
        div class="utrecht-alert utrecht-alert--warning" role="alert" {
            div class="utrecht-alert__message" {
                @for line in ask.consequences { p class="utrecht-paragraph" { (line) } }
            }
        }
        form method="post" action=(ask.action) class="kp-actions" {
            (csrf(visitor))
            @for (name, value) in &posted.fields.0 {
                @if name != CSRF_FIELD && name != CONFIRMED {
                    input type="hidden" name=(name) value=(value);
                }
            }
            input type="hidden" name=(CONFIRMED) value="yes";
            button type="submit" class="utrecht-button utrecht-button--primary-action utrecht-button--danger" { (ask.button) }
            a class="utrecht-link" href=(ask.back) { (lang.t("Annuleren", "Cancel")) }
        }
    };
    Some(respond(
        StatusCode::OK,
        page(lang, Some(visitor), Section::None, ask.title, content),
    ))
}

/// The field a confirmed form carries.
const CONFIRMED: &str = "confirmed";

/// A secret (a signing secret, a token) shown once, with what to do with it.
/// `id` names the secret's element.
pub(crate) fn secret_shown(
    lang: Lang,
    id: &str,
    intro: Markup,
    secret: &str,
    after: Option<Markup>,
) -> Markup {
    html! {
        div class="utrecht-alert utrecht-alert--ok" role="status" {
            div class="utrecht-alert__message" {
                p class="utrecht-paragraph" { (intro) }
                // Whole on one line (it scrolls within itself on a narrow screen), and a
                // button that copies it where the script runs.
                p class="utrecht-paragraph kp-secret" {
                    code class="kp-secret-value" id=(id) tabindex="0" { (secret) }
                    " "
                    button type="button" class="utrecht-button utrecht-button--secondary-action" data-copy=(id) hidden {
                        (lang.t("Kopiëren", "Copy"))
                    }
                }
                @if let Some(after) = after { p class="utrecht-paragraph" { (after) } }
            }
        }
    }
}

/// A delivery's error or reason from the API, in the page's language (`texts.rs`), or a
/// dash.
pub(crate) fn said(lang: Lang, value: Option<&str>) -> Markup {
    match value {
        Some(text) => crate::texts::delivery(lang, text),
        None => html! { "—" },
    }
}

/// A number of bytes, readable (KiB, MiB, GiB).
pub(crate) fn bytes(n: u64) -> String {
    match n {
        0..1024 => format!("{n} B"),
        1024..1_048_576 => format!("{:.1} KiB", n as f64 / 1024.0),
        1_048_576..1_073_741_824 => format!("{:.1} MiB", n as f64 / 1_048_576.0),
        _ => format!("{:.1} GiB", n as f64 / 1_073_741_824.0),
    }
}
