//! One connection to a NATS server, owned by one task: it connects at the first request
//! (the address checked against the hub's sink networks; TLS for `tls://`, after the
//! server's INFO as NATS does it), logs in, subscribes to its own reply subjects, and then
//! publishes what it is asked to. Messages asked for together are written together and
//! followed by one PING: core messages are delivered at its PONG (the server reads in
//! order, so a permissions violation for one comes before it); JetStream messages at their
//! stream's acknowledgement on their reply subject. It pings every [`PING_EVERY`] (a ping
//! unanswered by the next, or a message left unanswered past its attempt's timeout, means
//! a connection to make again), and ends after [`IDLE`] without requests.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use super::Publication;
use super::protocol::{self, Op};
use crate::sink::address::SinkNetworks;
use crate::sink::broker::Endpoint;
use crate::sink::broker::{self, Io, Published, failed};

type Request = broker::Request<Publication>;

/// A connection without requests for this long is closed.
const IDLE: Duration = Duration::from_secs(60);

/// How often the hub pings an otherwise quiet server.
const PING_EVERY: Duration = Duration::from_secs(30);

/// How long connecting (TCP, INFO, TLS, CONNECT and its PONG) may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The most messages the hub leaves unanswered on one connection.
const MAX_IN_FLIGHT: usize = 256;

/// The most requests written together before one PING.
const BATCH: usize = 64;

/// The subscription id of the hub's reply subjects.
const REPLIES: u64 = 1;

/// A connection, logged in: the server's `max_payload`, and the prefix of the reply
/// subjects it listens on.
struct Connected {
    io: Box<dyn Io>,
    max_payload: usize,
    inbox: String,
}

pub(super) async fn run(
    endpoint: Endpoint,
    networks: Arc<SinkNetworks>,
    tls: Arc<rustls::ClientConfig>,
    mut requests: mpsc::Receiver<Request>,
) {
    loop {
        let first = match tokio::time::timeout(IDLE, requests.recv()).await {
            Ok(Some(first)) => first,
            _ => return,
        };
        match connect_within(&endpoint, &networks, &tls).await {
            Ok(connected) => {
                if let Err(why) = serve(connected, first, &mut requests).await {
                    tracing::debug!(server = %endpoint.host, %why, "A NATS connection ended.");
                }
            }
            Err(refused) => broker::refuse_queued(first, &mut requests, &refused),
        }
    }
}

/// Connects and logs in once, then leaves: whether the server takes the endpoint's
/// credentials.
pub(super) async fn try_connect(
    endpoint: &Endpoint,
    networks: &SinkNetworks,
    tls: &Arc<rustls::ClientConfig>,
) -> Result<(), Published> {
    let mut connected = connect(endpoint, networks, tls).await?;
    let _ = connected.io.shutdown().await;
    Ok(())
}

async fn connect_within(
    endpoint: &Endpoint,
    networks: &SinkNetworks,
    tls: &Arc<rustls::ClientConfig>,
) -> Result<Connected, Published> {
    tokio::time::timeout(CONNECT_TIMEOUT, connect(endpoint, networks, tls))
        .await
        .unwrap_or_else(|_| {
            Err(Published::Failed(format!(
                "no connection to the server within {} s",
                CONNECT_TIMEOUT.as_secs()
            )))
        })
}

/// Reads operations until `wanted` says what one means (Some), answering the server's
/// PINGs; what is wrong otherwise.
async fn read_until<T>(
    io: &mut Box<dyn Io>,
    incoming: &mut BytesMut,
    mut wanted: impl FnMut(Op) -> Option<Result<T, Published>>,
) -> Result<T, Published> {
    loop {
        while let Some(op) = protocol::read(incoming).map_err(Published::Failed)? {
            if op == Op::Ping {
                io.write_all(b"PONG\r\n")
                    .await
                    .map_err(|error| failed("writing to", &error))?;
                continue;
            }
            if let Some(answer) = wanted(op) {
                return answer;
            }
        }
        let read = io
            .read_buf(incoming)
            .await
            .map_err(|error| failed("reading from", &error))?;
        if read == 0 {
            return Err(Published::Failed("the server closed the connection".into()));
        }
    }
}

