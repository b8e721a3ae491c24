//! The client commands (`publish`, `subscriptions`, `dead-letters`) against a live hub
//! process and a real sink, as a user would run them.

mod common;

use std::process::{Command, Output};
use std::time::Duration;

use knooppunt_tests::sink::{Reply, Sink};

const TOKEN: &str = "admin-token";
const SOURCE: &str = "urn:nld:oin:00000001823288444000:systeem:BRP";
const TYPE: &str = "nl.brp.persoon-verhuisd";
const WAIT: Duration = Duration::from_secs(15);

/// Runs `knooppunt ARGS` against the hub at `url` with the token in the environment.
async fn knooppunt(url: &str, args: &[&str]) -> Output {
    knooppunt_with(url, Some(TOKEN), args).await
}

async fn knooppunt_with(url: &str, token: Option<&str>, args: &[&str]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_knooppunt"));
    command
        .args(args)
        .env("KNOOPPUNT_URL", url)
        .env_remove("KNOOPPUNT_TOKEN");
    if let Some(token) = token {
        command.env("KNOOPPUNT_TOKEN", token);
    }
    tokio::task::spawn_blocking(move || command.output().unwrap())
        .await
        .unwrap()
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn succeeded(output: &Output) -> String {
    assert!(
        output.status.success(),
        "exit {:?}\nstdout: {}\nstderr: {}",
        output.status.code(),
        stdout(output),
        stderr(output)
    );
    stdout(output)
}

/// A hub process with an admin principal, and a sink that consents to it.
async fn hub_and_sink() -> (common::HubProcess, tempfile::TempDir, Sink) {
    let dir = tempfile::tempdir().unwrap();
    let config = common::config_with_admin(dir.path(), TOKEN);
    let hub = common::HubProcess::start(&config, &dir.path().join("data"));
    let sink = Sink::start_for_any_hub().await;
    (hub, dir, sink)
}

async fn create_subscription(url: &str, sink: &Sink) -> String {
    let created = succeeded(
        &knooppunt(
            url,
            &[
                "subscriptions",
                "create",
                "--sink",
                &sink.url,
                "--type",
                TYPE,
                "--sql",
                "subject LIKE '9999%'",
                "--config",
                "maxAttempts=2",
                "--config",
                "initialBackoff=PT0.05S",
                "--config",
                "maxBackoff=PT0.1S",
            ],
        )
        .await,
    );
    assert!(created.contains("state:    active"), "{created}");
    assert!(created.contains("  signing:  whsec_"), "{created}");
    created
        .lines()
        .find_map(|line| line.strip_prefix("created "))
        .expect("the id")
        .to_owned()
}

/// Runs `knooppunt ARGS` with its stdout a pipe nobody reads any more (`… | true`).
async fn knooppunt_into_a_closed_pipe(url: &str, args: &[&str]) -> Output {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let mut command = Command::new(env!("CARGO_BIN_EXE_knooppunt"));
    command
        .args(args)
        .env("KNOOPPUNT_URL", url)
        .env("KNOOPPUNT_TOKEN", TOKEN)
        .stdout(writer)
        .stderr(std::process::Stdio::piped());
    tokio::task::spawn_blocking(move || command.output().unwrap())
        .await
        .unwrap()
}

/// A closed output ends the command quietly (exit 0, nothing on stderr), after it did
/// what was asked: a subscription made into a closed pipe is made.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_output_ends_a_command_quietly() {
    let (hub, _dir, sink) = hub_and_sink().await;
    let url = hub.url("");
    let created = knooppunt_into_a_closed_pipe(
        &url,
        &[
            "subscriptions",
            "create",
            "--sink",
            &sink.url,
            "--type",
            TYPE,
        ],
    )
    .await;
    assert!(created.status.success(), "{created:?}");
    assert_eq!(stderr(&created), "");
    let listed = knooppunt_into_a_closed_pipe(&url, &["subscriptions", "list"]).await;
    assert!(listed.status.success(), "{listed:?}");
    assert_eq!(stderr(&listed), "");
    let exported = knooppunt_into_a_closed_pipe(&url, &["audit", "export"]).await;
    assert!(exported.status.success(), "{exported:?}");
    assert_eq!(stderr(&exported), "");
    let listed = succeeded(&knooppunt(&url, &["subscriptions", "list", "--json"]).await);
    let listed: serde_json::Value = serde_json::from_str(&listed).unwrap();
    assert_eq!(listed.as_array().unwrap().len(), 1, "made, though unread");
    assert!(hub.terminate().success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscriptions_are_created_listed_shown_and_deleted() {
    let (hub, _dir, sink) = hub_and_sink().await;
    let url = hub.url("");
    let id = create_subscription(&url, &sink).await;

    let rotated = succeeded(&knooppunt(&url, &["subscriptions", "rotate-secret", &id]).await);
    assert!(
        rotated.contains(&format!("new signing secret of {id}: whsec_"))
            && rotated.contains("the previous secret signs too until"),
        "{rotated}"
    );
    let listed = succeeded(&knooppunt(&url, &["subscriptions", "list"]).await);
    assert!(listed.starts_with("ID"), "{listed}");
    assert!(listed.lines().next().unwrap().contains("OWNER") && listed.contains("BACKLOG"));
    let row = listed.lines().find(|l| l.starts_with(&id)).expect("listed");
    let columns: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(columns[1..4], ["admin", "active", "0"], "{row}");
    assert!(row.contains(&sink.url) && row.contains(TYPE), "{row}");
    let theirs = succeeded(&knooppunt(&url, &["subscriptions", "list", "--owner", "admin"]).await);
    assert!(theirs.contains(&id), "{theirs}");
    let nobodys =
        succeeded(&knooppunt(&url, &["subscriptions", "list", "--owner", "nobody"]).await);
    assert!(nobodys.contains("No subscriptions."), "{nobodys}");

    let shown = succeeded(&knooppunt(&url, &["subscriptions", "get", &id, "--json"]).await);
    let shown: serde_json::Value = serde_json::from_str(&shown).unwrap();
    assert_eq!(shown["filters"][0]["sql"], "subject LIKE '9999%'");
    assert_eq!(shown["config"]["maxAttempts"], "2");

    let listed: serde_json::Value = serde_json::from_str(&succeeded(
        &knooppunt(&url, &["subscriptions", "list", "--json"]).await,
    ))
    .unwrap();
    assert_eq!(listed.as_array().unwrap().len(), 1);

    // A broker's sink: the protocol follows from the scheme, the topic from --topic. No
    // broker listens there, so it waits for consent, saying why.
    let broker = succeeded(
        &knooppunt(
            &url,
            &[
                "subscriptions",
                "create",
                "--sink",
                "mqtt://127.0.0.1:9",
                "--topic",
                "knooppunt/cli",
                "--qos",
                "2",
                "--type",
                TYPE,
            ],
        )
        .await,
    );
    assert!(
        broker.contains("topic:    knooppunt/cli (MQTT, QoS 2)")
            && broker.contains("state:    pending")
            && broker.contains("connecting to the broker failed"),
        "{broker}"
    );
    let wildcard = knooppunt(
        &url,
        &[
            "subscriptions",
            "create",
            "--sink",
            "mqtt://127.0.0.1:9",
            "--topic",
            "a/#",
        ],
    )
    .await;
    assert_eq!(wildcard.status.code(), Some(1));
    assert!(
        stderr(&wildcard).contains("wildcard"),
        "{}",
        stderr(&wildcard)
    );
    let broker_id = broker
        .lines()
        .find_map(|line| line.strip_prefix("created "))
        .expect("the id");
    assert!(
        succeeded(&knooppunt(&url, &["subscriptions", "delete", broker_id]).await)
            .contains("deleted")
    );
    // An AMQP 1.0 broker's: the target address is the sink's path.
    let amqp = succeeded(
        &knooppunt(
            &url,
            &[
                "subscriptions",
                "create",
                "--sink",
                "amqp://127.0.0.1:9/amq/queue/knooppunt",
                "--type",
                TYPE,
            ],
        )
        .await,
    );
    assert!(
        amqp.contains("address:  the sink's path (AMQP 1.0, unsettled, at least once)")
            && amqp.contains("state:    pending"),
        "{amqp}"
    );
    let amqp_id = amqp
        .lines()
        .find_map(|line| line.strip_prefix("created "))
        .expect("the id");
    assert!(
        succeeded(&knooppunt(&url, &["subscriptions", "delete", amqp_id]).await)
            .contains("deleted")
    );
    // A NATS server's: --subject, and --jetstream for at least once.
    let nats = succeeded(
        &knooppunt(
            &url,
            &[
                "subscriptions",
                "create",
                "--sink",
                "nats://127.0.0.1:9",
                "--subject",
                "knooppunt.cli",
                "--jetstream",
                "--type",
                TYPE,
            ],
        )
        .await,
    );
    assert!(
        nats.contains("subject:  knooppunt.cli (JetStream, at least once)")
            && nats.contains("state:    pending"),
        "{nats}"
    );
    let nats_id = nats
        .lines()
        .find_map(|line| line.strip_prefix("created "))
        .expect("the id");
    assert!(
        succeeded(&knooppunt(&url, &["subscriptions", "delete", nats_id]).await)
            .contains("deleted")
    );

    assert!(
        succeeded(&knooppunt(&url, &["subscriptions", "delete", &id]).await).contains("deleted")
    );
    let gone = knooppunt(&url, &["subscriptions", "get", &id]).await;
    assert_eq!(gone.status.code(), Some(1));
    assert!(stderr(&gone).contains("404"), "{}", stderr(&gone));
    assert!(hub.terminate().success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn published_events_reach_the_sink_from_flags_files_and_binary_mode() {
    let (hub, dir, sink) = hub_and_sink().await;
    let url = hub.url("");
    create_subscription(&url, &sink).await;

    // From flags, with typed extensions.
    let published = succeeded(
        &knooppunt(
            &url,
            &[
                "publish",
                "--id",
                "flags-1",
                "--source",
                SOURCE,
                "--type",
                TYPE,
                "--subject",
                "999990342",
                "--time",
                "now",
                "--data",
                r#"{"bsn": "999990342"}"#,
                "-e",
                "sequence:=42",
                "-e",
                "region=noord",
            ],
        )
        .await,
    );
    assert!(
        published.contains("accepted") && published.contains("for 1 subscription"),
        "{published}"
    );
    let delivered = sink.wait_for(1, WAIT).await;
    let event = delivered[0].json();
    assert_eq!(event["id"], "flags-1");
    assert_eq!(
        event["sequence"], 42,
        "an integer extension stays an integer"
    );
    assert_eq!(event["region"], "noord");
    assert_eq!(event["data"]["bsn"], "999990342");
    assert!(event["time"].as_str().unwrap().ends_with('Z'));

    // From a file: delivered byte for byte.
    let text = format!(
        r#"{{ "specversion" : "1.0", "id":"file-1","source":"{SOURCE}","type":"{TYPE}","subject":"99991","data":{{"n": 1.50}} }}"#
    );
    let file = dir.path().join("event.json");
    std::fs::write(&file, &text).unwrap();
    succeeded(&knooppunt(&url, &["publish", "--file", file.to_str().unwrap()]).await);
    let delivered = sink.wait_for(2, WAIT).await;
    assert_eq!(
        std::str::from_utf8(&delivered[1].body).unwrap(),
        text.trim(),
        "the file's exact text"
    );

    // The same file again is a duplicate, said so and not delivered twice.
    let again = succeeded(&knooppunt(&url, &["publish", "--file", file.to_str().unwrap()]).await);
    assert!(again.contains("duplicate"), "{again}");

    // Binary mode from a file; a batch from a file.
    let binary = dir.path().join("binary.json");
    std::fs::write(
        &binary,
        format!(r#"{{"specversion":"1.0","id":"bin-1","source":"{SOURCE}","type":"{TYPE}","subject":"99992","data":{{"b":true}}}}"#),
    )
    .unwrap();
    succeeded(
        &knooppunt(
            &url,
            &["publish", "--binary", "--file", binary.to_str().unwrap()],
        )
        .await,
    );
    let batch = dir.path().join("batch.json");
    std::fs::write(
        &batch,
        format!(
            r#"[{{"specversion":"1.0","id":"batch-1","source":"{SOURCE}","type":"{TYPE}","subject":"99993"}},
                {{"specversion":"1.0","id":"batch-2","source":"{SOURCE}","type":"{TYPE}","subject":"99994"}}]"#
        ),
    )
    .unwrap();
    let batched =
        succeeded(&knooppunt(&url, &["publish", "--file", batch.to_str().unwrap()]).await);
    assert_eq!(batched.matches("accepted").count(), 2, "{batched}");
    let delivered = sink.wait_for(5, WAIT).await;
    let ids: Vec<String> = delivered
        .iter()
        .map(|d| d.json()["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(ids, ["flags-1", "file-1", "bin-1", "batch-1", "batch-2"]);
    assert_eq!(delivered[2].json()["data"]["b"], true);
    assert!(hub.terminate().success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_letters_are_listed_and_redelivered() {
    let (hub, _dir, sink) = hub_and_sink().await;
    let url = hub.url("");
    let id = create_subscription(&url, &sink).await;
    sink.answer([Reply::status(400)
        .with_header("content-type", "text/plain")
        .with_body("subject 99990 is not ours")]);
    succeeded(
        &knooppunt(
            &url,
            &[
                "publish",
                "--id",
                "dl-1",
                "--source",
                SOURCE,
                "--type",
                TYPE,
                "--subject",
                "99990",
            ],
        )
        .await,
    );
    let listed = {
        let deadline = std::time::Instant::now() + WAIT;
        loop {
            let listed = succeeded(&knooppunt(&url, &["dead-letters", "list", &id]).await);
            if !listed.starts_with("No dead letters") {
                break listed;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "no dead letter appeared"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    let row = listed.lines().nth(1).expect("one dead letter");
    assert!(row.contains("400"), "the reason names the status: {row}");
    // What the sink said, in the subscription's last delivery.
    let shown = succeeded(&knooppunt(&url, &["subscriptions", "get", &id]).await);
    assert!(
        shown.contains("content-type: text/plain") && shown.contains("subject 99990 is not ours"),
        "{shown}"
    );
    let dead_letter = row.split_whitespace().next().unwrap().to_owned();

    let redelivered =
        succeeded(&knooppunt(&url, &["dead-letters", "redeliver", &id, &dead_letter]).await);
    assert!(redelivered.contains("queued"), "{redelivered}");
    let delivered = sink.wait_for(2, WAIT).await;
    assert_eq!(
        delivered[1].json()["id"],
        "dl-1",
        "delivered after the redelivery"
    );
    let listed = succeeded(&knooppunt(&url, &["dead-letters", "list", &id]).await);
    assert!(listed.starts_with("No dead letters"), "{listed}");
    assert!(hub.terminate().success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_and_mistakes_say_what_to_fix() {
    let (hub, _dir, _sink) = hub_and_sink().await;
    let url = hub.url("");

    let invalid = knooppunt(
        &url,
        &[
            "subscriptions",
            "create",
            "--sink",
            "not-a-url",
            "--sql",
            "subject LIKE",
        ],
    )
    .await;
    assert_eq!(invalid.status.code(), Some(1));
    let message = stderr(&invalid);
    assert!(
        message.contains("400") && message.contains("sink:") && message.contains("filters[0].sql:"),
        "{message}"
    );

    let anonymous = knooppunt_with(&url, None, &["subscriptions", "list"]).await;
    assert_eq!(anonymous.status.code(), Some(1));
    assert!(stderr(&anonymous).contains("401") && stderr(&anonymous).contains("KNOOPPUNT_TOKEN"));

    let bad_event = knooppunt(&url, &["publish", "--source", "not a uri", "--type", TYPE]).await;
    assert_eq!(bad_event.status.code(), Some(2));
    assert!(
        stderr(&bad_event).contains("`source`"),
        "{}",
        stderr(&bad_event)
    );

    let not_json = knooppunt(
        &url,
        &[
            "publish", "--source", SOURCE, "--type", TYPE, "--data", "hello",
        ],
    )
    .await;
    assert_eq!(not_json.status.code(), Some(2));
    assert!(
        stderr(&not_json).contains("--datacontenttype"),
        "{}",
        stderr(&not_json)
    );

    assert!(hub.terminate().success());
    let unreachable = knooppunt(&url, &["subscriptions", "list"]).await;
    assert_eq!(unreachable.status.code(), Some(2));
    assert!(
        stderr(&unreachable).contains("cannot reach the hub"),
        "{}",
        stderr(&unreachable)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn data_from_a_file_is_text_or_bytes_by_its_content_type() {
    let (hub, dir, sink) = hub_and_sink().await;
    let url = hub.url("");
    create_subscription(&url, &sink).await;
    let note = dir.path().join("note.txt");
    std::fs::write(&note, "Verhuisd naar Utrecht.\n").unwrap();
    let bytes = dir.path().join("scan.bin");
    std::fs::write(&bytes, [0u8, 159, 146, 150]).unwrap();
    for (id, content_type, file) in [
        ("text-1", "text/plain; charset=utf-8", &note),
        ("bytes-1", "application/octet-stream", &bytes),
    ] {
        let args = [
            "publish",
            "--id",
            id,
            "--source",
            SOURCE,
            "--type",
            TYPE,
            "--subject",
            "99995",
            "--datacontenttype",
            content_type,
            "--data-file",
            file.to_str().unwrap(),
        ];
        succeeded(&knooppunt(&url, &args).await);
    }
    let delivered = sink.wait_for(2, WAIT).await;
    let text = delivered[0].json();
    assert_eq!(text["data"], "Verhuisd naar Utrecht.\n");
    assert_eq!(text["datacontenttype"], "text/plain; charset=utf-8");
    let binary = delivered[1].json();
    assert_eq!(binary["data_base64"], "AJ+Slg==");
    assert!(hub.terminate().success());
}

/// `knooppunt principals`: an admin creates a principal whose token (printed once) works at
/// once, disables it (refused at once), issues a new token and deletes it; and the
/// principal survives a restart of the hub process.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn principals_are_managed_from_the_command_line() {
    let (hub, dir, _sink) = hub_and_sink().await;
    let url = hub.url("");
    let created = succeeded(
        &knooppunt(
            &url,
            &[
                "principals",
                "create",
                "brp",
                "--role",
                "publisher",
                "--oin",
                "00000001823288444000",
            ],
        )
        .await,
    );
    assert!(
        created.contains("only time the token is shown"),
        "{created}"
    );
    let token = created
        .lines()
        .find_map(|l| l.strip_prefix("token: "))
        .expect("the token is printed")
        .to_owned();
    let publish = |url: String, token: String| async move {
        knooppunt_with(
            &url,
            Some(&token),
            &["publish", "--source", SOURCE, "--type", TYPE, "--id", "p-1"],
        )
        .await
    };
    succeeded(&publish(url.clone(), token.clone()).await);
    let listed = succeeded(&knooppunt(&url, &["principals", "list"]).await);
    let row = listed
        .lines()
        .find(|l| l.starts_with("brp "))
        .expect("listed");
    assert!(
        row.contains("00000001823288444000") && row.contains("active"),
        "{row}"
    );

    succeeded(&knooppunt(&url, &["principals", "update", "brp", "--disable"]).await);
    let refused = publish(url.clone(), token.clone()).await;
    assert_eq!(refused.status.code(), Some(1));
    assert!(
        stderr(&refused).contains("disabled"),
        "{}",
        stderr(&refused)
    );
    succeeded(&knooppunt(&url, &["principals", "update", "brp", "--enable"]).await);

    let issued = succeeded(&knooppunt(&url, &["principals", "token", "brp"]).await);
    let fresh = issued
        .lines()
        .find_map(|l| l.strip_prefix("token: "))
        .expect("the new token is printed")
        .to_owned();
    assert_eq!(
        publish(url.clone(), token).await.status.code(),
        Some(1),
        "the old token is gone"
    );

    assert!(hub.terminate().success());
    let hub =
        common::HubProcess::start(&dir.path().join("knooppunt.toml"), &dir.path().join("data"));
    let url = hub.url("");
    succeeded(&publish(url.clone(), fresh.clone()).await);
    let shown = succeeded(&knooppunt(&url, &["principals", "show", "brp"]).await);
    assert!(
        !shown.contains(&fresh),
        "the token is never shown again: {shown}"
    );

    // A rotation with an overlap: the old token keeps working for the time given (also
    // after a restart), the new one at once; a rotation without one ends both old ones.
    let token_of = |printed: &str| {
        printed
            .lines()
            .find_map(|l| l.strip_prefix("token: "))
            .expect("the new token is printed")
            .to_owned()
    };
    let rotated =
        succeeded(&knooppunt(&url, &["principals", "token", "brp", "--keep-old", "PT1H"]).await);
    assert!(
        rotated.contains("The old token keeps working until"),
        "{rotated}"
    );
    let newer = token_of(&rotated);
    assert!(hub.terminate().success());
    let hub =
        common::HubProcess::start(&dir.path().join("knooppunt.toml"), &dir.path().join("data"));
    let url = hub.url("");
    succeeded(&publish(url.clone(), fresh.clone()).await);
    succeeded(&publish(url.clone(), newer.clone()).await);
    let short =
        succeeded(&knooppunt(&url, &["principals", "token", "brp", "--keep-old", "PT1S"]).await);
    let newest = token_of(&short);
    assert_eq!(
        publish(url.clone(), fresh.clone()).await.status.code(),
        Some(1),
        "only the token just replaced overlaps"
    );
    succeeded(&publish(url.clone(), newer.clone()).await);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        publish(url.clone(), newer).await.status.code(),
        Some(1),
        "the overlap has ended"
    );
    let too_long = knooppunt(&url, &["principals", "token", "brp", "--keep-old", "P30D"]).await;
    assert_eq!(too_long.status.code(), Some(1));
    assert!(stderr(&too_long).contains("P7D"), "{}", stderr(&too_long));
    succeeded(&publish(url.clone(), newest.clone()).await);
    succeeded(&knooppunt(&url, &["principals", "delete", "brp"]).await);
    assert_eq!(publish(url, newest).await.status.code(), Some(1));
    assert!(hub.terminate().success());
}

/// A hub configured for HTTPS with client certificates (`server.tls_*`): an admin creates a
/// principal with an OIN and no token, and that organisation's certificate (the CLI's
/// `--identity-file`) publishes its own sources, and only those.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_with_client_certificates_from_the_configuration() {
    const OIN: &str = "00000001823288444000";
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path.to_str().unwrap().to_owned()
    };
    // A CA, the hub's certificate for 127.0.0.1, and an organisation's client certificate.
    let ca = knooppunt_tests::certificates::TestCa::new("Test Private Services CA");
    let (server_pem, server_key) = ca.issue("knooppunt.test", None, true);
    let (client_pem, client_key) = ca.issue("BRP", Some(OIN), false);
    let ca_file = write("ca.pem", &ca.pem());
    let identity = write("brp.pem", &format!("{client_pem}{client_key}"));
    let config = common::config_with_admin(dir.path(), TOKEN);
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str(&format!(
        "\n[server]\ntls_certificate = \"{}\"\ntls_key = \"{}\"\ntls_client_ca = \"{ca_file}\"\n",
        write("server.pem", &server_pem),
        write("server.key", &server_key),
    ));
    std::fs::write(&config, text).unwrap();
    let hub = common::HubProcess::start(&config, &dir.path().join("data"));
    let url = format!("https://{}", hub.address);

    succeeded(
        &knooppunt(
            &url,
            &[
                "principals",
                "create",
                "brp",
                "--role",
                "publisher",
                "--oin",
                OIN,
                "--no-token",
                "--ca-file",
                &ca_file,
            ],
        )
        .await,
    );
    let publish = |source: &'static str| {
        let (url, ca_file, identity) = (url.clone(), ca_file.clone(), identity.clone());
        async move {
            knooppunt_with(
                &url,
                None,
                &[
                    "publish",
                    "--source",
                    source,
                    "--type",
                    TYPE,
                    "--ca-file",
                    &ca_file,
                    "--identity-file",
                    &identity,
                ],
            )
            .await
        }
    };
    succeeded(&publish("urn:nld:oin:00000001823288444000:systeem:BRP").await);
    let outside = publish("urn:nld:oin:00000001003214345000:systeem:X").await;
    assert_eq!(outside.status.code(), Some(1));
    assert!(stderr(&outside).contains("403"), "{}", stderr(&outside));
    assert!(hub.terminate().success());
}

#[tokio::test]
async fn catalog_entries_are_created_listed_shown_and_deleted() {
    let (hub, _dir, _sink) = hub_and_sink().await;
    let url = hub.url("");
    let created = succeeded(
        &knooppunt(
            &url,
            &[
                "eventtypes",
                "create",
                "--source",
                "urn:nld:oin:00000001823288444000:",
                "--type",
                "nl.brp.",
                "--prefix",
                "--description",
                "Alles van de BRP.",
            ],
        )
        .await,
    );
    let id = created
        .lines()
        .find_map(|line| line.strip_prefix("created "))
        .expect("the id")
        .to_owned();
    assert!(created.contains("type:     nl.brp.*"), "{created}");
    let listed = succeeded(&knooppunt(&url, &["eventtypes", "list"]).await);
    assert!(
        listed.contains(&id) && listed.contains("nl.brp.*"),
        "{listed}"
    );
    let shown = succeeded(&knooppunt(&url, &["eventtypes", "get", &id]).await);
    assert!(shown.contains("Alles van de BRP."), "{shown}");
    let deleted = succeeded(&knooppunt(&url, &["eventtypes", "delete", &id]).await);
    assert!(deleted.contains(&format!("deleted {id}")), "{deleted}");
    let gone = knooppunt(&url, &["eventtypes", "get", &id]).await;
    assert_eq!(gone.status.code(), Some(1), "a refusal exits with 1");
}

#[tokio::test]
async fn approvals_are_decided_and_the_audit_trail_exported_and_verified() {
    let (hub, dir, sink) = hub_and_sink().await;
    let url = hub.url("");
    let created = succeeded(
        &knooppunt(
            &url,
            &[
                "eventtypes",
                "create",
                "--source",
                "urn:nld:oin:00000001823288444000:",
                "--type",
                TYPE,
                "--description",
                "Verhuisd.",
                "--approval-required",
            ],
        )
        .await,
    );
    assert!(created.contains("(approval required)"), "{created}");
    let entry = created
        .lines()
        .find_map(|line| line.strip_prefix("created "))
        .expect("the id")
        .to_owned();
    // The admin's own subscription is granted at once (it owns the entry).
    let subscription = create_subscription(&url, &sink).await;
    let listed = succeeded(&knooppunt(&url, &["approvals", "list"]).await);
    assert!(
        listed.contains(&subscription) && listed.contains("granted"),
        "{listed}"
    );
    let own = knooppunt(
        &url,
        &[
            "approvals",
            "decide",
            &entry,
            &subscription,
            "--state",
            "revoked",
            "--reason",
            "test",
        ],
    )
    .await;
    assert_eq!(own.status.code(), Some(1));
    assert!(stderr(&own).contains("own approval"), "{}", stderr(&own));

    // The trail verifies at the hub and as an export; an edited export names the entry.
    let verified = succeeded(&knooppunt(&url, &["audit", "verify"]).await);
    assert!(verified.contains("intact"), "{verified}");
    let listed = succeeded(&knooppunt(&url, &["audit", "list", "--name", "eventtype"]).await);
    assert!(listed.contains("eventtype.create"), "{listed}");
    let export = dir.path().join("audit.jsonl");
    let export_arg = export.to_str().unwrap();
    succeeded(&knooppunt(&url, &["audit", "export", "--out", export_arg]).await);
    let offline = succeeded(&knooppunt(&url, &["audit", "verify", "--file", export_arg]).await);
    assert!(offline.contains("intact"), "{offline}");
    let text = std::fs::read_to_string(&export).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines.len() >= 4, "{text}");

    // A selection (entries 1, 2 and 4) is no chain: as a whole trail it is
    // broken, and the answer says how to check it; as a selection each entry is checked
    // and the gap is named as not checked.
    let picked = [lines[0], lines[1], lines[3]];
    let selection = dir.path().join("selection.jsonl");
    let selection_arg = selection.to_str().unwrap();
    std::fs::write(&selection, picked.join("\n")).unwrap();
    let as_chain = knooppunt(&url, &["audit", "verify", "--file", selection_arg]).await;
    assert_eq!(as_chain.status.code(), Some(3), "{}", stdout(&as_chain));
    assert!(
        stdout(&as_chain).contains("--selection"),
        "{}",
        stdout(&as_chain)
    );
    let as_selection = succeeded(
        &knooppunt(
            &url,
            &["audit", "verify", "--file", selection_arg, "--selection"],
        )
        .await,
    );
    assert!(
        as_selection.contains("3 entries checked against their own hash")
            && as_selection.contains("1 link between")
            && as_selection.contains("NOT CHECKED: what lies in 1 gap between"),
        "{as_selection}"
    );
    let mut third: serde_json::Value = serde_json::from_str(picked[2]).unwrap();
    third["object"] = serde_json::json!("subscription/someone-elses");
    let edited_seq = third["seq"].as_u64().unwrap();
    let edited = [picked[0], picked[1], &third.to_string()];
    std::fs::write(&selection, edited.join("\n")).unwrap();
    let broken = knooppunt(
        &url,
        &["audit", "verify", "--file", selection_arg, "--selection"],
    )
    .await;
    assert_eq!(broken.status.code(), Some(3), "{}", stdout(&broken));
    assert!(
        stdout(&broken).contains(&format!("BROKEN at entry {edited_seq}")),
        "{}",
        stdout(&broken)
    );

    let mut second: serde_json::Value = serde_json::from_str(lines[1]).unwrap();
    let seq = second["seq"].as_u64().unwrap();
    second["actor"] = serde_json::json!("someone-else");
    let mut edited: Vec<String> = lines.iter().map(|l| (*l).to_owned()).collect();
    edited[1] = second.to_string();
    std::fs::write(&export, edited.join("\n")).unwrap();
    let broken = knooppunt(&url, &["audit", "verify", "--file", export_arg]).await;
    assert_eq!(broken.status.code(), Some(3), "{}", stdout(&broken));
    assert!(
        stdout(&broken).contains(&format!("BROKEN at entry {seq}")),
        "{}",
        stdout(&broken)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pull_subscription_is_received_and_settled_from_the_command_line() {
    let (hub, _dir, _sink) = hub_and_sink().await;
    let url = hub.url("");
    let created = succeeded(
        &knooppunt(
            &url,
            &[
                "subscriptions",
                "create",
                "--type",
                TYPE,
                "--config",
                "delivery=pull",
                "--config",
                "ordering=unordered",
            ],
        )
        .await,
    );
    assert!(created.contains("state:    active"), "{created}");
    let id = created
        .lines()
        .find_map(|line| line.strip_prefix("created "))
        .expect("the id")
        .to_owned();
    for n in 1..=3 {
        let event_id = format!("pull-{n}");
        succeeded(
            &knooppunt(
                &url,
                &[
                    "publish", "--id", &event_id, "--source", SOURCE, "--type", TYPE,
                ],
            )
            .await,
        );
    }
    let received = succeeded(
        &knooppunt(
            &url,
            &[
                "pull", "receive", &id, "--max", "3", "--wait", "PT5S", "--json",
            ],
        )
        .await,
    );
    let held: serde_json::Value = serde_json::from_str(&received).unwrap();
    let held = held.as_array().unwrap();
    assert_eq!(held.len(), 3, "{received}");
    assert_eq!(held[0]["event"]["id"], "pull-1");
    assert_eq!(held[0]["deliveryCount"], 1);
    let token = |n: usize| held[n]["lockToken"].as_str().unwrap().to_owned();

    let acked = succeeded(&knooppunt(&url, &["pull", "acknowledge", &id, &token(0)]).await);
    assert!(acked.contains("acknowledge: 1 of 1 succeeded"), "{acked}");
    let rejected = succeeded(
        &knooppunt(
            &url,
            &["pull", "reject", &id, &token(1), "--reason", "unreadable"],
        )
        .await,
    );
    assert!(rejected.contains("1 of 1"), "{rejected}");
    succeeded(&knooppunt(&url, &["pull", "release", &id, &token(2)]).await);
    let again = succeeded(&knooppunt(&url, &["pull", "receive", &id, "--wait", "PT5S"]).await);
    assert!(
        again.contains("pull-3") && !again.contains("pull-1"),
        "{again}"
    );
    let twice = knooppunt(&url, &["pull", "acknowledge", &id, &token(0)]).await;
    assert_eq!(twice.status.code(), Some(1));
    assert!(stderr(&twice).contains("unknown"), "{}", stderr(&twice));
    let listed = succeeded(&knooppunt(&url, &["dead-letters", "list", &id]).await);
    assert!(
        listed.contains("rejected by the consumer: unreadable"),
        "{listed}"
    );

    // The stream shows all three, whatever became of them; a replay queues them again.
    let streamed = knooppunt(&url, &["pull", "stream", &id]).await;
    let lines = succeeded(&streamed);
    assert_eq!(lines.lines().count(), 3, "{lines}");
    assert!(stderr(&streamed).contains("read on with --after"));
    let started = succeeded(
        &knooppunt(
            &url,
            &[
                "pull",
                "replay",
                "start",
                &id,
                "--from",
                "2020-01-01T00:00:00Z",
                "--json",
            ],
        )
        .await,
    );
    let replay: serde_json::Value = serde_json::from_str(&started).unwrap();
    let replay_id = replay["id"].as_str().unwrap().to_owned();
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let shown = succeeded(&knooppunt(&url, &["pull", "replay", "get", &id, &replay_id]).await);
        if shown.contains("completed") {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{shown}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let listed = succeeded(&knooppunt(&url, &["pull", "replay", "list", &id]).await);
    assert!(listed.contains(&replay_id), "{listed}");
    let cancelled =
        succeeded(&knooppunt(&url, &["pull", "replay", "cancel", &id, &replay_id]).await);
    assert!(
        cancelled.contains("completed"),
        "a finished replay stays as it ended: {cancelled}"
    );
    assert!(hub.terminate().success());
}
