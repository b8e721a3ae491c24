//! The console's Dutch for what the API says in English: its problem codes, and the
//! reasons and errors of deliveries (the sink's answer, a dead letter's reason, why a
//! subscription waits or was disabled). One table each; the API keeps its English. A text
//! the table does not know is shown as it came, marked as English (`lang="en"`).

use maud::{Markup, html};

use crate::Lang;

/// Every problem code (`urn:knooppunt:problem:<code>`) the API answers, with what it means
/// in Dutch and in English.
pub(crate) const PROBLEMS: &[(&str, &str, &str)] = &[
    (
        "invalid-input",
        "De invoer klopt niet",
        "The input is not valid",
    ),
    (
        "invalid-event",
        "De gebeurtenis voldoet niet aan CloudEvents",
        "The event breaks CloudEvents",
    ),
    (
        "unauthorized",
        "U bent niet (meer) ingelogd",
        "You are not (or no longer) signed in",
    ),
    ("forbidden", "Dit mag u niet", "You may not do this"),
    ("not-found", "Niet gevonden", "Not found"),
    (
        "conflict",
        "Dit botst met de huidige toestand",
        "This conflicts with the current state",
    ),
    (
        "gone",
        "Dit wordt niet meer bewaard",
        "This is no longer kept",
    ),
    (
        "too-many-requests",
        "Te veel tegelijk; probeer het zo opnieuw",
        "Too much at once; try again shortly",
    ),
    (
        "method-not-allowed",
        "Deze handeling bestaat hier niet",
        "This action does not exist here",
    ),
    (
        "unsupported-media-type",
        "Dit soort inhoud neemt de hub niet aan",
        "The hub does not take this kind of content",
    ),
    ("payload-too-large", "Te groot", "Too large"),
    (
        "request-timeout",
        "Het verzoek kwam niet op tijd binnen",
        "The request did not arrive in time",
    ),
    (
        "unavailable",
        "De hub kan dit nu niet; probeer het later opnieuw",
        "The hub cannot do this now; try again later",
    ),
    (
        "backlog-full",
        "De hub houdt al zoveel onbezorgde gegevens als hij mag",
        "The hub holds as much undelivered data as it may",
    ),
    (
        "internal-error",
        "De hub kon dit niet afmaken; de beheerders vinden de oorzaak in zijn log",
        "The hub could not finish this; its operators find the cause in its log",
    ),
    (
        "not-ready",
        "De hub is nog niet klaar om verzoeken aan te nemen",
        "The hub is not ready to take requests yet",
    ),
    (
        "too-many-connections",
        "Te veel verbindingen vanaf uw adres",
        "Too many connections from your address",
    ),
];

/// What a problem code means, in `lang`; `None` for a code the table lacks.
pub(crate) fn problem(lang: Lang, code: &str) -> Option<&'static str> {
    PROBLEMS
        .iter()
        .find(|(known, _, _)| *known == code)
        .map(|(_, nl, en)| *lang_pick(lang, nl, en))
}

fn lang_pick<'a>(lang: Lang, nl: &'a &'static str, en: &'a &'static str) -> &'a &'static str {
    match lang {
        Lang::Nl => nl,
        Lang::En => en,
    }
}