/// Connects: TCP, the server's INFO, TLS if the sink says `tls://`, CONNECT with the login,
/// the reply subscription, and a PING whose PONG says the login was taken.
async fn connect(
    endpoint: &Endpoint,
    networks: &SinkNetworks,
    tls: &Arc<rustls::ClientConfig>,
) -> Result<Connected, Published> {
    let tcp = broker::dial(&endpoint.host, endpoint.port, networks).await?;
    let mut io: Box<dyn Io> = Box::new(tcp);
    let mut incoming = BytesMut::with_capacity(4096);
    let info = read_until(&mut io, &mut incoming, |op| match op {
        Op::Info(info) => Some(Ok(info)),
        _ => Some(Err(Published::Failed(
            "the server did not begin with INFO: is it a NATS server?".into(),
        ))),
    })
    .await?;
    let flag = |name: &str| info.get(name).and_then(serde_json::Value::as_bool) == Some(true);
    if flag("tls_required") && !endpoint.tls {
        return Err(Published::Refused {
            reason: "the server requires TLS: use a `tls://` sink".into(),
            for_good: true,
        });
    }
    if !flag("headers") {
        return Err(Published::Refused {
            reason: "the server does not take message headers (NATS 2.2 or later does), \
                     which both modes of the NATS binding need"
                .into(),
            for_good: true,
        });
    }
    if endpoint.tls {
        io = broker::secure(io, &endpoint.host, tls).await?;
    }
    let max_payload = info
        .get("max_payload")
        .and_then(serde_json::Value::as_u64)
        .map_or(1024 * 1024, |max| max as usize);
    let inbox = format!("_INBOX.knooppunt.{:016x}", fastrand::u64(..));
    let mut out = BytesMut::new();
    protocol::connect(endpoint.tls, endpoint.login.as_ref(), &mut out);
    protocol::subscribe(&format!("{inbox}.*"), REPLIES, &mut out);
    out.extend_from_slice(b"PING\r\n");
    io.write_all(&out)
        .await
        .map_err(|error| failed("writing to", &error))?;
    read_until(&mut io, &mut incoming, |op| match op {
        Op::Pong => Some(Ok(())),
        Op::Err(why) => {
            let login = why.to_ascii_lowercase().contains("authorization");
            Some(Err(Published::Refused {
                reason: if login {
                    format!("the server refused the login (`sinkcredential`): {why}")
                } else {
                    format!("the server refused the connection: {why}")
                },
                for_good: login,
            }))
        }
        _ => None,
    })
    .await?;
    Ok(Connected {
        io,
        max_payload,
        inbox,
    })
}

/// A message waiting for its answer.
struct Waiting {
    subject: String,
    reply: oneshot::Sender<Published>,
}

/// What is unanswered on a connection: core messages by the PING after them (the PINGs
/// in the order they were sent, a keep-alive PING with none), JetStream messages by their
/// reply subject's number.
#[derive(Default)]
struct Unanswered {
    pings: VecDeque<(Instant, Vec<Waiting>)>,
    acks: HashMap<u64, Waiting>,
    count: usize,
}

impl Unanswered {
    /// Answers every waiting message to `subject` with `published`.
    fn refuse_subject(&mut self, subject: &str, published: &Published) {
        let mut refused = 0;
        for (_, batch) in &mut self.pings {
            for waiting in batch.extract_if(.., |w| w.subject == subject) {
                let _ = waiting.reply.send(published.clone());
                refused += 1;
            }
        }
        for waiting in self.acks.extract_if(|_, w| w.subject == subject) {
            let _ = waiting.1.reply.send(published.clone());
            refused += 1;
        }
        self.count -= refused;
    }

    /// Whether a message's attempt stopped waiting for it.
    fn abandoned(&self) -> bool {
        self.pings
            .iter()
            .flat_map(|(_, batch)| batch)
            .chain(self.acks.values())
            .any(|w| w.reply.is_closed())
    }

    fn fail_all(&mut self, why: &str) {
        let failed = || Published::Failed(format!("{why}; the message was not acknowledged"));
        for (_, batch) in self.pings.drain(..) {
            for waiting in batch {
                let _ = waiting.reply.send(failed());
            }
        }
        for (_, waiting) in self.acks.drain() {
            let _ = waiting.reply.send(failed());
        }
        self.count = 0;
    }
}

