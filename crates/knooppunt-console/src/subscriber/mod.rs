//! The subscriber's pages: its subscriptions with their state and how their deliveries
//! fare (found by text and state), one subscription's attempts, dead letters (redeliver one,
//! a selection or all; read one, delete one), replays (start, follow, stop), test events,
//! receipts, a new signing secret, deletion, and an administrator's record of consent. The
//! form that creates or edits one is in `subscription_form.rs`.

mod dead_letters;
mod replays;

pub(crate) use dead_letters::*;
pub(crate) use replays::*;

use crate::forms::{Posted, Problem, encode};
use crate::layout::{self, Ask, Section, badge, csrf, data_list, json_block, page, respond};
use crate::subscription_form::{SETTINGS, secret_page};
use crate::{BASE, Console, Lang, Visitor, redirect};
use axum::extract::{Path, Query, State};
use axum::response::Response;
use http::{Method, StatusCode};
use knooppunt_api::{
    AttemptOut, DeadLetterOut, ReplayOut, SigningSecretOut, SubscriptionOut, SubscriptionStatusOut,
    TakenOut, TestOut,
};
use maud::{Markup, html};
use serde_json::Value;
use std::sync::Arc;

type Params = Query<std::collections::HashMap<String, String>>;

/// A path segment of an id, encoded.
fn seg(id: &str) -> String {
    encode(id)
}

