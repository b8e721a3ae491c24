//! Replays of a subscription's retained events: started, followed and cancelled.

use super::*;
use crate::forms::{field, request};
use knooppunt_api::ReplayIn;

/// `POST /console/subscriptions/{id}/replays`.
pub(crate) async fn start_replay(
    State(console): State<Arc<Console>>,
    Path(id): Path<String>,
    posted: Posted,
) -> Result<Response, Response> {
    let visitor = &posted.visitor;
    let body = request(&ReplayIn {
        from: field(posted.fields.get("from")),
        until: field(posted.fields.get("until")),
    });
    let answer = console
        .call(
            visitor,
            Method::POST,
            &format!("/v1/subscriptions/{}/replays", seg(&id)),
            Some(&body),
        )
        .await
        .checked(visitor)?
        .parse::<ReplayOut>(visitor)?;
    Ok(redirect(&format!(
        "{BASE}/subscriptions/{}/replays/{}",
        seg(&id),
        seg(&answer.id)
    )))
}

/// `GET /console/subscriptions/{id}/replays/{replay}`: follows it while it runs.
pub(crate) async fn replay(
    State(console): State<Arc<Console>>,
    visitor: Visitor,
    Path((id, replay)): Path<(String, String)>,
) -> Result<Response, Response> {
    let lang = visitor.lang;
    let answer = console
        .get(
            &visitor,
            &format!("/v1/subscriptions/{}/replays/{}", seg(&id), seg(&replay)),
        )
        .await
        .checked(&visitor)?;
    let r: ReplayOut = answer.parse(&visitor)?;
    let content = html! {
        div id="replay-progress" data-refresh="2" aria-live="polite" {
            (data_list(vec![
                (lang.t("Status", "State"), badge(lang, &r.state)),
                (lang.t("Venster", "Window"), html! { (layout::at(&r.from)) " – " (layout::at(&r.until)) }),
                (lang.t("In de wachtrij gezet", "Queued"), html! { (r.events_queued) }),
                (lang.t("Laatste gebeurtenis", "Last event"), layout::maybe_at(r.last_event_time.as_deref())),
                (lang.t("Aangevraagd door", "Requested by"), html! { (r.requested_by) }),
                (lang.t("Klaar", "Finished"), layout::maybe_at(r.finished_time.as_deref())),
            ]))
            @if let Some(error) = &r.error { (layout::problem(lang, &Problem::message(error.as_str()))) }
        }
        @if r.state == "running" {
            form method="post" action={ (BASE) "/subscriptions/" (seg(&id)) "/replays/" (seg(&replay)) "/cancel" } class="kp-actions" {
                (csrf(&visitor))
                button type="submit" class="utrecht-button utrecht-button--secondary-action" { (lang.t("Afspelen stoppen", "Stop the replay")) }
            }
        }
        p class="utrecht-paragraph" {
            a class="utrecht-link" href={ (BASE) "/subscriptions/" (seg(&id)) } { (lang.t("Terug naar het abonnement", "Back to the subscription")) }
        }
    };
    Ok(respond(
        StatusCode::OK,
        page(
            lang,
            Some(&visitor),
            Section::Subscriptions,
            lang.t("Opnieuw afspelen", "Replay"),
            content,
        ),
    ))
}

/// `POST /console/subscriptions/{id}/replays/{replay}/cancel`.
pub(crate) async fn cancel_replay(
    State(console): State<Arc<Console>>,
    Path((id, replay)): Path<(String, String)>,
    posted: Posted,
) -> Result<Response, Response> {
    let visitor = &posted.visitor;
    console
        .call(
            visitor,
            Method::POST,
            &format!(
                "/v1/subscriptions/{}/replays/{}/cancel",
                seg(&id),
                seg(&replay)
            ),
            None,
        )
        .await
        .checked(visitor)?;
    Ok(redirect(&format!(
        "{BASE}/subscriptions/{}/replays/{}",
        seg(&id),
        seg(&replay)
    )))
}