/// The hub's English texts of deliveries and their Dutch: `{}` stands for a part that
/// varies (a status code, a count), carried over. The first that fits wins: the longer
/// before the shorter it starts with.
pub(crate) const DELIVERY: &[(&str, &str)] = &[
    (
        "the sink answered 410 Gone: nothing is delivered any more and what was pending became dead letters; replace the subscription with another sink",
        "het eindpunt antwoordde 410 Gone: er wordt niets meer bezorgd en wat nog wachtte werd dode brief; vervang het abonnement door een met een ander eindpunt",
    ),
    (
        "the sink answered 410 Gone: the subscription is disabled and its pending {}",
        "het eindpunt antwoordde 410 Gone: het abonnement is uitgeschakeld en wat nog wachtte {}",
    ),
    (
        "the sink answered 410 Gone: the subscription is disabled",
        "het eindpunt antwoordde 410 Gone: het abonnement is uitgeschakeld",
    ),
    (
        "the sink rejected the event (400, 413 or 415): retrying cannot help",
        "het eindpunt wees de gebeurtenis af (400, 413 of 415): opnieuw proberen helpt niet",
    ),
    (
        "the sink did not consent to deliveries ({}); it may call the callback URL sent in WebHook-Request-Callback, or an administrator may record consent by agreement",
        "het eindpunt stemde niet in met bezorgingen ({}); het kan de callback-URL aanroepen die in WebHook-Request-Callback meekwam, of een beheerder kan de instemming vastleggen",
    ),
    (
        "the broker did not take the hub's connection ({}); replace the subscription once that is fixed, or an administrator may record consent by agreement",
        "de broker nam de verbinding van de hub niet aan ({}); vervang het abonnement zodra dat is opgelost, of een beheerder kan de instemming vastleggen",
    ),
    (
        "the sink answered {} with WebHook-Allowed-Origin {}",
        "het eindpunt antwoordde {} met WebHook-Allowed-Origin {}",
    ),
    ("absent", "afwezig"),
    ("the sink answered {}", "het eindpunt antwoordde {}"),
    (
        "maxAttempts ({}) exhausted: the event was handed out that often {}",
        "het maximum van {} pogingen is bereikt: de gebeurtenis is zo vaak uitgegeven {}",
    ),
    (
        "maxAttempts ({}) exhausted",
        "het maximum van {} pogingen is bereikt",
    ),
    (
        "ttl exhausted: the next attempt would come after the event's time to live",
        "levensduur verstreken: de volgende poging zou na de levensduur (ttl) van de gebeurtenis komen",
    ),
    (
        "ttl exhausted: the event was not acknowledged within its time to live",
        "levensduur verstreken: de gebeurtenis is niet binnen haar levensduur (ttl) bevestigd",
    ),
    (
        "rejected by the consumer: {}",
        "afgewezen door de ontvanger: {}",
    ),
    (
        "shed: the subscription's undelivered events passed {} ([backlog] subscription_max_bytes); the oldest became dead letters",
        "afgestoten: de onbezorgde gebeurtenissen van het abonnement werden meer dan {} ([backlog] subscription_max_bytes); de oudste werden dode brieven",
    ),
    (
        "shed: undelivered for longer than {} s ([backlog] subscription_max_age)",
        "afgestoten: langer dan {} s onbezorgd ([backlog] subscription_max_age)",
    ),
    (
        "connect: the sink's host did not take the connection in time",
        "verbinden: de host van het eindpunt nam de verbinding niet op tijd aan",
    ),
    (
        "connect: the hub could not connect to the sink (refused or unreachable)",
        "verbinden: de hub kon het eindpunt niet bereiken (geweigerd of onbereikbaar)",
    ),
    (
        "answer: the sink did not answer in time",
        "antwoord: het eindpunt antwoordde niet op tijd",
    ),
    (
        "answer: the exchange with the sink broke off before it answered",
        "antwoord: de uitwisseling met het eindpunt brak af voordat het antwoordde",
    ),
    (
        "DNS: the sink's host name could not be resolved",
        "DNS: de hostnaam van het eindpunt is niet gevonden",
    ),
    (
        "TLS: the sink's certificate could not be verified against the CA certificates the hub trusts (the system's and delivery.ca_file)",
        "TLS: het certificaat van het eindpunt kon niet worden gecontroleerd met de CA-certificaten die de hub vertrouwt (die van het systeem en delivery.ca_file)",
    ),
    (
        "TLS: the handshake with the sink failed (does it speak HTTPS on that port?)",
        "TLS: de handshake met het eindpunt mislukte (spreekt het HTTPS op die poort?)",
    ),
];

