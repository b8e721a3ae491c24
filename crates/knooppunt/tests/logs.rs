//! The hub's structured logs: JSON lines whose spans join the event's trace (the
//! distributed tracing extension), and never an event's data.

mod common;

use std::time::Duration;

use knooppunt_tests::sink::Sink;
use serde_json::{Value, json};

const TOKEN: &str = "admin-token";
const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const EVENT_SPAN: &str = "00f067aa0ba902b7";
const HTTP_TRACEPARENT: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
/// Personal data in the event's `data`: it must never reach the log.
const SECRET: &str = "BSN-999990342-GEHEIM";

/// The span fields of a JSON log record: its current span and the spans it is in.
fn spans(record: &Value) -> Vec<&Value> {
    let mut spans: Vec<&Value> = record["spans"].as_array().into_iter().flatten().collect();
    spans.extend(record.get("span"));
    spans
}

/// A token in the sink's query and a header: write-only, never logged.
const SINK_TOKEN: &str = "sink-secret-4711";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_logs_join_the_events_trace_and_never_hold_its_data() {
    let dir = tempfile::tempdir().unwrap();
    let config = common::config_with_admin(dir.path(), TOKEN);
    let mut hub = common::HubProcess::start_with_env(
        &config,
        &dir.path().join("data"),
        &[
            ("KNOOPPUNT_LOG_FORMAT", "json"),
            ("KNOOPPUNT_LOG_LEVEL", "debug"),
            ("KNOOPPUNT_DELIVRY_MAX_IN_FLIGHT", "4"),
        ],
    );
    // A misspelt section is named at warn, with what to do.
    let misspelt: Vec<Value> = hub
        .log()
        .iter()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|record| record["variable"] == "KNOOPPUNT_DELIVRY_MAX_IN_FLIGHT")
        .collect();
    assert_eq!(misspelt.len(), 1, "{:?}", hub.log());
    assert_eq!(misspelt[0]["level"], "WARN");
    assert!(
        misspelt[0]["message"]
            .as_str()
            .unwrap()
            .contains("names no section"),
        "{}",
        misspelt[0]
    );
    let sink = Sink::start_for_any_hub().await;
    let client = reqwest::Client::new();
    let created = client
        .post(hub.url("/v1/subscriptions"))
        .bearer_auth(TOKEN)
        .json(
            &json!({"sink": format!("{}?token={SINK_TOKEN}", sink.url), "protocol": "HTTP",
                      "types": ["nl.brp.persoon-verhuisd"],
                      "protocolsettings": {"headers": {"X-Api-Key": SINK_TOKEN}}}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    let event = json!({
        "specversion": "1.0", "id": "logged-1", "type": "nl.brp.persoon-verhuisd",
        "source": "urn:nld:oin:00000001823288444000:systeem:BRP",
        "traceparent": format!("00-{TRACE_ID}-{EVENT_SPAN}-01"),
        "data": {"bsn": SECRET}
    });
    let published = client
        .post(hub.url("/v1/events"))
        .bearer_auth(TOKEN)
        .header("content-type", "application/cloudevents+json")
        .header("traceparent", HTTP_TRACEPARENT)
        .body(event.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(published.status(), 202);
    sink.wait_for(1, Duration::from_secs(15)).await;
    assert!(hub.stop().success());

    let log = hub.log();
    assert!(
        log.iter().all(|line| !line.contains(SECRET)),
        "event data reached the log"
    );
    assert!(
        log.iter().all(|line| !line.contains(SINK_TOKEN)),
        "a sink's secret reached the log"
    );
    assert!(
        log.iter()
            .any(|line| line.contains("Subscription created.") && line.contains("token=********")),
        "the sink is logged, redacted"
    );
    let records: Vec<Value> = log
        .iter()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect();

    let accepted = records
        .iter()
        .find(|r| r["message"] == "Event accepted.")
        .expect("the acceptance is logged at debug level");
    assert_eq!(accepted["trace_id"], TRACE_ID, "{accepted}");
    assert_eq!(accepted["link"], EVENT_SPAN);
    assert!(
        spans(accepted)
            .iter()
            .any(|s| s["name"] == "publish"
                && s["http_trace_id"] == "0af7651916cd43dd8448eb211c80319c"),
        "in the request's span, with the publisher's HTTP trace: {accepted}"
    );

    let delivered = records
        .iter()
        .find(|r| r["message"] == "Delivery attempt.")
        .expect("the attempt is logged at debug level");
    let deliver = spans(delivered)
        .into_iter()
        .find(|s| s["name"] == "deliver")
        .unwrap_or_else(|| panic!("in a deliver span: {delivered}"));
    assert_eq!(deliver["trace_id"], TRACE_ID);
    assert_eq!(deliver["link"], EVENT_SPAN);
    assert_eq!(deliver["span_id"].as_str().map(str::len), Some(16));
    assert_eq!(delivered["outcome"], "delivered");
}

/// `knooppunt serve 2>&1 | head -1`: once nobody reads the log, the hub loses its log
/// lines and nothing else. It goes on serving and logging (debug: a line per request) and
/// stops cleanly on SIGTERM.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_log_never_stops_the_hub() {
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    let config = common::config_with_admin(dir.path(), TOKEN);
    /// The hub, killed when the test ends early.
    struct Killed(std::process::Child);
    impl Drop for Killed {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let mut hub = Killed(
        std::process::Command::new(env!("CARGO_BIN_EXE_knooppunt"))
            .args(common::serve_args(&config, &dir.path().join("data")))
            .env("KNOOPPUNT_LOG_LEVEL", "debug")
            .env("KNOOPPUNT_LOG_FORMAT", "json")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let child = &mut hub.0;
    let mut log = std::io::BufReader::new(child.stderr.take().unwrap());
    let address = loop {
        let mut line = String::new();
        assert!(
            log.read_line(&mut line).unwrap() > 0,
            "exited before listening"
        );
        let record: Value = serde_json::from_str(&line).unwrap();
        if record["message"] == "Knooppunt is listening." {
            break record["address"].as_str().unwrap().to_owned();
        }
    };
    drop(log);
    let client = reqwest::Client::new();
    for n in 0..20 {
        let answer = client
            .post(format!("http://{address}/v1/events"))
            .bearer_auth(TOKEN)
            .header("content-type", "application/cloudevents+json")
            .body(
                json!({
                    "specversion": "1.0", "id": format!("unlogged-{n}"),
                    "type": "nl.brp.persoon-verhuisd",
                    "source": "urn:nld:test:logs"
                })
                .to_string(),
            )
            .send()
            .await
            .expect("the hub still serves");
        assert!(answer.status().is_success(), "{}", answer.status());
    }
    assert_eq!(child.try_wait().unwrap(), None, "still running");
    let pid = child.id().to_string();
    assert!(
        std::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let exit = loop {
        if let Some(exit) = child.try_wait().unwrap() {
            break exit;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("the hub did not stop within 30 s of SIGTERM");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(exit.success(), "{exit:?}");
}
