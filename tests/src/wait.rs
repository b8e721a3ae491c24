//! Waiting in a scenario. A scenario that waits for the hub waits for what it expects, not
//! for a time ([`until`]): it goes on as soon as the hub is there, and on a slow machine it
//! still waits long enough. Only a scenario that shows that something does *not* happen
//! pauses for a fixed time ([`quiet`]): the pause is what the absence is measured over.

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

/// How often [`until`] asks again.
const POLL: Duration = Duration::from_millis(20);

/// Asks `check` until it gives `Some` (every 20 ms, for at most `within`), and gives that;
/// past `within` the test fails, saying `what` it waited for and what `check` last saw
/// (`Err` carries it: what the hub said instead).
pub async fn until<T, E, F, Fut>(what: &str, within: Duration, mut check: F) -> T
where
    E: std::fmt::Display,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    let deadline = Instant::now() + within;
    loop {
        match check().await {
            Ok(found) => return found,
            Err(seen) => assert!(
                Instant::now() < deadline,
                "waited {within:?} for {what}; the last look saw: {seen}"
            ),
        }
        tokio::time::sleep(POLL).await;
    }
}

/// A pause in which the hub must do nothing more (deliver no further event, write no
/// further entry): what follows checks that it did not. `why` says what must not happen,
/// for the reader; a condition cannot end this wait, for absence is only seen over time.
pub async fn quiet(why: &str, pause: Duration) {
    let _ = why;
    tokio::time::sleep(pause).await;
}