/// `GET /console/subscriptions`.
pub(crate) async fn list(
    State(console): State<Arc<Console>>,
    visitor: Visitor,
    Query(query): Params,
) -> Result<Response, Response> {
    let lang = visitor.lang;
    let admin = visitor.principal.is_admin();
    // The selection, passed on to the API (which checks it) and kept in the next page's link.
    let mut selection = String::new();
    for key in ["owner", "state", "search"] {
        if let Some(value) = query.get(key).map(|v| v.trim()).filter(|v| !v.is_empty()) {
            selection.push_str(&format!("&{key}={}", encode(value)));
        }
    }
    let path = layout::with_cursor(&format!("/v1/subscriptions?pageSize=50{selection}"), &query);
    let answer = console.get(&visitor, &path).await;
    let refused = (answer.status == StatusCode::BAD_REQUEST
        || answer.status == StatusCode::FORBIDDEN)
        .then(|| answer.problem());
    let answer = if refused.is_some() {
        answer
    } else {
        answer.checked(&visitor)?
    };
    let here = match selection.strip_prefix('&') {
        Some(selection) => format!("{BASE}/subscriptions?{selection}"),
        None => format!("{BASE}/subscriptions"),
    };
    let value = |key: &str| query.get(key).cloned().unwrap_or_default();
    let state = value("state");
    let search_form = html! {
        form method="get" action={ (BASE) "/subscriptions" } class="kp-form kp-search" role="search" aria-label=(lang.t("Abonnementen zoeken", "Search subscriptions")) {
            div class="utrecht-form-field" {
                label class="utrecht-form-label" for="s-search" { (lang.t("Zoeken (naam, id, eindpunt, type of eigenaar)", "Search (name, id, endpoint, type or owner)")) }
                input class="utrecht-textbox utrecht-textbox--html-input" type="text" id="s-search" name="search" value=(value("search"));
            }
            div class="utrecht-form-field" {
                label class="utrecht-form-label" for="s-state" { (lang.t("Status", "State")) }
                select class="utrecht-select utrecht-select--html-select" id="s-state" name="state" {
                    option value="" selected[state.is_empty()] { (lang.t("alle", "all")) }
                    option value="active" selected[state == "active"] { (lang.t("actief", "active")) }
                    option value="pending" selected[state == "pending"] { (lang.t("wacht op instemming", "awaiting consent")) }
                    option value="disabled" selected[state == "disabled"] { (lang.t("uitgeschakeld", "disabled")) }
                }
            }
            @if admin {
                div class="utrecht-form-field" {
                    label class="utrecht-form-label" for="s-owner" { (lang.t("Eigenaar", "Owner")) }
                    input class="utrecht-textbox utrecht-textbox--html-input" type="text" id="s-owner" name="owner" value=(value("owner"));
                }
            }
            div { button type="submit" class="utrecht-button utrecht-button--secondary-action" { (lang.t("Zoeken", "Search")) } }
        }
    };
    let subscriptions: Vec<SubscriptionOut> = if refused.is_some() {
        Vec::new()
    } else {
        answer.parse(&visitor)?
    };
    let mut rows = Vec::new();
    for subscription in subscriptions {
        let status = console
            .get(
                &visitor,
                &format!("/v1/subscriptions/{}/status", seg(&subscription.id)),
            )
            .await
            .read::<SubscriptionStatusOut>();
        rows.push((subscription, status));
    }
    let next = answer.next_cursor();
    let content = html! {
        @if let Some(notice) = notice_of(lang, &query) { (notice) }
        div class="kp-actions" {
            a class="utrecht-button-link utrecht-button-link--html-a utrecht-button-link--primary-action" href={ (BASE) "/subscriptions/new" } {
                (lang.t("Nieuw abonnement", "New subscription"))
            }
        }
        (search_form)
        @if let Some(problem) = &refused { (layout::problem(lang, problem)) }
        @if rows.is_empty() && selection.is_empty() && refused.is_none() {
            p class="utrecht-paragraph" { (lang.t("U heeft nog geen abonnementen.", "You have no subscriptions yet.")) }
        } @else if rows.is_empty() {
            p class="utrecht-paragraph" { (lang.t("Geen abonnementen gevonden.", "No subscriptions found.")) }
        } @else {
            (layout::table("subscriptions-caption", if admin { lang.t("Alle abonnementen", "All subscriptions") } else { lang.t("Uw abonnementen", "Your subscriptions") }, &[lang.t("Abonnement", "Subscription"), lang.t("Eigenaar", "Owner"), lang.t("Eindpunt", "Endpoint"), lang.t("Status", "State"), lang.t("Laatste levering", "Last delivery"), lang.t("Laatste fout", "Last error"), lang.t("Stroomonderbreker", "Breaker"), lang.t("Achterstand", "Backlog"), lang.t("Oudste wacht", "Oldest waiting")], rows.iter().map(|(s, st)| vec![
                html! {
                    @if let Some(label) = &s.label {
                        a class="utrecht-link" href={ (BASE) "/subscriptions/" (seg(&s.id)) } { (label) }
                        br; small class="kp-break" { (s.id) }
                    } @else {
                        a class="utrecht-link kp-break" href={ (BASE) "/subscriptions/" (seg(&s.id)) } { (s.id) }
                    }
                    @if let Some(types) = &s.types {
                        br; small { (types.join(", ")) }
                    }
                },
                html! { (s.owner) },
                layout::long(&s.sink),
                html! {
                    (badge(lang, &s.state))
                    @for approval in &s.approvals {
                        br; small class="kp-break" { (approval.event_type.as_deref().unwrap_or(&approval.eventtype)) ": " } (badge(lang, &approval.state))
                    }
                },
                html! {
                    @if let Some(last) = &s.last_delivery {
                        (layout::at(&last.time)) " " (badge(lang, &last.outcome))
                    } @else { "—" }
                },
                layout::said(lang, s.last_delivery.as_ref().and_then(|last| last.error.as_deref())),
                html! { @if let Some(breaker) = st.as_ref().and_then(|st| st.breaker.as_ref()) { (badge(lang, &breaker.state)) } @else { "—" } },
                html! { @if let Some(st) = st { (st.backlog) } @else { "—" } },
                html! { (age(lang, st.as_ref().and_then(|st| st.oldest_pending_age_seconds))) },
            ]).collect()))
            (layout::next_page(lang, &here, next.as_deref()))
        }
    };
    Ok(respond(
        StatusCode::OK,
        page(
            lang,
            Some(&visitor),
            Section::Subscriptions,
            lang.t("Abonnementen", "Subscriptions"),
            content,
        ),
    ))
}

/// An age in seconds, readable.
fn age(lang: Lang, seconds: Option<u64>) -> String {
    let Some(seconds) = seconds else {
        return "—".into();
    };
    match seconds {
        0..60 => format!("{seconds} s"),
        60..3600 => format!("{} min", seconds / 60),
        3600..86_400 => format!("{} {}", seconds / 3600, lang.t("uur", "h")),
        _ => format!("{} {}", seconds / 86_400, lang.t("dagen", "days")),
    }
}

