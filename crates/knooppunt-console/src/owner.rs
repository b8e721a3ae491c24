//! The data owner's pages: the approval queue (what waits first; grant, refuse, revoke with
//! its reason), and who received one of its events. Its catalog entries are in `catalog.rs`.

use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::response::Response;
use http::{Method, StatusCode};
use maud::html;

use crate::forms::{Posted, Problem, encode};
use crate::forms::{field, request};
use crate::layout::{self, Section, badge, csrf, page, respond};
use crate::{BASE, Console, Visitor, redirect};
use knooppunt_api::DecisionIn;
use knooppunt_api::{EventReceiptsOut, GrantOut};

type Params = Query<std::collections::HashMap<String, String>>;

/// `GET /console/approvals`: the requests and decisions on the visitor's entries.
pub(crate) async fn approvals(
    State(console): State<Arc<Console>>,
    visitor: Visitor,
    Query(query): Params,
) -> Result<Response, Response> {
    approvals_page(&console, &visitor, &query, None).await
}

/// The approvals page; `refused` is a decision the API refused (which grant, and why),
/// shown at that grant with what was typed kept.
async fn approvals_page(
    console: &Console,
    visitor: &Visitor,
    query: &std::collections::HashMap<String, String>,
    refused: Option<(&str, &str, &str, &Problem)>,
) -> Result<Response, Response> {
    let lang = visitor.lang;
    let path = layout::with_cursor("/v1/approvals?pageSize=100", query);
    let answer = console.get(visitor, &path).await.checked(visitor)?;
    let mut grants: Vec<GrantOut> = answer.parse(visitor)?;
    grants.retain(|g| {
        visitor.principal.is_admin() || g.owner.as_deref() == Some(visitor.principal.name.as_str())
    });
    // What waits for a decision first, the oldest request at the top; then the decided.
    grants.sort_by(|a, b| {
        (a.state != "requested", &a.requested).cmp(&(b.state != "requested", &b.requested))
    });
    let waiting = grants.iter().filter(|g| g.state == "requested").count() as u64;
    let notice = match query.get("notice").map(String::as_str) {
        Some("granted") => Some(lang.t(
            "Toegestaan: de gebeurtenissen gaan nu naar dit abonnement.",
            "Granted: the events now go to this subscription.",
        )),
        Some("refused") => Some(lang.t("Geweigerd.", "Refused.")),
        Some("revoked") => Some(lang.t(
            "Ingetrokken: er gaat niets meer naar dit abonnement.",
            "Revoked: nothing more goes to this subscription.",
        )),
        _ => None,
    };
    let content = html! {
        @if let Some(notice) = notice { (layout::notice(true, notice)) }
        p class="utrecht-paragraph" {
            (lang.count(waiting, ("verzoek wacht op uw besluit.", "verzoeken wachten op uw besluit."), ("request waits for your decision.", "requests wait for your decision.")))
        }
        @if grants.is_empty() {
            p class="utrecht-paragraph" { (lang.t("Geen verzoeken.", "No requests.")) }
        }
        @for (i, g) in grants.iter().enumerate() {
            @let heading = format!("grant-{i}");
            @let entry = g.eventtype.clone();
            @let subscription = g.subscription.clone().unwrap_or_default();
            @let event_type = g.event_type.clone().unwrap_or_else(|| entry.clone());
            @let here = refused.filter(|(e, s, _, _)| *e == entry && *s == subscription);
            section class="kp-card" aria-labelledby=(heading) {
                h2 class="utrecht-heading-3" id=(heading) {
                    (g.subscriber.as_deref().unwrap_or("—")) " → " span class="kp-break" { (event_type) }
                }
                @if let Some((_, _, _, problem)) = here { (layout::problem(lang, problem)) }
                (layout::data_list(vec![
                    (lang.t("Status", "State"), badge(lang, &g.state)),
                    (lang.t("Gebeurtenistype", "Event type"), html! {
                        a class="utrecht-link kp-break" href={ (BASE) "/eventtypes/" (encode(&entry)) } { (event_type) }
                        @if let Some(source) = &g.source { br; small class="kp-break" { (source) } }
                    }),
                    (lang.t("Abonnement", "Subscription"), html! { code class="utrecht-code kp-break" { (subscription) } }),
                    (lang.t("Aangevraagd", "Requested"), layout::at(&g.requested)),
                    (lang.t("Besluit", "Decision"), html! {
                        @if let Some(decided) = &g.decided {
                            (layout::at(decided)) " " (lang.t("door ", "by ")) (g.decided_by.as_deref().unwrap_or("—"))
                            @if let Some(reason) = &g.reason { " — " (reason) }
                        } @else { "—" }
                    }),
                ]))
                form method="post" class="kp-form" novalidate
                    action={ (BASE) "/approvals/" (encode(&entry)) "/" (encode(&subscription)) } {
                    (csrf(visitor))
                    @let revoking = g.state == "granted";
                    div class={ "utrecht-form-field" @if here.is_some() { " utrecht-form-field--invalid" } } {
                        label class="utrecht-form-label" for={ "reason-" (i) } {
                            @if revoking {
                                (lang.t("Reden (verplicht bij intrekken; de abonnee ziet hem)", "Reason (required to revoke; the subscriber sees it)"))
                            } @else {
                                (lang.t("Reden (optioneel; de abonnee ziet hem)", "Reason (optional; the subscriber sees it)"))
                            }
                        }
                        input class="utrecht-textbox utrecht-textbox--html-input" type="text" id={ "reason-" (i) } name="reason"
                            value=(here.map(|(_, _, reason, _)| reason).unwrap_or_default()) aria-invalid=(here.is_some()) required[revoking];
                    }
                    div class="kp-actions" {
                        @if g.state != "granted" {
                            button type="submit" name="state" value="granted" class="utrecht-button utrecht-button--primary-action" { (lang.t("Toestaan", "Grant")) }
                        }
                        @if g.state == "requested" {
                            button type="submit" name="state" value="refused" class="utrecht-button utrecht-button--secondary-action" { (lang.t("Weigeren", "Refuse")) }
                        }
                        @if revoking {
                            button type="submit" name="state" value="revoked" class="utrecht-button utrecht-button--secondary-action" { (lang.t("Intrekken", "Revoke")) }
                        }
                    }
                }
            }
        }
        (layout::next_page(lang, &format!("{BASE}/approvals"), answer.next_cursor().as_deref()))
    };
    let status = if refused.is_some() {
        StatusCode::BAD_REQUEST
    } else {
        StatusCode::OK
    };
    Ok(respond(
        status,
        page(
            lang,
            Some(visitor),
            Section::Approvals,
            lang.t("Goedkeuringen", "Approvals"),
            content,
        ),
    ))
}

