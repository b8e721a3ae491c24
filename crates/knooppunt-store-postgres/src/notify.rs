//! Changes told to the other hubs with `NOTIFY` (sent at the commit of the transaction that
//! made them) and heard with `LISTEN` on a connection of its own. Best effort: a hub that
//! misses one (its listening connection was down) is told to reload everything when it
//! reconnects, and its polls stay the safety net.

use std::time::Duration;

use knooppunt_store::{ChangeListener, StoreChange};
use tokio_postgres::AsyncMessage;

/// The channel every hub listens on.
pub(crate) const CHANNEL: &str = "knooppunt";

/// The payload of a subscription change.
pub(crate) const SUBSCRIPTIONS: &str = "s";

/// PostgreSQL's limit on a payload is 8000 bytes; past this, "deliveries for any".
const MAX_PAYLOAD: usize = 7900;

/// The payload of deliveries queued for these subscriptions: `d` and the ids, one per line.
pub(crate) fn deliveries(subscriptions: &[&str]) -> String {
    listed('d', subscriptions)
}

/// The payload of deliveries of these subscriptions withdrawn: `w` and the ids, one per
/// line.
pub(crate) fn withdrawn(subscriptions: &[&str]) -> String {
    listed('w', subscriptions)
}

/// `kind` and the ids, one per line; `kind` and `*` (any) past the limit.
fn listed(kind: char, subscriptions: &[&str]) -> String {
    let mut payload = String::from(kind);
    for id in subscriptions {
        if payload.len() + id.len() + 1 > MAX_PAYLOAD || id.contains('\n') {
            return format!("{kind}*");
        }
        payload.push('\n');
        payload.push_str(id);
    }
    payload
}

fn parse(payload: &str) -> Option<StoreChange> {
    if payload == SUBSCRIPTIONS {
        return Some(StoreChange::Subscriptions);
    }
    // A sink paused: `p`, until when, and the sink on the next line (`Cluster::pause_sink`).
    if let Some(pause) = payload.strip_prefix('p') {
        let (until, sink) = pause.split_once('\n')?;
        return Some(StoreChange::SinkPaused {
            sink: sink.to_owned(),
            until_ms: until.parse().ok()?,
        });
    }
    let mut chars = payload.chars();
    let kind = chars.next()?;
    let ids = chars.as_str();
    let ids = (ids != "*").then(|| {
        ids.split('\n')
            .filter(|id| !id.is_empty())
            .map(str::to_owned)
            .collect()
    });
    match kind {
        'd' => Some(StoreChange::Deliveries(ids)),
        'w' => Some(StoreChange::Withdrawn(ids)),
        _ => None,
    }
}

/// Listens until the task is aborted, reconnecting after a lost connection.
pub(crate) async fn listen(database: crate::tls::Database, listener: ChangeListener) {
    let mut first = true;
    loop {
        let listened = match &database.tls {
            None => match database.config.connect(tokio_postgres::NoTls).await {
                Ok(connected) => listen_on(connected, &listener, first).await,
                Err(error) => Err(error),
            },
            Some(tls) => match database.config.connect(tls.clone()).await {
                Ok(connected) => listen_on(connected, &listener, first).await,
                Err(error) => Err(error),
            },
        };
        match listened {
            Ok(()) => {
                tracing::warn!("The database connection for change notices closed; reconnecting.")
            }
            Err(error) => {
                tracing::warn!(%error, "The database connection for change notices failed; reconnecting.")
            }
        }
        first = false;
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

async fn listen_on<S, T>(
    (client, mut connection): (tokio_postgres::Client, tokio_postgres::Connection<S, T>),
    listener: &ChangeListener,
    first: bool,
) -> Result<(), tokio_postgres::Error>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (notices, mut received) = tokio::sync::mpsc::unbounded_channel();
    let driver = tokio::spawn(async move {
        loop {
            match std::future::poll_fn(|cx| connection.poll_message(cx)).await {
                Some(Ok(AsyncMessage::Notification(notice))) => {
                    let _ = notices.send(notice.payload().to_owned());
                }
                Some(Ok(_)) => {}
                Some(Err(error)) => return Err(error),
                None => return Ok(()),
            }
        }
    });
    client.batch_execute(&format!("LISTEN {CHANNEL}")).await?;
    if !first {
        // Changes made while this hub was not listening: look at everything again.
        listener(StoreChange::Subscriptions);
        listener(StoreChange::Deliveries(None));
        listener(StoreChange::Withdrawn(None));
    }
    while let Some(payload) = received.recv().await {
        if let Some(change) = parse(&payload) {
            listener(change);
        }
    }
    drop(client);
    match driver.await {
        Ok(result) => result,
        Err(_) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_round_trip_and_stay_under_the_limit() {
        assert_eq!(parse(SUBSCRIPTIONS), Some(StoreChange::Subscriptions));
        let payload = deliveries(&["a", "b"]);
        assert_eq!(
            parse(&payload),
            Some(StoreChange::Deliveries(Some(vec!["a".into(), "b".into()])))
        );
        let many: Vec<String> = (0..1000).map(|i| format!("{i:036}")).collect();
        let refs: Vec<&str> = many.iter().map(String::as_str).collect();
        let payload = deliveries(&refs);
        assert!(payload.len() < 8000);
        assert_eq!(parse(&payload), Some(StoreChange::Deliveries(None)));
        assert_eq!(
            parse(&withdrawn(&["a"])),
            Some(StoreChange::Withdrawn(Some(vec!["a".into()])))
        );
        assert_eq!(parse(&withdrawn(&refs)), Some(StoreChange::Withdrawn(None)));
        assert_eq!(
            parse("p1700000000000\nhttps://sink.example.nl:443"),
            Some(StoreChange::SinkPaused {
                sink: "https://sink.example.nl:443".into(),
                until_ms: 1_700_000_000_000
            })
        );
        assert_eq!(parse("p17"), None);
        assert_eq!(parse("x"), None);
    }
}