/// The notices a redirect after an action carries (fixed texts: nothing from the URL is
/// shown as it came).
fn notice_of(lang: Lang, query: &std::collections::HashMap<String, String>) -> Option<Markup> {
    let count = query
        .get("count")
        .and_then(|c| c.parse::<u64>().ok())
        .unwrap_or(0);
    let text = match query.get("notice").map(String::as_str)? {
        "created" => lang
            .t(
                "Het abonnement is aangemaakt.",
                "The subscription was created.",
            )
            .to_owned(),
        "deleted" => lang
            .t(
                "Het abonnement is verwijderd.",
                "The subscription was deleted.",
            )
            .to_owned(),
        "consented" => lang
            .t(
                "De instemming is vastgelegd; de hub bezorgt nu.",
                "The consent was recorded; the hub delivers now.",
            )
            .to_owned(),
        "letter-deleted" => lang
            .t(
                "De dode brief is verwijderd.",
                "The dead letter was deleted.",
            )
            .to_owned(),
        "saved" => lang
            .t("De wijzigingen zijn opgeslagen.", "The changes were saved.")
            .to_owned(),
        "redelivered" => lang.count(
            count,
            (
                "dode brief staat weer in de wachtrij.",
                "dode brieven staan weer in de wachtrij.",
            ),
            (
                "dead letter is queued again.",
                "dead letters are queued again.",
            ),
        ),
        "more" => lang.count(
            count,
            (
                "dode brief staat weer in de wachtrij; er zijn er meer: kies nogmaals ‘alle’.",
                "dode brieven staan weer in de wachtrij; er zijn er meer: kies nogmaals ‘alle’.",
            ),
            (
                "dead letter is queued again; there are more: choose ‘all’ again.",
                "dead letters are queued again; there are more: choose ‘all’ again.",
            ),
        ),
        "test-delivered" => lang
            .t(
                "Het testbericht is afgeleverd.",
                "The test event was delivered.",
            )
            .to_owned(),
        "test-failed" => lang
            .t(
                "Het testbericht kwam niet aan; zie de recente pogingen.",
                "The test event did not arrive; see the recent attempts.",
            )
            .to_owned(),
        _ => return None,
    };
    let ok = !matches!(query.get("notice").map(String::as_str), Some("test-failed"));
    Some(layout::notice(ok, &text))
}

