//! What one delivery attempt's result means (CloudEvents webhook spec section 2.3.3, NL GOV
//! webhook guideline), and the retry policy: exponential backoff with full jitter, bounded by
//! `maxAttempts` and `ttl`.

use std::time::{Duration, SystemTime};

use knooppunt_store::{DeliveryConfig, Verdict};

/// How an attempt ended, before interpretation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Response {
    /// The sink answered with this status; `retry_after` is its `Retry-After` header, if any,
    /// and `answer` what it said when it refused (a bounded excerpt).
    Status {
        code: u16,
        retry_after: Option<String>,
        answer: Option<Box<SinkAnswer>>,
    },
    /// A broker acknowledged the message (MQTT PUBACK or PUBCOMP with a success code, or at
    /// QoS 0 the message written).
    Acknowledged,
    /// A broker refused the message (an MQTT reason code, say), with its reason; `for_good`
    /// when sending it again cannot help.
    Refused { reason: String, for_good: bool },
    /// No answer within the subscription's timeout.
    Timeout,
    /// No connection, or the exchange broke off.
    Failed(String),
}

impl Response {
    /// What an attempt's record says of it: the HTTP status, if one came, and what went
    /// wrong, if anything did (`timeout` is the attempt's).
    pub fn status_and_error(&self, timeout: Duration) -> (Option<u16>, Option<String>) {
        match self {
            Response::Status { code, .. } if (200..300).contains(code) => (Some(*code), None),
            Response::Status { code, .. } => {
                (Some(*code), Some(format!("the sink answered {code}")))
            }
            Response::Acknowledged => (None, None),
            Response::Refused { reason, .. } => (None, Some(reason.clone())),
            Response::Timeout => (
                None,
                Some(format!("no answer within {} ms", timeout.as_millis())),
            ),
            Response::Failed(why) => (None, Some(why.clone())),
        }
    }

    /// What the sink answered to a refused request, if it was an HTTP answer.
    pub fn answer(&self) -> Option<Box<SinkAnswer>> {
        match self {
            Response::Status { answer, .. } => answer.clone(),
            _ => None,
        }
    }
}

/// The start of what a sink answered to a refused delivery: a few of its headers and the
/// first [`SinkAnswer::MAX_BODY`] bytes of its body, with the secrets the hub sent it
/// (header values, credentials) blanked out, for its owner to see why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SinkAnswer {
    /// `Content-Type`, `Retry-After`, `WWW-Authenticate` and `Location`, when sent.
    pub headers: Vec<(String, String)>,
    /// The body's first bytes as text (not UTF-8: replaced; control characters but line
    /// feeds and tabs: escaped).
    pub body: String,
    /// Whether the body went on past what is kept.
    pub truncated: bool,
}

impl SinkAnswer {
    /// Bytes of the body kept.
    pub const MAX_BODY: usize = 1024;
    /// The headers kept, by name.
    pub const HEADERS: [&'static str; 4] = [
        "content-type",
        "retry-after",
        "www-authenticate",
        "location",
    ];
}

/// What the hub does after an attempt: the one classification of every result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Any 2xx: delivered.
    Delivered,
    /// 410: the subscription is retired.
    Gone,
    /// 400, 413, 415: this event will never be accepted; dead letter at once.
    Rejected,
    /// A broker refused it for good (not authorized, an invalid topic, bad credentials):
    /// dead letter at once, with the broker's reason.
    Refused(String),
    /// Try again; not before `not_before` when the sink said so (429/503 `Retry-After`).
    Retry { not_before: Option<Duration> },
    /// The hub cannot send it (an expired access token, a stored event it cannot encode):
    /// dead letter at once, with this reason. Never the result of a response.
    Unsendable(String),
}

/// Classifies an attempt's result. `now` is used to read a `Retry-After` HTTP date; the
/// wait a sink asks for is honoured up to `max_wait` (the hub's `max_retry_after`).
pub fn classify(response: &Response, now: SystemTime, max_wait: Duration) -> Outcome {
    match response {
        Response::Status { code, .. } if (200..300).contains(code) => Outcome::Delivered,
        Response::Acknowledged => Outcome::Delivered,
        Response::Status { code: 410, .. } => Outcome::Gone,
        Response::Status {
            code: 400 | 413 | 415,
            ..
        } => Outcome::Rejected,
        Response::Status {
            code: 429 | 503,
            retry_after,
            ..
        } => Outcome::Retry {
            not_before: retry_after
                .as_deref()
                .and_then(|value| parse_retry_after(value, now))
                .map(|asked| honoured_wait(asked, max_wait)),
        },
        Response::Refused {
            reason,
            for_good: true,
        } => Outcome::Refused(reason.clone()),
        Response::Status { .. }
        | Response::Refused { .. }
        | Response::Timeout
        | Response::Failed(_) => Outcome::Retry { not_before: None },
    }
}