/// `POST /console/approvals/{entry}/{subscription}`: the owner's decision, through the API;
/// a refusal (a revocation without its reason, say) is shown at the request.
pub(crate) async fn decide(
    State(console): State<Arc<Console>>,
    Path((entry, subscription)): Path<(String, String)>,
    posted: Posted,
) -> Result<Response, Response> {
    let visitor = &posted.visitor;
    let state = posted.fields.get("state");
    let reason = posted.fields.get("reason").trim();
    let body = request(&DecisionIn {
        state: field(posted.fields.get("state")),
        reason: field(posted.fields.get("reason")),
    });
    let answer = console
        .call(
            visitor,
            Method::PUT,
            &format!(
                "/v1/eventtypes/{}/approvals/{}",
                encode(&entry),
                encode(&subscription)
            ),
            Some(&body),
        )
        .await;
    if answer.status.is_client_error() && answer.status != StatusCode::NOT_FOUND {
        let problem = answer.problem();
        return approvals_page(
            &console,
            visitor,
            &Default::default(),
            Some((&entry, &subscription, reason, &problem)),
        )
        .await;
    }
    answer.checked(visitor)?;
    let notice = match state {
        "granted" | "refused" | "revoked" => state,
        _ => "",
    };
    Ok(redirect(&format!("{BASE}/approvals?notice={notice}")))
}

/// `GET /console/receipts?sequence=N`: who received an event, and when.
pub(crate) async fn receipts(
    State(console): State<Arc<Console>>,
    visitor: Visitor,
    Query(query): Params,
) -> Result<Response, Response> {
    let lang = visitor.lang;
    let sequence = query
        .get("sequence")
        .map(|s| s.trim().to_owned())
        .unwrap_or_default();
    let answer = if sequence.is_empty() {
        None
    } else {
        Some(
            console
                .get(
                    &visitor,
                    &format!("/v1/events/{}/receipts", encode(&sequence)),
                )
                .await,
        )
    };
    // What was found, or the API's problem (a sequence that is no number, say).
    let found = match answer {
        None => None,
        Some(answer) if answer.ok() => Some(Ok(answer.parse::<EventReceiptsOut>(&visitor)?)),
        Some(answer) => Some(Err(answer.problem())),
    };
    let content = html! {
        form method="get" action={ (BASE) "/receipts" } class="kp-form" {
            div class="utrecht-form-field" {
                label class="utrecht-form-label" for="sequence" { (lang.t("Volgnummer van de gebeurtenis (uit het antwoord op het publiceren)", "The event's sequence number (from the answer to publishing it)")) }
                input class="utrecht-textbox utrecht-textbox--html-input" type="text" inputmode="numeric" id="sequence" name="sequence" value=(sequence);
            }
            div { button type="submit" class="utrecht-button utrecht-button--primary-action" { (lang.t("Opzoeken", "Look up")) } }
        }
        @match &found {
            None => {},
            Some(Err(problem)) => (layout::problem(lang, problem)),
            Some(Ok(r)) => {
                @if let Some(event) = &r.event {
                    p class="utrecht-paragraph" { (event.event_type) " — " (event.source) " — " (event.id) }
                } @else {
                    p class="utrecht-paragraph" { (lang.t("De gebeurtenis zelf is niet meer bewaard.", "The event itself is no longer kept.")) }
                }
                @if r.receipts.is_empty() {
                    p class="utrecht-paragraph" { (lang.t("Nog door niemand ontvangen.", "Not received by anyone yet.")) }
                } @else {
                    (layout::table("receipts-caption", lang.t("Ontvangen door", "Received by"), &[lang.t("Abonnee", "Subscriber"), lang.t("Abonnement", "Subscription"), lang.t("Afgeleverd", "Delivered")], r.receipts.iter().map(|x| vec![
                        html! { (x.subscriber.as_deref().unwrap_or("—")) },
                        layout::long(&x.subscription),
                        layout::at(&x.delivered_time),
                    ]).collect()))
                }
            }
        }
    };
    Ok(respond(
        StatusCode::OK,
        page(
            lang,
            Some(&visitor),
            Section::Receipts,
            lang.t("Ontvangsten", "Receipts"),
            content,
        ),
    ))
}