/// `GET /console/subscriptions/{id}`.
pub(crate) async fn detail(
    State(console): State<Arc<Console>>,
    visitor: Visitor,
    Path(id): Path<String>,
    Query(query): Params,
) -> Result<Response, Response> {
    let lang = visitor.lang;
    let base = format!("/v1/subscriptions/{}", seg(&id));
    let s: SubscriptionOut = console
        .get(&visitor, &base)
        .await
        .checked(&visitor)?
        .parse(&visitor)?;
    let status: Option<SubscriptionStatusOut> = console
        .get(&visitor, &format!("{base}/status"))
        .await
        .read();
    let attempts: Vec<AttemptOut> = console
        .get(&visitor, &format!("{base}/attempts"))
        .await
        .read()
        .unwrap_or_default();
    let dead = console
        .get(&visitor, &format!("{base}/dead-letters?pageSize=50"))
        .await;
    let replays: Vec<ReplayOut> = console
        .get(&visitor, &format!("{base}/replays"))
        .await
        .checked(&visitor)?
        .parse(&visitor)?;
    let pull = s
        .config
        .get("delivery")
        .is_some_and(|delivery| delivery == "pull");
    let now = knooppunt_store::now_ms();
    let hour_ago = knooppunt_event::timestamp::utc_timestamp(now.saturating_sub(3_600_000));
    let until = knooppunt_event::timestamp::utc_timestamp(now);
    let page_path = format!("{BASE}/subscriptions/{}", seg(&id));
    let mut properties = vec![
        (
            lang.t("Id", "Id"),
            html! { code class="utrecht-code" { (id) } },
        ),
        (lang.t("Eigenaar", "Owner"), html! { (s.owner) }),
        (
            lang.t("Eindpunt", "Endpoint"),
            html! { span class="kp-break" { (s.sink) } },
        ),
        (
            lang.t("Status", "State"),
            html! {
                (badge(lang, &s.state))
                @if s.validation_problem.is_some() { " " (layout::said(lang, s.validation_problem.as_deref())) }
                @if s.disabled_reason.is_some() { " " (layout::said(lang, s.disabled_reason.as_deref())) }
            },
        ),
    ];
    match &s.protocol_settings {
        Some(knooppunt_api::ProtocolSettingsOut::Mqtt { topicname, qos, .. }) => {
            let version = if s.protocol == "MQTT3" {
                "MQTT 3.1.1"
            } else {
                "MQTT 5"
            };
            properties.push((
                lang.t("MQTT-onderwerp", "MQTT topic"),
                html! { code class="utrecht-code" { (topicname) } " (" (version) ", QoS " (qos) ")" },
            ));
        }
        Some(knooppunt_api::ProtocolSettingsOut::Amqp {
            address,
            sendersettlementmode,
            ..
        }) => {
            let delivery = if sendersettlementmode == "settled" {
                lang.t("settled: hooguit één keer", "settled: at most once")
            } else {
                lang.t("unsettled: minstens één keer", "unsettled: at least once")
            };
            properties.push((
                lang.t("AMQP-adres", "AMQP address"),
                html! {
                    @match address {
                        Some(address) => code class="utrecht-code" { (address) },
                        None => (lang.t("het pad van het eindpunt", "the endpoint's path")),
                    }
                    " (AMQP 1.0, " (delivery) ")"
                },
            ));
        }
        Some(knooppunt_api::ProtocolSettingsOut::Nats { subject, jetstream }) => {
            let delivery = if *jetstream {
                lang.t("JetStream: minstens één keer", "JetStream: at least once")
            } else {
                lang.t("core NATS: hooguit één keer", "core NATS: at most once")
            };
            properties.push((
                lang.t("NATS-subject", "NATS subject"),
                html! { code class="utrecht-code" { (subject) } " (" (delivery) ")" },
            ));
        }
        _ => {}
    }
    if let Some(types) = &s.types {
        properties.push((lang.t("Typen", "Types"), html! { (types.join(", ")) }));
    }
    if let Some(source) = &s.source {
        properties.push((lang.t("Bron", "Source"), html! { (source) }));
    }
    if !s.filters.is_empty() {
        properties.push((
            lang.t("Filters", "Filters"),
            json_block(&Value::Array(s.filters.clone())),
        ));
    }
    properties.push((
        lang.t("Bezorging", "Delivery"),
        html! {
            dl class="kp-details" {
                @for setting in &SETTINGS {
                    @if let Some(value) = s.config.get(setting.key) {
                        div {
                            dt { (lang.t(setting.label.0, setting.label.1)) }
                            dd {
                                @if let Some((_, nl, en)) = setting.choices.iter().find(|(choice, _, _)| choice == value) {
                                    (lang.t(nl, en))
                                } @else if let Some(words) = layout::duration(lang, value) {
                                    // An ISO 8601 duration, in words; the value itself beside.
                                    (words) " (" code class="utrecht-code" { (value) } ")"
                                } @else {
                                    (value)
                                }
                            }
                        }
                    }
                }
            }
        },
    ));
    if !s.approvals.is_empty() {
        properties.push((lang.t("Goedkeuringen", "Approvals"), html! {
            ul class="utrecht-unordered-list" {
                @for a in &s.approvals {
                    li class="utrecht-unordered-list__item" {
                        a class="utrecht-link kp-break" href={ (BASE) "/eventtypes/" (seg(&a.eventtype)) } { (a.event_type.as_deref().unwrap_or(&a.eventtype)) } " " (badge(lang, &a.state))
                        @if let Some(reason) = &a.reason { " — " (reason) }
                    }
                }
            }
        }));
    }
    let dead_letters: Vec<DeadLetterOut> = dead.checked(&visitor)?.parse(&visitor)?;
    let content = html! {
        @if let Some(notice) = notice_of(lang, &query) { (notice) }
        div class="kp-actions" {
            a class="utrecht-link" href={ (page_path) "/edit" } { (lang.t("Bewerken", "Edit")) }
            a class="utrecht-link" href={ (page_path) "/receipts" } { (lang.t("Ontvangsten", "Receipts")) }
            @if !pull && s.state == "active" {
                form method="post" action={ (page_path) "/test" } class="kp-inline" {
                    (csrf(&visitor))
                    button type="submit" class="utrecht-button utrecht-button--secondary-action" { (lang.t("Testbericht versturen", "Send a test event")) }
                }
            }
            // A rotation works once the previous secret's overlap is over: the button waits.
            @if !pull {
                @if let Some(until) = &s.signing_overlap_until {
                    p class="utrecht-paragraph" id="signing-overlap" {
                        (lang.t("Een nieuw ondertekeningsgeheim kan vanaf ", "A new signing secret can be made from "))
                        (layout::at(until))
                        (lang.t(": tot dan ondertekent het vorige geheim ook nog.", ": until then the previous secret signs too."))
                    }
                } @else {
                    form method="post" action={ (page_path) "/signing-secret" } class="kp-inline" {
                        (csrf(&visitor))
                        button type="submit" class="utrecht-button utrecht-button--secondary-action" { (lang.t("Nieuw ondertekeningsgeheim", "New signing secret")) }
                    }
                }
            }
            @if visitor.principal.is_admin() && s.state == "pending" {
                form method="post" action={ (page_path) "/consent" } class="kp-inline" {
                    (csrf(&visitor))
                    button type="submit" class="utrecht-button utrecht-button--secondary-action" { (lang.t("Instemming van het eindpunt vastleggen", "Record the endpoint's consent")) }
                }
            }
            form method="post" action={ (page_path) "/delete" } class="kp-inline" {
                (csrf(&visitor))
                button type="submit" class="utrecht-button utrecht-button--secondary-action" { (lang.t("Verwijderen", "Delete")) }
            }
        }
        section aria-labelledby="h-status" {
            h2 class="utrecht-heading-2" id="h-status" { (lang.t("Levering", "Delivery")) }
            div id="delivery-status" data-refresh="5" aria-live="polite" {
                @if let Some(status) = &status { (delivery_status(lang, status)) } @else { p class="utrecht-paragraph" { "—" } }
            }
        }
        section aria-labelledby="h-properties" {
            h2 class="utrecht-heading-2" id="h-properties" { (lang.t("Gegevens", "Details")) }
            (data_list(properties))
        }
        section aria-labelledby="h-attempts" {
            h2 class="utrecht-heading-2" id="h-attempts" { (lang.t("Recente pogingen", "Recent attempts")) }
            p class="utrecht-paragraph" { (lang.t("De laatste 50 pogingen van deze hub sinds hij startte, nieuwste eerst.", "This hub's latest 50 attempts since it started, newest first.")) }
            (attempts_table(lang, &attempts))
        }
        section aria-labelledby="h-dead" {
            h2 class="utrecht-heading-2" id="h-dead" { (lang.t("Dode brieven", "Dead letters")) }
            @if dead_letters.is_empty() {
                p class="utrecht-paragraph" { (lang.t("Geen dode brieven.", "No dead letters.")) }
            } @else {
                form method="post" action={ (page_path) "/redeliver" } {
                    (csrf(&visitor))
                    (layout::table("dead-caption", lang.t("Dode brieven (de eerste 50)", "Dead letters (the first 50)"), &[lang.t("Kies", "Pick"), lang.t("Gebeurtenis", "Event"), lang.t("Opgegeven", "Given up"), lang.t("Pogingen", "Attempts"), lang.t("Reden", "Reason")], dead_letters.iter().map(|d| vec![
                        html! {
                            input class="utrecht-checkbox utrecht-checkbox--html-input" type="checkbox" name="letter"
                                value=(d.id) id={ "letter-" (d.id) }
                                aria-label={ (lang.t("Kies gebeurtenis ", "Pick event ")) (d.sequence) };
                        },
                        html! { a class="utrecht-link" href={ (page_path) "/dead-letters/" (seg(&d.id)) } { (d.sequence) } },
                        layout::at(&d.dead_letter_time),
                        html! { (d.attempts) },
                        layout::said(lang, Some(&d.reason)),
                    ]).collect()))
                    div class="kp-actions" {
                        button type="submit" name="scope" value="selected" class="utrecht-button utrecht-button--primary-action" { (lang.t("Gekozen opnieuw bezorgen", "Redeliver the picked ones")) }
                        button type="submit" name="scope" value="all" class="utrecht-button utrecht-button--secondary-action" { (lang.t("Alle opnieuw bezorgen", "Redeliver all")) }
                    }
                }
            }
        }
        section aria-labelledby="h-replays" {
            h2 class="utrecht-heading-2" id="h-replays" { (lang.t("Opnieuw afspelen", "Replays")) }
            @if !replays.is_empty() {
                ul class="utrecht-unordered-list" {
                    @for r in &replays {
                        li class="utrecht-unordered-list__item" {
                            a class="utrecht-link" href={ (page_path) "/replays/" (seg(&r.id)) } { (layout::at(&r.from)) " – " (layout::at(&r.until)) }
                            " " (badge(lang, &r.state))
                            " " (lang.count(r.events_queued, ("gebeurtenis", "gebeurtenissen"), ("event", "events")))
                        }
                    }
                }
            }
            form method="post" action={ (page_path) "/replays" } class="kp-form" {
                (csrf(&visitor))
                div class="utrecht-form-field" {
                    label class="utrecht-form-label" for="replay-from" { (lang.t("Van (RFC 3339, UTC)", "From (RFC 3339, UTC)")) }
                    input class="utrecht-textbox utrecht-textbox--html-input" type="text" id="replay-from" name="from" value=(hour_ago) required;
                }
                div class="utrecht-form-field" {
                    label class="utrecht-form-label" for="replay-until" { (lang.t("Tot en met", "Until")) }
                    input class="utrecht-textbox utrecht-textbox--html-input" type="text" id="replay-until" name="until" value=(until) required;
                }
                div { button type="submit" class="utrecht-button utrecht-button--secondary-action" { (lang.t("Afspelen starten", "Start the replay")) } }
            }
        }
    };
    Ok(respond(
        StatusCode::OK,
        page(
            lang,
            Some(&visitor),
            Section::Subscriptions,
            &match &s.label {
                Some(label) => label.clone(),
                None => format!("{} {}", lang.t("Abonnement", "Subscription"), short(&id)),
            },
            content,
        ),
    ))
}