/// The hub's English for the refusals a person meets most in the console (a problem's
/// detail, or the reason of one of its parameters), and their Dutch, as [`DELIVERY`].
pub(crate) const REFUSALS: &[(&str, &str)] = &[
    (
        "is required to make an approval `{}`: say why, for the subscriber",
        "is verplicht om een toestemming op `{}` te zetten: zeg waarom, voor de abonnee",
    ),
    ("refused", "geweigerd"),
    ("revoked", "ingetrokken"),
    (
        "invalid CESQL expression: {}",
        "geen geldige CESQL-expressie (de toelichting in het Engels: {})",
    ),
    (
        "the sink's address is in a range the hub does not deliver to (loopback, private, link-local or otherwise reserved); an operator can allow it with delivery.allow_sink_networks",
        "het adres van het eindpunt ligt in een reeks waar de hub niet naar bezorgt (loopback, privé, link-local of anderszins gereserveerd); de beheerder van de hub kan het toestaan met delivery.allow_sink_networks",
    ),
    (
        "principal `{}` publishes only sources starting with `{}`; make the entry's source start with it (`{}` would also cover other sources)",
        "principal `{}` publiceert alleen bronnen die beginnen met `{}`; laat de bron van het item daarmee beginnen (`{}` zou ook andere bronnen omvatten)",
    ),
    (
        "principal `{}` may publish only sources starting with `{}`, so an entry's source must start with one of them; `{}` would also cover sources outside them",
        "principal `{}` mag alleen bronnen publiceren die beginnen met `{}`, dus de bron van een item moet met een daarvan beginnen; `{}` zou ook bronnen daarbuiten omvatten",
    ),
    (
        "1 to {} letters, digits, `-`, `_`, `.`, `:` or `@` (an access token's principal is named by its claim, with the issuer's name_prefix)",
        "1 tot {} letters, cijfers, `-`, `_`, `.`, `:` of `@`, zonder spaties (de principal van een toegangstoken heet naar zijn claim, met de name_prefix van de uitgever)",
    ),
    (
        "the secret before the current one still signs until {} (the overlap the last rotation announced): rotate again after that, so that no secret stops signing earlier than its rotation said",
        "het geheim van vóór het huidige ondertekent nog tot {} (de overgangstijd die de vorige wissel aankondigde): wissel daarna opnieuw, zodat geen geheim eerder stopt dan zijn wissel zei",
    ),
];

/// Refusals known by a part of their text (the whole varies with a library's words), with
/// what they mean in Dutch.
const REFUSALS_CONTAINING: &[(&str, &str)] = &[(
    "is outside the schema; the hub fetches no references",
    "het schema verwijst naar iets buiten zichzelf (een externe `$ref`); de hub haalt geen verwijzingen op: neem alles in het schema zelf op",
)];

/// A refusal's text in Dutch when a table knows it.
pub(crate) fn refusal(text: &str) -> Option<String> {
    REFUSALS
        .iter()
        .find_map(|(en, nl)| fill(en, nl, text))
        .or_else(|| {
            REFUSALS_CONTAINING
                .iter()
                .find(|(part, _)| text.contains(part))
                .map(|(_, nl)| (*nl).to_owned())
        })
}

/// `text` in Dutch when the table knows it.
pub(crate) fn dutch(text: &str) -> Option<String> {
    DELIVERY.iter().find_map(|(en, nl)| fill(en, nl, text))
}

/// `nl` with the parts of `text` that `en`'s `{}` stand for, when `text` fits `en`.
fn fill(en: &str, nl: &str, text: &str) -> Option<String> {
    let fixed: Vec<&str> = en.split("{}").collect();
    let mut parts = Vec::new();
    let mut rest = text.strip_prefix(fixed[0])?;
    for (i, piece) in fixed.iter().enumerate().skip(1) {
        let last = i == fixed.len() - 1;
        let at = if last && piece.is_empty() {
            rest.len()
        } else if last {
            rest.len()
                .checked_sub(piece.len())
                .filter(|&at| rest[at..] == **piece)?
        } else {
            rest.find(piece)?
        };
        parts.push(&rest[..at]);
        rest = &rest[at + piece.len()..];
    }
    if !rest.is_empty() || parts.iter().any(|p| p.is_empty()) {
        return None;
    }
    let mut out = String::new();
    let mut parts = parts.into_iter();
    for (i, piece) in nl.split("{}").enumerate() {
        if i > 0 {
            // A part may be a text of a table itself (why a handshake failed, a state).
            let part = parts.next().unwrap_or_default();
            let known = REFUSALS
                .iter()
                .find(|(en, _)| *en == part)
                .map(|(_, nl)| (*nl).to_owned());
            out.push_str(
                &known
                    .or_else(|| dutch(part))
                    .unwrap_or_else(|| part.to_owned()),
            );
        }
        out.push_str(piece);
    }
    Some(out)
}