/// The outcome for a subscription in `mode`: an abonnement of the Notificaties API
/// (`notificatie` or `zgw-cloudevent` mode) is treated as Open Notificaties treats its callbacks, which retries
/// every answer that is not 2xx (a 400 or 410 included) until its attempts run out, and
/// never retires the abonnement; other subscriptions as [`classify`] says.
pub fn in_mode(outcome: Outcome, mode: knooppunt_store::DeliveryMode) -> Outcome {
    match (outcome, mode) {
        (
            Outcome::Rejected | Outcome::Gone,
            knooppunt_store::DeliveryMode::Notificatie
            | knooppunt_store::DeliveryMode::ZgwCloudEvent,
        ) => Outcome::Retry { not_before: None },
        (outcome, _) => outcome,
    }
}

/// How long the hub waits for a sink that asked to wait `asked` (its `Retry-After`, here or
/// told by another hub): as asked (http-webhook.md: no further requests until then), up to
/// the hub's maximum `max_wait`.
pub fn honoured_wait(asked: Duration, max_wait: Duration) -> Duration {
    asked.min(max_wait)
}

impl Outcome {
    /// The pause before the next request of a sink that asked for one: its wait (bounded
    /// by [`classify`]), at least the subscription's first backoff.
    pub fn asked_pause(&self, config: &DeliveryConfig) -> Option<Duration> {
        match self {
            Outcome::Retry {
                not_before: Some(wait),
            } => Some((*wait).max(config.initial_backoff)),
            _ => None,
        }
    }
}

/// `Retry-After`: delay-seconds or an HTTP date (RFC 9110 section 10.2.3).
pub fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

/// The delay before retry number `attempts` (1 for the first retry): a random duration
/// between `initialBackoff` and `initialBackoff × 2^(attempts−1)`, capped at `maxBackoff`
/// (full jitter). `random` is uniform in [0, 1).
pub fn backoff(config: &DeliveryConfig, attempts: u32, random: f64) -> Duration {
    let initial = config.initial_backoff;
    let exponent = attempts.saturating_sub(1).min(40);
    let ceiling = initial
        .saturating_mul(1u32 << exponent.min(31))
        .min(config.max_backoff)
        .max(initial);
    initial + (ceiling - initial).mul_f64(random.clamp(0.0, 1.0))
}