/// The start of an id, for a title.
fn short(id: &str) -> &str {
    id.get(..13).unwrap_or(id)
}

fn attempts_table(lang: Lang, attempts: &[AttemptOut]) -> Markup {
    html! {
        @if attempts.is_empty() {
            p class="utrecht-paragraph" { (lang.t("Nog geen pogingen.", "No attempts yet.")) }
        } @else {
            (layout::table("attempts-caption", lang.t("Pogingen", "Attempts"), &[lang.t("Tijd", "Time"), lang.t("Gebeurtenis", "Event"), lang.t("Uitkomst", "Outcome"), lang.t("HTTP-status", "HTTP status"), lang.t("Duur", "Duration"), lang.t("Fout", "Error")], attempts.iter().map(|a| vec![
                layout::at(&a.time),
                html! { (a.sequence) },
                badge(lang, &a.outcome),
                html! { @if let Some(code) = a.status_code { (code) } @else { "—" } },
                html! { @if let Some(ms) = a.duration_ms { (ms) " ms" } @else { "—" } },
                layout::said(lang, a.error.as_deref()),
            ]).collect()))
        }
    }
}

/// How a subscription's deliveries fare, as its page shows it (refreshed every 5 s).
fn delivery_status(lang: Lang, status: &SubscriptionStatusOut) -> Markup {
    data_list(vec![
        (
            lang.t("Achterstand", "Backlog"),
            html! {
                (lang.count(status.backlog, ("bericht", "berichten"), ("event", "events"))) ", " (layout::bytes(status.backlog_bytes))
                @if let Some(max) = status.backlog_limit.as_ref().and_then(|limit| limit.max_bytes) {
                    (lang.t(" (grens ", " (limit ")) (layout::bytes(max)) (lang.t(": daarboven worden de oudste dode brieven)", ": past it the oldest become dead letters)"))
                }
            },
        ),
        (
            lang.t("Afgestoten", "Shed"),
            html! {
                @if let Some(shed) = &status.shed {
                    (shed.events) (lang.t(" berichten, laatst ", " events, last ")) (layout::at(&shed.last_time))
                } @else { "—" }
            },
        ),
        (
            lang.t("Oudste wacht", "Oldest waiting"),
            html! { (age(lang, status.oldest_pending_age_seconds)) },
        ),
        (
            lang.t("Onderweg", "In flight"),
            html! { (status.in_flight) },
        ),
        (
            lang.t("Dode brieven", "Dead letters"),
            html! { (status.dead_letters) },
        ),
        (
            lang.t("Stroomonderbreker", "Breaker"),
            html! {
                @if let Some(breaker) = &status.breaker {
                    (badge(lang, &breaker.state)) " " (breaker.failures) (lang.t(" mislukte pogingen op rij", " failed attempts in a row"))
                } @else { "—" }
            },
        ),
        (
            lang.t("Laatste poging", "Last attempt"),
            html! {
                @if let Some(last) = &status.last_attempt {
                    (layout::at(&last.time)) " " (badge(lang, &last.outcome))
                    @if last.error.is_some() { " — " span class="kp-last-error" { (layout::said(lang, last.error.as_deref())) } }
                } @else { "—" }
            },
        ),
    ])
}