/// Publishes requests and answers them until the connection ends (idle, or broken: then
/// every unanswered request is failed).
async fn serve(
    connected: Connected,
    first: Request,
    requests: &mut mpsc::Receiver<Request>,
) -> Result<(), String> {
    let Connected {
        io,
        max_payload,
        inbox,
    } = connected;
    let (mut reader, mut writer) = tokio::io::split(io);
    let mut unanswered = Unanswered::default();
    let mut next_reply: u64 = 0;
    let mut incoming = BytesMut::with_capacity(4096);
    let mut out = BytesMut::with_capacity(16 * 1024);
    let mut ping = tokio::time::interval(PING_EVERY);
    ping.reset();
    let mut last_request = Instant::now();
    let mut pending = vec![first];
    let result: Result<(), String> = async {
        loop {
            if !pending.is_empty() {
                let mut core = Vec::new();
                out.clear();
                for request in pending.drain(..) {
                    let Publication {
                        subject,
                        message,
                        jetstream,
                    } = request.message;
                    let size = protocol::size(&message.headers, &message.payload);
                    if size > max_payload {
                        let _ = request.reply.send(Published::Refused {
                            reason: format!(
                                "the message ({size} bytes) is larger than the server's \
                                 max_payload ({max_payload} bytes)"
                            ),
                            for_good: true,
                        });
                        continue;
                    }
                    let reply = jetstream.then(|| {
                        next_reply += 1;
                        format!("{inbox}.{next_reply}")
                    });
                    let written = protocol::publish(
                        &subject,
                        reply.as_deref(),
                        &message.headers,
                        &message.payload,
                        &mut out,
                    );
                    if let Err(why) = written {
                        let _ = request.reply.send(Published::Refused {
                            reason: why,
                            for_good: true,
                        });
                        continue;
                    }
                    let waiting = Waiting {
                        subject,
                        reply: request.reply,
                    };
                    unanswered.count += 1;
                    if jetstream {
                        unanswered.acks.insert(next_reply, waiting);
                    } else {
                        core.push(waiting);
                    }
                }
                // One PING after them: its PONG answers the core messages, and tells the
                // connection is alive.
                out.extend_from_slice(b"PING\r\n");
                unanswered.pings.push_back((Instant::now(), core));
                writer
                    .write_all(&out)
                    .await
                    .map_err(|error| format!("writing to the server failed: {error}"))?;
            }
            tokio::select! {
                request = requests.recv(), if unanswered.count < MAX_IN_FLIGHT => match request {
                    Some(request) => {
                        last_request = Instant::now();
                        pending.push(request);
                        while pending.len() < BATCH
                            && unanswered.count + pending.len() < MAX_IN_FLIGHT
                            && let Ok(more) = requests.try_recv()
                        {
                            pending.push(more);
                        }
                    }
                    None => return Ok(()),
                },
                read = reader.read_buf(&mut incoming) => {
                    match read {
                        Ok(0) => return Err("the server closed the connection".into()),
                        Ok(_) => {}
                        Err(error) => return Err(format!("reading from the server failed: {error}")),
                    }
                    while let Some(op) = protocol::read(&mut incoming)? {
                        if op == Op::Ping {
                            writer
                                .write_all(b"PONG\r\n")
                                .await
                                .map_err(|error| format!("writing to the server failed: {error}"))?;
                        }
                        answer(op, &inbox, &mut unanswered)?;
                    }
                }
                _ = ping.tick() => {
                    if unanswered
                        .pings
                        .front()
                        .is_some_and(|(sent, _)| sent.elapsed() >= PING_EVERY)
                    {
                        return Err(format!(
                            "the server did not answer a ping within {} s",
                            PING_EVERY.as_secs()
                        ));
                    }
                    // A message its attempt stopped waiting for (past the subscription's
                    // timeout) still unanswered: the server is not answering on this
                    // connection, which is made again (those deliveries are retried).
                    if unanswered.abandoned() {
                        return Err(
                            "the server left messages unanswered past their attempts' timeout"
                                .into(),
                        );
                    }
                    unanswered.pings.push_back((Instant::now(), Vec::new()));
                    writer
                        .write_all(b"PING\r\n")
                        .await
                        .map_err(|error| format!("writing to the server failed: {error}"))?;
                }
                _ = tokio::time::sleep_until(last_request + IDLE), if unanswered.count == 0 => {
                    return Ok(());
                }
            }
        }
    }
    .await;
    if let Err(why) = &result {
        unanswered.fail_all(why);
    }
    result
}

/// What an operation from the server means for the messages it answers.
fn answer(op: Op, inbox: &str, unanswered: &mut Unanswered) -> Result<(), String> {
    match op {
        Op::Pong => {
            if let Some((_, batch)) = unanswered.pings.pop_front() {
                unanswered.count -= batch.len();
                for waiting in batch {
                    let _ = waiting.reply.send(Published::Accepted);
                }
            }
        }
        Op::Err(why) => {
            // `Permissions Violation for Publish to "subject"`: the connection stays; every
            // message to that subject is refused.
            if let Some(subject) = why
                .strip_prefix("Permissions Violation for Publish to ")
                .map(|s| s.trim_matches('"'))
            {
                let refused = Published::Refused {
                    reason: format!("the server refused the message: {why}"),
                    for_good: true,
                };
                unanswered.refuse_subject(subject, &refused);
            } else if !why.to_ascii_lowercase().contains("subscription") {
                // Anything else ends the connection (the server closes it).
                return Err(format!("the server ended the connection: {why}"));
            }
        }
        Op::Msg {
            subject,
            status,
            payload,
        } => {
            let number = subject
                .strip_prefix(inbox)
                .and_then(|rest| rest.strip_prefix('.'))
                .and_then(|n| n.parse::<u64>().ok());
            if let Some(waiting) = number.and_then(|n| unanswered.acks.remove(&n)) {
                unanswered.count -= 1;
                let published = acknowledgement(&waiting.subject, status, &payload);
                let _ = waiting.reply.send(published);
            }
        }
        Op::Info(_) | Op::Ping | Op::Ok => {}
    }
    Ok(())
}

