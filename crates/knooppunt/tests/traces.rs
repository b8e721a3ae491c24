//! Traces exported with OpenTelemetry by the real binary (`OTEL_EXPORTER_OTLP_ENDPOINT`), to
//! a real OTLP/HTTP receiver in the test that decodes the protobuf spans: a publish, its
//! routing, its durable append and its delivery attempt are spans of one trace, which
//! continues the publisher's context (its `traceparent` header, or the event's distributed
//! tracing extension), and the delivery's request carries the attempt's context on while the
//! event itself is delivered unchanged.

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use common::{HubProcess, config_with_admin};
use knooppunt_tests::sink::{Received, Sink};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use prost::Message;
use serde_json::{Value, json};

const TOKEN: &str = "traces-admin";
const TYPE: &str = "nl.test.traced";

/// One exported span, its ids in hex.
#[derive(Debug, Clone)]
struct Exported {
    name: String,
    trace: String,
    span: String,
    parent: String,
    service: String,
    /// The span's kind (`SpanKind`: 2 SERVER, 3 CLIENT, 1 INTERNAL).
    kind: i32,
}

/// An OTLP/HTTP receiver (`POST /v1/traces`, protobuf) on 127.0.0.1 port 0.
async fn receiver() -> (String, Arc<Mutex<Vec<Exported>>>) {
    let spans = Arc::new(Mutex::new(Vec::new()));
    let kept = Arc::clone(&spans);
    let app = axum::Router::new().route(
        "/v1/traces",
        axum::routing::post(move |body: Bytes| {
            let kept = Arc::clone(&kept);
            async move {
                let request = ExportTraceServiceRequest::decode(body).unwrap();
                let mut kept = kept.lock().unwrap();
                for resource in request.resource_spans {
                    let service = resource
                        .resource
                        .iter()
                        .flat_map(|r| &r.attributes)
                        .find(|a| a.key == "service.name")
                        .and_then(|a| a.value.as_ref())
                        .map(|v| format!("{:?}", v.value))
                        .unwrap_or_default();
                    for span in resource.scope_spans.into_iter().flat_map(|s| s.spans) {
                        kept.push(Exported {
                            name: span.name,
                            trace: hex(&span.trace_id),
                            span: hex(&span.span_id),
                            parent: hex(&span.parent_span_id),
                            service: service.clone(),
                            kind: span.kind,
                        });
                    }
                }
                // An empty ExportTraceServiceResponse.
                (
                    [("content-type", "application/x-protobuf")],
                    Vec::<u8>::new(),
                )
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, spans)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The exported spans of `trace` once they include a `deliver` span (the last to end).
async fn trace_of(spans: &Mutex<Vec<Exported>>, trace: &str) -> Vec<Exported> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let found: Vec<Exported> = spans
            .lock()
            .unwrap()
            .iter()
            .filter(|s| s.trace == trace)
            .cloned()
            .collect();
        if found.iter().any(|s| s.name == "deliver") {
            return found;
        }
        assert!(
            Instant::now() < deadline,
            "no deliver span in trace {trace}; spans of it: {found:?}; all: {:?}",
            spans.lock().unwrap()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn named<'a>(spans: &'a [Exported], name: &str) -> &'a Exported {
    let found: Vec<&Exported> = spans.iter().filter(|s| s.name == name).collect();
    assert_eq!(found.len(), 1, "one {name} span in {spans:?}");
    found[0]
}

/// publish (child of `parent`) → route, append; deliver is the publish's child; the sink's
/// request names the deliver span as its parent, in the same trace.
fn assert_one_trace(spans: &[Exported], trace: &str, parent: &str, delivered: &Received) {
    let publish = named(spans, "publish");
    assert_eq!(publish.parent, parent, "{spans:?}");
    assert_eq!(publish.service, format!("{:?}", Some(string("knooppunt"))));
    for step in ["route", "append", "deliver"] {
        assert_eq!(named(spans, step).parent, publish.span, "{step}: {spans:?}");
    }
    let deliver = named(spans, "deliver");
    let hop = delivered
        .header("traceparent")
        .expect("the delivery's traceparent");
    assert_eq!(hop, format!("00-{trace}-{}-01", deliver.span));
    use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
    assert_eq!(
        publish.kind,
        SpanKind::Server as i32,
        "publish answers a request"
    );
    assert_eq!(deliver.kind, SpanKind::Client as i32, "deliver sends one");
    for step in ["route", "append"] {
        assert_eq!(named(spans, step).kind, SpanKind::Internal as i32, "{step}");
    }
}

/// The log's `deliver` span names the exported span: the same trace and span id as the
/// sink's `traceparent`.
fn assert_logged_as_exported(hub: &HubProcess, spans: &[Exported], trace: &str) {
    let deliver = named(spans, "deliver");
    let logged: Vec<Value> = hub
        .log()
        .iter()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .flat_map(|record| {
            let mut all: Vec<Value> = record["spans"].as_array().cloned().unwrap_or_default();
            all.extend(record.get("span").cloned());
            all
        })
        .filter(|span| span["name"] == "deliver" && span["trace_id"] == trace)
        .collect();
    assert!(!logged.is_empty(), "a logged deliver span of {trace}");
    for span in logged {
        assert_eq!(span["span_id"], deliver.span.as_str(), "{span}");
    }
}

fn string(text: &str) -> opentelemetry_proto::tonic::common::v1::any_value::Value {
    opentelemetry_proto::tonic::common::v1::any_value::Value::StringValue(text.into())
}

/// Publishes `event` (structured mode), with the request's own `traceparent` if given.
async fn publish(hub: &HubProcess, event: &Value, traceparent: Option<&str>) {
    let mut request = reqwest::Client::new()
        .post(hub.url("/v1/events"))
        .bearer_auth(TOKEN)
        .header("content-type", "application/cloudevents+json")
        .body(event.to_string());
    if let Some(traceparent) = traceparent {
        request = request.header("traceparent", traceparent);
    }
    let published = request.send().await.unwrap();
    let status = published.status();
    assert_eq!(status, 202, "{}", published.text().await.unwrap());
}

/// The delivery of the event `id`.
async fn delivery_of(sink: &Sink, id: &str) -> Received {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(found) = sink.deliveries().into_iter().find(|d| d.json()["id"] == id) {
            return found;
        }
        assert!(Instant::now() < deadline, "{id} was not delivered");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A hub exporting its traces to a receiver (with `env` besides), subscribed unordered to
/// a sink.
struct Traced {
    hub: HubProcess,
    sink: Sink,
    spans: Arc<Mutex<Vec<Exported>>>,
    _dir: tempfile::TempDir,
}

impl Traced {
    async fn start(env: &[(&str, &str)]) -> Traced {
        let (endpoint, spans) = receiver().await;
        let sink = Sink::start_for_any_hub().await;
        let dir = tempfile::tempdir().unwrap();
        let config = config_with_admin(dir.path(), TOKEN);
        let mut all = vec![
            ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
            ("OTEL_BSP_SCHEDULE_DELAY", "100"),
        ];
        all.extend_from_slice(env);
        let hub = HubProcess::start_with_env(&config, &dir.path().join("data"), &all);
        let client = reqwest::Client::new();
        common::subscribe(&client, &hub, TOKEN, (&sink.url, TYPE), "unordered").await;
        Traced {
            hub,
            sink,
            spans,
            _dir: dir,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_publish_and_its_delivery_are_one_trace_that_continues_the_publisher() {
    let Traced {
        hub,
        sink,
        spans,
        _dir: _kept,
    } = Traced::start(&[]).await;

    // The publisher's HTTP request carries its context; the event has no extension.
    let (trace, parent) = ("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7");
    let event = json!({"specversion": "1.0", "id": "by-header", "type": TYPE,
                       "source": "urn:nld:oin:1:systeem:traced", "data": {"n": 1}});
    publish(&hub, &event, Some(&format!("00-{trace}-{parent}-01"))).await;
    let delivered = delivery_of(&sink, "by-header").await;
    assert_one_trace(&trace_of(&spans, trace).await, trace, parent, &delivered);
    assert_eq!(
        delivered.json().get("traceparent"),
        None,
        "the event is unchanged"
    );

    // The event carries its producer's context (the distributed tracing extension) and the
    // request none: the trace continues the event's, which reaches the sink as published.
    let (trace, parent) = ("0af7651916cd43dd8448eb211c80319c", "b9c7c989f97918e1");
    let extension = format!("00-{trace}-{parent}-01");
    let event: Value = json!({"specversion": "1.0", "id": "by-extension", "type": TYPE,
                              "source": "urn:nld:oin:1:systeem:traced",
                              "traceparent": extension, "tracestate": "rojo=00f067aa0ba902b7",
                              "data": {"n": 2}});
    publish(&hub, &event, None).await;
    let delivered = delivery_of(&sink, "by-extension").await;
    assert_one_trace(&trace_of(&spans, trace).await, trace, parent, &delivered);
    assert_eq!(
        delivered.json(),
        event,
        "the event is delivered as published"
    );
    assert_eq!(
        delivered.header("tracestate"),
        Some("rojo=00f067aa0ba902b7")
    );
}

/// With the log at debug (a line per attempt), a delivery attempt's log names the span the
/// trace exported and the sink's `traceparent` names: one id for one attempt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_log_names_the_exported_delivery_span() {
    let traced = Traced::start(&[
        ("KNOOPPUNT_LOG_FORMAT", "json"),
        ("KNOOPPUNT_LOG_LEVEL", "debug"),
    ])
    .await;
    let Traced {
        hub,
        sink,
        spans,
        _dir: _kept,
    } = traced;
    let (trace, parent) = ("5bf92f3577b34da6a3ce929d0e0e4737", "10f067aa0ba902b8");
    let event = json!({"specversion": "1.0", "id": "logged", "type": TYPE,
                       "source": "urn:nld:oin:1:systeem:traced", "data": {"n": 1}});
    publish(&hub, &event, Some(&format!("00-{trace}-{parent}-01"))).await;
    let delivered = delivery_of(&sink, "logged").await;
    let exported = trace_of(&spans, trace).await;
    let deliver = named(&exported, "deliver");
    assert_eq!(
        delivered.header("traceparent"),
        Some(format!("00-{trace}-{}-01", deliver.span).as_str())
    );
    assert_logged_as_exported(&hub, &exported, trace);
}