/// `POST /console/subscriptions/{id}/test`.
pub(crate) async fn test(
    State(console): State<Arc<Console>>,
    Path(id): Path<String>,
    posted: Posted,
) -> Result<Response, Response> {
    let visitor = &posted.visitor;
    let answer = console
        .call(
            visitor,
            Method::POST,
            &format!("/v1/subscriptions/{}/test", seg(&id)),
            None,
        )
        .await
        .checked(visitor)?
        .parse::<TestOut>(visitor)?;
    let notice = if answer.outcome == "delivered" {
        "test-delivered"
    } else {
        "test-failed"
    };
    Ok(redirect(&format!(
        "{BASE}/subscriptions/{}?notice={notice}",
        seg(&id)
    )))
}

/// `POST /console/subscriptions/{id}/signing-secret`: a new secret, after confirming.
pub(crate) async fn rotate(
    State(console): State<Arc<Console>>,
    Path(id): Path<String>,
    posted: Posted,
) -> Result<Response, Response> {
    let visitor = &posted.visitor;
    let lang = visitor.lang;
    let page_path = format!("{BASE}/subscriptions/{}", seg(&id));
    let answer = console
        .confirmed(
            &posted,
            Ask {
                action: &format!("{page_path}/signing-secret"),
                title: lang.t("Nieuw ondertekeningsgeheim maken?", "Make a new signing secret?"),
                consequences: &[
                    lang.t(
                        "De hub maakt een nieuw geheim en toont het één keer.",
                        "The hub makes a new secret and shows it once.",
                    ),
                    lang.t(
                        "Het huidige geheim ondertekent nog een tijd mee (beide handtekeningen gaan mee); zet het nieuwe geheim in die tijd in uw ontvanger.",
                        "The current secret keeps signing for a while (both signatures are sent); put the new secret in your receiver within that time.",
                    ),
                ],
                button: lang.t("Nieuw geheim maken", "Make a new secret"),
                back: &page_path,
            },
            Method::POST,
            &format!("/v1/subscriptions/{}/signing-secret", seg(&id)),
        )
        .await?
        .parse::<SigningSecretOut>(visitor)?;
    Ok(secret_page(
        visitor,
        &id,
        &answer.signing_secret,
        answer.previous_valid_until.as_deref(),
        false,
    ))
}