/// What a JetStream publish acknowledgement says: stored, no stream for the subject (a
/// 503 status without a body: nobody answers), or the stream's error (4xx: for good).
fn acknowledgement(subject: &str, status: Option<u16>, payload: &[u8]) -> Published {
    if status == Some(503) {
        return Published::Refused {
            reason: format!(
                "no JetStream stream takes subject `{subject}` (the server has no responders \
                 for it): add the subject to a stream, or subscribe without `jetstream`"
            ),
            for_good: true,
        };
    }
    let Ok(answer) = serde_json::from_slice::<serde_json::Value>(payload) else {
        return Published::Failed(format!(
            "the answer to a JetStream publish is not JSON (status {status:?})"
        ));
    };
    if let Some(error) = answer.get("error") {
        let code = error
            .get("code")
            .and_then(serde_json::Value::as_u64)
            .unwrap_or(0);
        let description = error
            .get("description")
            .and_then(serde_json::Value::as_str)
            .unwrap_or("no description");
        return Published::Refused {
            reason: format!("the JetStream stream refused the message: {description} ({code})"),
            for_good: (400..500).contains(&code),
        };
    }
    if answer.get("stream").is_some() {
        Published::Accepted
    } else {
        Published::Failed("the answer to a JetStream publish names no stream".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn waiting(subject: &str) -> (Waiting, oneshot::Receiver<Published>) {
        let (reply, answer) = oneshot::channel();
        (
            Waiting {
                subject: subject.into(),
                reply,
            },
            answer,
        )
    }

    #[test]
    fn a_pong_delivers_the_core_messages_before_it_and_a_violation_refuses_its_subject() {
        let mut unanswered = Unanswered::default();
        let (a, mut a_answer) = waiting("a");
        let (b, mut b_answer) = waiting("b");
        unanswered.pings.push_back((Instant::now(), vec![a, b]));
        unanswered.count = 2;
        answer(
            Op::Err("Permissions Violation for Publish to \"b\"".into()),
            "_INBOX.x",
            &mut unanswered,
        )
        .unwrap();
        assert!(matches!(
            b_answer.try_recv().unwrap(),
            Published::Refused { for_good: true, .. }
        ));
        answer(Op::Pong, "_INBOX.x", &mut unanswered).unwrap();
        assert_eq!(a_answer.try_recv().unwrap(), Published::Accepted);
        assert_eq!(unanswered.count, 0);
        assert!(
            answer(
                Op::Err("Authorization Violation".into()),
                "_INBOX.x",
                &mut unanswered
            )
            .is_err()
        );
    }

    #[test]
    fn jetstream_acknowledgements_are_matched_by_reply_subject_and_sorted() {
        let mut unanswered = Unanswered::default();
        let (a, mut a_answer) = waiting("a");
        unanswered.acks.insert(7, a);
        unanswered.count = 1;
        answer(
            Op::Msg {
                subject: "_INBOX.x.8".into(),
                status: None,
                payload: br#"{"stream":"S","seq":1}"#.to_vec(),
            },
            "_INBOX.x",
            &mut unanswered,
        )
        .unwrap();
        assert!(a_answer.try_recv().is_err(), "not another message's answer");
        answer(
            Op::Msg {
                subject: "_INBOX.x.7".into(),
                status: None,
                payload: br#"{"stream":"S","seq":1}"#.to_vec(),
            },
            "_INBOX.x",
            &mut unanswered,
        )
        .unwrap();
        assert_eq!(a_answer.try_recv().unwrap(), Published::Accepted);
        assert!(matches!(
            acknowledgement("a", Some(503), b""),
            Published::Refused { for_good: true, reason } if reason.contains("no JetStream stream")
        ));
        assert!(matches!(
            acknowledgement(
                "a",
                None,
                br#"{"error":{"code":503,"description":"jetstream not enabled"}}"#
            ),
            Published::Refused {
                for_good: false,
                ..
            }
        ));
        assert!(matches!(
            acknowledgement("a", None, br#"{"error":{"code":400,"description":"bad"}}"#),
            Published::Refused { for_good: true, .. }
        ));
    }
}