/// A delivery's text (an error, a reason) in the page's language: in Dutch from the table,
/// else as the hub wrote it, marked as English.
pub(crate) fn delivery(lang: Lang, text: &str) -> Markup {
    match (lang, dutch(text)) {
        (Lang::Nl, Some(dutch)) => html! { (dutch) },
        (Lang::Nl, None) => html! { span lang="en" { (text) } },
        (Lang::En, _) => html! { (text) },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_problem_code_of_the_api_has_a_text() {
        for code in knooppunt_api::problem::CODES {
            assert!(
                problem(Lang::Nl, code).is_some(),
                "no Dutch for the problem code {code}"
            );
            assert!(
                problem(Lang::En, code).is_some(),
                "no English for the problem code {code}"
            );
        }
        assert_eq!(
            PROBLEMS.len(),
            knooppunt_api::problem::CODES.len(),
            "a text for a code the API does not answer"
        );
    }

    /// The refusals a Dutch console user meets most read in Dutch: the hub's own texts
    /// where a test can make them, else as the hub writes them.
    #[test]
    fn the_common_refusals_read_in_dutch() {
        let name = knooppunt_services::use_case::principals::check_principal_name("met spatie")
            .unwrap_err();
        assert!(refusal(&name).unwrap().contains("zonder spaties"), "{name}");
        let private = knooppunt_delivery::AddressRefused.to_string();
        assert!(
            refusal(&private).unwrap().contains("gereserveerd"),
            "{private}"
        );
        for text in [
            "is required to make an approval `revoked`: say why, for the subscriber",
            "invalid CESQL expression: LIKE must be followed by a string literal pattern (at character 9)",
            "the sink's address is in a range the hub does not deliver to (loopback, private, link-local or otherwise reserved); an operator can allow it with delivery.allow_sink_networks",
            "principal `gemeente` publishes only sources starting with `urn:nld:oin:00000001823288444000:`; make the entry's source start with it (`urn:nld:` would also cover other sources)",
            "is not a usable JSON Schema: `https://example.com/s.json` is outside the schema; the hub fetches no references",
            "the secret before the current one still signs until 2026-11-29T10:00:00.000Z (the overlap the last rotation announced): rotate again after that, so that no secret stops signing earlier than its rotation said",
        ] {
            let dutch = refusal(text).unwrap_or_else(|| panic!("no Dutch for {text}"));
            assert_ne!(dutch, text);
        }
        assert_eq!(
            refusal("is required to make an approval `revoked`: say why, for the subscriber")
                .unwrap(),
            "is verplicht om een toestemming op `ingetrokken` te zetten: zeg waarom, voor de abonnee"
        );
        assert_eq!(refusal("something new"), None);
    }

    #[test]
    fn the_varying_parts_are_carried_over() {
        assert_eq!(
            dutch("the sink answered 500").unwrap(),
            "het eindpunt antwoordde 500"
        );
        assert_eq!(
            dutch("maxAttempts (30) exhausted").unwrap(),
            "het maximum van 30 pogingen is bereikt"
        );
        assert_eq!(
            dutch("the sink answered 410 Gone: the subscription is disabled").unwrap(),
            "het eindpunt antwoordde 410 Gone: het abonnement is uitgeschakeld"
        );
        assert_eq!(
            dutch("shed: undelivered for longer than 60 s ([backlog] subscription_max_age)")
                .unwrap(),
            "afgestoten: langer dan 60 s onbezorgd ([backlog] subscription_max_age)"
        );
        assert_eq!(
            dutch("the sink did not consent to deliveries (connect: the hub could not connect to the sink (refused or unreachable)); it may call the callback URL sent in WebHook-Request-Callback, or an administrator may record consent by agreement").unwrap(),
            "het eindpunt stemde niet in met bezorgingen (verbinden: de hub kon het eindpunt niet bereiken (geweigerd of onbereikbaar)); het kan de callback-URL aanroepen die in WebHook-Request-Callback meekwam, of een beheerder kan de instemming vastleggen",
            "a part is translated too"
        );
        assert_eq!(
            dutch("the sink answered 200 with WebHook-Allowed-Origin absent").unwrap(),
            "het eindpunt antwoordde 200 met WebHook-Allowed-Origin afwezig"
        );
        assert_eq!(dutch("something new"), None);
        assert_eq!(dutch("maxAttempts () exhausted"), None);
    }

    #[test]
    fn every_entry_fits_itself_and_has_as_many_parts_in_both_languages() {
        for (en, nl) in DELIVERY {
            assert_eq!(en.matches("{}").count(), nl.matches("{}").count(), "{en}");
            let sample = en.replace("{}", "7");
            assert!(dutch(&sample).is_some(), "{en}");
        }
    }
}