/// `POST /console/subscriptions/{id}/delete`: deletes it, after saying what that means.
pub(crate) async fn delete(
    State(console): State<Arc<Console>>,
    Path(id): Path<String>,
    posted: Posted,
) -> Result<Response, Response> {
    let visitor = &posted.visitor;
    let lang = visitor.lang;
    let page_path = format!("{BASE}/subscriptions/{}", seg(&id));
    console
        .confirmed(
            &posted,
            Ask {
                action: &format!("{page_path}/delete"),
                title: lang.t("Abonnement verwijderen?", "Delete the subscription?"),
                consequences: &[
                    lang.t(
                        "De hub bezorgt niets meer voor dit abonnement. Wat nog wacht en de dode brieven vervallen.",
                        "The hub delivers nothing more for this subscription. What still waits and the dead letters are dropped.",
                    ),
                    lang.t(
                        "Dit kan niet ongedaan worden gemaakt.",
                        "This cannot be undone.",
                    ),
                ],
                button: lang.t("Verwijderen", "Delete"),
                back: &page_path,
            },
            Method::DELETE,
            &format!("/v1/subscriptions/{}", seg(&id)),
        )
        .await?;
    Ok(redirect(&format!("{BASE}/subscriptions?notice=deleted")))
}

/// `GET /console/subscriptions/{id}/receipts`: what this subscription received, newest
/// first as the API pages it.
pub(crate) async fn receipts(
    State(console): State<Arc<Console>>,
    visitor: Visitor,
    Path(id): Path<String>,
    Query(query): Params,
) -> Result<Response, Response> {
    let lang = visitor.lang;
    let path = layout::with_cursor(
        &format!("/v1/subscriptions/{}/receipts?pageSize=50", seg(&id)),
        &query,
    );
    let answer = console.get(&visitor, &path).await.checked(&visitor)?;
    let list: Vec<TakenOut> = answer.parse(&visitor)?;
    let page_path = format!("{BASE}/subscriptions/{}", seg(&id));
    let content = html! {
        p class="utrecht-paragraph" { (lang.t("Elke gebeurtenis die uw eindpunt heeft aangenomen, met wanneer. De gegevenseigenaar ziet hetzelfde.", "Every event your endpoint took, and when. The data owner sees the same.")) }
        @if list.is_empty() {
            p class="utrecht-paragraph" { (lang.t("Nog niets ontvangen.", "Nothing received yet.")) }
        } @else {
            (layout::table("receipts-caption", lang.t("Ontvangen", "Received"), &[lang.t("Gebeurtenis", "Event"), lang.t("Type", "Type"), lang.t("Id", "Id"), lang.t("Afgeleverd", "Delivered")],
                list.iter().map(|r| vec![
                    html! { (r.sequence) },
                    layout::long(r.event.as_ref().map_or("—", |e| &e.event_type)),
                    layout::long(r.event.as_ref().map_or("—", |e| &e.id)),
                    layout::at(&r.delivered_time),
                ]).collect()))
        }
        (layout::next_page(lang, &format!("{page_path}/receipts"), answer.next_cursor().as_deref()))
        p class="utrecht-paragraph" { a class="utrecht-link" href=(page_path) { (lang.t("Terug naar het abonnement", "Back to the subscription")) } }
    };
    Ok(respond(
        StatusCode::OK,
        page(
            lang,
            Some(&visitor),
            Section::Subscriptions,
            lang.t("Ontvangsten", "Receipts"),
            content,
        ),
    ))
}