/// What the store records after an attempt. `attempts` counts this one; `accepted_at` and
/// `now` are milliseconds since the Unix epoch; `random` drives the jitter.
pub fn verdict(
    outcome: &Outcome,
    config: &DeliveryConfig,
    attempts: u32,
    accepted_at: u64,
    now: u64,
    random: f64,
) -> Verdict {
    let delay = match outcome {
        Outcome::Delivered => return Verdict::Delivered,
        Outcome::Gone => {
            return Verdict::DeadLetter {
                reason: "the sink answered 410 Gone: the subscription is disabled".into(),
            };
        }
        Outcome::Rejected => {
            return Verdict::DeadLetter {
                reason: "the sink rejected the event (400, 413 or 415): retrying cannot help"
                    .into(),
            };
        }
        Outcome::Unsendable(reason) | Outcome::Refused(reason) => {
            return Verdict::DeadLetter {
                reason: reason.clone(),
            };
        }
        // The sink's wait is honoured (http-webhook.md: no further requests until then), up
        // to the hub's maximum ([`classify`]).
        Outcome::Retry { .. } => outcome
            .asked_pause(config)
            .unwrap_or_else(|| backoff(config, attempts, random)),
    };
    if attempts >= config.max_attempts {
        return Verdict::DeadLetter {
            reason: format!("maxAttempts ({}) exhausted", config.max_attempts),
        };
    }
    let next_attempt_at = now.saturating_add(delay.as_millis() as u64);
    let expires_at = accepted_at.saturating_add(config.ttl.as_millis() as u64);
    if next_attempt_at > expires_at {
        let reason = match outcome {
            Outcome::Retry {
                not_before: Some(wait),
            } => format!(
                "the sink asked to wait {} s (Retry-After), which is past the event's ttl",
                wait.as_secs()
            ),
            _ => "ttl exhausted: the next attempt would come after the event's time to live".into(),
        };
        return Verdict::DeadLetter { reason };
    }
    Verdict::Retry { next_attempt_at }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn status(code: u16) -> Response {
        Response::Status {
            code,
            retry_after: None,
            answer: None,
        }
    }

    fn retry() -> Outcome {
        Outcome::Retry { not_before: None }
    }

    #[test]
    fn a_sinks_wait_is_honoured_up_to_the_hubs_maximum_and_at_least_the_first_backoff() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let asked = |seconds: &str| Response::Status {
            code: 503,
            retry_after: Some(seconds.into()),
            answer: None,
        };
        let hour = Duration::from_secs(3600);
        assert_eq!(
            classify(&asked("86400"), now, hour),
            Outcome::Retry {
                not_before: Some(hour)
            }
        );
        assert_eq!(
            classify(&asked("60"), now, hour),
            Outcome::Retry {
                not_before: Some(Duration::from_secs(60))
            }
        );
        let config = config(5, 3600);
        let outcome = classify(&asked("0"), now, hour);
        assert_eq!(outcome.asked_pause(&config), Some(config.initial_backoff));
        let unasked = classify(&Response::Timeout, now, hour);
        assert_eq!(unasked.asked_pause(&config), None);
    }

    #[test]
    fn every_result_has_one_outcome() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let later = httpdate::fmt_http_date(now + Duration::from_secs(120));
        let after = |code: u16, value: &str| Response::Status {
            code,
            retry_after: Some(value.into()),
            answer: None,
        };
        let wait = |secs| Outcome::Retry {
            not_before: Some(Duration::from_secs(secs)),
        };
        let table = [
            (status(200), Outcome::Delivered),
            (status(201), Outcome::Delivered),
            (status(202), Outcome::Delivered),
            (status(204), Outcome::Delivered),
            (status(299), Outcome::Delivered),
            (status(410), Outcome::Gone),
            (status(400), Outcome::Rejected),
            (status(413), Outcome::Rejected),
            (status(415), Outcome::Rejected),
            (status(429), retry()),
            (status(503), retry()),
            (after(429, "7"), wait(7)),
            (after(503, &later), wait(120)),
            (after(503, "soon"), retry()),
            (after(500, "7"), retry()),
            (status(301), retry()),
            (status(401), retry()),
            (status(403), retry()),
            (status(404), retry()),
            (status(408), retry()),
            (status(500), retry()),
            (status(502), retry()),
            (status(504), retry()),
            (Response::Timeout, retry()),
            (Response::Failed("connection refused".into()), retry()),
        ];
        for (response, expected) in table {
            assert_eq!(
                classify(&response, now, Duration::MAX),
                expected,
                "{response:?}"
            );
        }
    }

    fn config(max_attempts: u32, ttl_secs: u64) -> DeliveryConfig {
        let mut map = BTreeMap::new();
        map.insert("maxAttempts".to_owned(), max_attempts.to_string());
        map.insert("ttl".to_owned(), format!("PT{ttl_secs}S"));
        map.insert("initialBackoff".to_owned(), "PT1S".to_owned());
        map.insert("maxBackoff".to_owned(), "PT60S".to_owned());
        DeliveryConfig::try_from_map(&map).unwrap().0
    }

    #[test]
    fn backoff_grows_with_full_jitter_within_the_bounds() {
        let config = config(30, 3600);
        let secs = |attempts, random| backoff(&config, attempts, random).as_secs_f64();
        assert_eq!(secs(1, 0.0), 1.0);
        assert_eq!(secs(1, 0.99), 1.0, "the first retry waits initialBackoff");
        assert_eq!(secs(2, 0.5), 1.5);
        assert_eq!(secs(4, 0.5), 4.5, "between 1 s and 8 s");
        assert_eq!(
            secs(7, 0.0),
            1.0,
            "full jitter reaches down to initialBackoff"
        );
        assert_eq!(secs(7, 1.0), 60.0, "capped at maxBackoff");
        assert_eq!(secs(1000, 1.0), 60.0, "no overflow");
    }

    #[test]
    fn verdicts_respect_max_attempts_ttl_and_retry_after() {
        let config = config(3, 100);
        assert_eq!(
            verdict(&Outcome::Delivered, &config, 1, 0, 0, 0.5),
            Verdict::Delivered
        );
        assert!(matches!(
            verdict(&Outcome::Rejected, &config, 1, 0, 0, 0.5),
            Verdict::DeadLetter { .. }
        ));
        assert_eq!(
            verdict(&retry(), &config, 1, 0, 10_000, 0.0),
            Verdict::Retry {
                next_attempt_at: 11_000
            }
        );
        let Verdict::DeadLetter { reason } = verdict(&retry(), &config, 3, 0, 10_000, 0.0) else {
            panic!("the third failed attempt of three is the last");
        };
        assert!(reason.contains("maxAttempts"), "{reason}");
        let Verdict::DeadLetter { reason } = verdict(&retry(), &config, 1, 0, 99_500, 0.0) else {
            panic!("a retry after the ttl is not made");
        };
        assert!(reason.contains("ttl"), "{reason}");
        let wait = |secs| Outcome::Retry {
            not_before: Some(Duration::from_secs(secs)),
        };
        assert_eq!(
            verdict(&wait(30), &config, 1, 0, 0, 0.0),
            Verdict::Retry {
                next_attempt_at: 30_000
            }
        );
        assert_eq!(
            verdict(&wait(0), &config, 1, 0, 0, 0.0),
            Verdict::Retry {
                next_attempt_at: 1_000
            },
            "clamped up to initialBackoff"
        );
        assert_eq!(
            verdict(&wait(90), &config, 1, 0, 0, 0.0),
            Verdict::Retry {
                next_attempt_at: 90_000
            },
            "honoured past maxBackoff (60 s): http-webhook.md says no requests until then"
        );
        let Verdict::DeadLetter { reason } = verdict(&wait(3600), &config, 1, 0, 0, 0.0) else {
            panic!("a wait past the ttl (100 s) dead-letters the event");
        };
        assert!(
            reason.contains("Retry-After") && reason.contains("3600"),
            "{reason}"
        );
    }
}