/// `POST /console/subscriptions/{id}/consent` (administrators): records the sink's consent,
/// agreed outside the hub, without a handshake; after confirming.
pub(crate) async fn consent(
    State(console): State<Arc<Console>>,
    Path(id): Path<String>,
    posted: Posted,
) -> Result<Response, Response> {
    let visitor = &posted.visitor;
    let lang = visitor.lang;
    let page_path = format!("{BASE}/subscriptions/{}", seg(&id));
    console
        .confirmed(
            &posted,
            Ask {
                action: &format!("{page_path}/consent"),
                title: lang.t("Instemming vastleggen?", "Record the consent?"),
                consequences: &[
                    lang.t(
                        "Doe dit alleen als de beheerder van het eindpunt buiten de hub heeft ingestemd met deze bezorgingen (schriftelijk, bijvoorbeeld): de hub slaat de controle over en begint te bezorgen.",
                        "Do this only when the endpoint's operator agreed to these deliveries outside the hub (in writing, say): the hub skips the check and starts delivering.",
                    ),
                    lang.t("Het komt op de audittrail, met uw naam.", "It goes on the audit trail, with your name."),
                ],
                button: lang.t("Instemming vastleggen", "Record the consent"),
                back: &page_path,
            },
            Method::POST,
            &format!("/v1/subscriptions/{}/validation", seg(&id)),
        )
        .await?;
    Ok(redirect(&format!("{page_path}?notice=consented")))
}
