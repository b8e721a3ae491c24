//! The Notificaties API facade on the real binary, on the embedded store and on PostgreSQL:
//! ZGW clients from the configuration file; a notificatie round-trips byte for byte to an
//! abonnement and reaches CloudEvents subscriptions; a native CloudEvent reaches the
//! abonnement as a notificatie.

mod common;

use std::time::Duration;

use common::{Backend, config_with_admin};
use knooppunt_tests::sink::{Reply, Sink};
use knooppunt_tests::zgw::token;
use serde_json::{Value, json};

const ADMIN: &str = "zgw-admin";
const OPEN_ZAAK: &str = "open-zaak-geheim-16";
const ZAC: &str = "zac-geheim-minstens-16";

const NOTIFICATIE: &str = r#"{
  "kanaal": "zaken",
  "hoofdObject": "https://open-zaak.example.nl/zaken/api/v1/zaken/d4d4",
  "resource": "status",
  "resourceUrl": "https://open-zaak.example.nl/zaken/api/v1/statussen/a1a1",
  "actie": "create",
  "aanmaakdatum": "2026-11-24T08:15:00.123456Z",
  "kenmerken": {"bronorganisatie": "224557609"}
}"#;

/// A configuration with an admin and the ZGW clients Open Zaak (publishes) and a
/// zaakafhandelcomponent (consumes).
fn config_with_zgw_clients(dir: &std::path::Path) -> std::path::PathBuf {
    let config = config_with_admin(dir, ADMIN);
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str(&format!(
        "\n[zgw]\n\
         [[zgw.clients]]\nclient_id = \"open-zaak\"\nsecret = \"{OPEN_ZAAK}\"\nscopes = [\"notificaties.publiceren\"]\n\
         [[zgw.clients]]\nclient_id = \"zac\"\nsecret = \"{ZAC}\"\nscopes = [\"notificaties.consumeren\"]\n"
    ));
    std::fs::write(&config, text).unwrap();
    config
}

async fn both_vocabularies(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let config = config_with_zgw_clients(dir.path());
    let hub = backend.hub_with(&config, dir.path(), "a");
    let client = reqwest::Client::new();
    let zgw = |method: reqwest::Method, path: &str, token: &str| {
        client
            .request(method, hub.url(&format!("/api/v1{path}")))
            .bearer_auth(token)
    };
    let (open_zaak, zac) = (
        token("open-zaak", OPEN_ZAAK.as_bytes()),
        token("zac", ZAC.as_bytes()),
    );
    let kanaal = zgw(reqwest::Method::POST, "/kanaal", &open_zaak)
        .json(&json!({"naam": "zaken", "filters": ["bronorganisatie"]}))
        .send()
        .await
        .unwrap();
    assert_eq!(kanaal.status(), 201, "{}", kanaal.text().await.unwrap());

    let callback = Sink::start().await;
    callback.answer_always(Reply::status(204));
    let abonnement = zgw(reqwest::Method::POST, "/abonnement", &zac)
        .json(&json!({"callbackUrl": callback.url, "auth": "Bearer zac",
                      "kanalen": [{"naam": "zaken", "filters": {"bronorganisatie": "224557609"}}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(
        abonnement.status(),
        201,
        "{}",
        abonnement.text().await.unwrap()
    );

    let sink = Sink::start_for_any_hub().await;
    let subscribed = client
        .post(hub.url("/v1/subscriptions"))
        .bearer_auth(ADMIN)
        .json(&json!({"sink": sink.url, "protocol": "HTTP",
                      "filters": [{"prefix": {"type": "nl.vng.zgw.zaken."}}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(subscribed.status(), 201);

    // Notificatie → hub → notificatie, byte for byte; and a CloudEvent with it as data.
    let published = zgw(reqwest::Method::POST, "/notificaties", &open_zaak)
        .header("content-type", "application/json")
        .body(NOTIFICATIE)
        .send()
        .await
        .unwrap();
    assert_eq!(published.status(), 201);
    let arrived = callback.wait_for(2, Duration::from_secs(15)).await;
    assert_eq!(
        std::str::from_utf8(&arrived[1].body).unwrap(),
        NOTIFICATIE.trim()
    );
    assert_eq!(arrived[1].header("authorization"), Some("Bearer zac"));
    let event = sink.wait_for(1, Duration::from_secs(15)).await;
    assert!(
        std::str::from_utf8(&event[0].body)
            .unwrap()
            .contains(NOTIFICATIE.trim()),
        "the CloudEvent carries the notificatie as data"
    );

    // CloudEvent → hub → notificatie.
    let native = json!({"specversion": "1.0", "id": "ce-1", "source": "urn:nld:oin:00000001823288444000:systeem:zaken",
                        "type": "nl.vng.zgw.zaken.zaak.update",
                        "subject": "https://zaken.example.nl/api/v1/zaken/9",
                        "time": "2026-11-24T09:00:00Z", "kenmerkbronorganisatie": "224557609"});
    let sent = client
        .post(hub.url("/v1/events"))
        .bearer_auth(ADMIN)
        .header("content-type", "application/cloudevents+json")
        .body(native.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(sent.status(), 202);
    let arrived = callback.wait_for(3, Duration::from_secs(15)).await;
    let notificatie: Value = serde_json::from_slice(&arrived[2].body).unwrap();
    assert_eq!(notificatie["resource"], "zaak");
    assert_eq!(notificatie["actie"], "update");
    assert_eq!(
        notificatie["kenmerken"],
        json!({"bronorganisatie": "224557609"})
    );
    eprintln!("{}: both vocabularies round-trip", backend.name());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_vocabularies_on_the_embedded_store() {
    both_vocabularies(Backend::Embedded).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_vocabularies_on_postgres() {
    both_vocabularies(Backend::postgres("zgw")).await;
}

/// Runs `tests/fixtures/open-zaak/run.py` (notifications-api-common's own code, in the
/// smallest Django project it needs, its database in `django_db`) against `root`: its JSON.
fn open_zaak(step: &str, root: &str, django_db: &knooppunt_test_postgres::Cluster) -> Value {
    let library = knooppunt_tests::tools::pip(
        "notifications-api-common",
        "notifications-api-common==0.13.0 psycopg2-binary==2.9.10",
    );
    let private = tempfile::tempdir().unwrap();
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/fixtures/open-zaak/run.py"
    );
    let output = std::process::Command::new("python3")
        .env("PYTHONPATH", library)
        .env("OZ_DB_PORT", django_db.port().to_string())
        .env("OZ_DB_NAME", "openzaak")
        .env("OZ_PRIVATE", private.path())
        .args([script, step, root, "open-zaak", OPEN_ZAAK])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "run.py {step}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!("{e}: {}", String::from_utf8_lossy(&output.stdout));
    })
}

/// Open Zaak's seven kanalen registered through notifications-api-common's own
/// `register_kanalen`, twice as a re-deploy does (the second run replaces them), then a
/// notificatie on each sent by its own `send_notification`: each arrives at an abonnement
/// of the kanalen whose filters (snake_case and dotted, as Open Zaak's kenmerken are named)
/// let it through.
async fn open_zaaks_kanalen(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let config = config_with_zgw_clients(dir.path());
    let hub = backend.hub_with(&config, dir.path(), "a");
    let django_db = knooppunt_test_postgres::Cluster::start();
    django_db.create_database("openzaak");
    let root = hub.url("/api/v1/");

    let registered = {
        let (root, db) = (root.clone(), &django_db);
        tokio::task::block_in_place(|| open_zaak("register", &root, db))
    };
    let runs = registered["register"].as_array().unwrap();
    let kanalen = [
        "autorisaties",
        "besluiten",
        "besluittypen",
        "documenten",
        "informatieobjecttypen",
        "zaaktypen",
        "zaken",
    ];
    for (n, run) in runs.iter().enumerate() {
        assert_eq!(run["err"], "", "run {n}: {run}");
        let said = if n == 0 {
            "Registered kanaal"
        } else {
            "Updated already existing kanaal"
        };
        for kanaal in kanalen {
            assert!(
                run["out"]
                    .as_str()
                    .unwrap()
                    .contains(&format!("{said} '{kanaal}'")),
                "run {n}, {kanaal}: {run}"
            );
        }
    }
    let client = reqwest::Client::new();
    let zac = token("zac", ZAC.as_bytes());
    let listed: Value = client
        .get(hub.url("/api/v1/kanaal"))
        .bearer_auth(&zac)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let mut names: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["naam"].as_str().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, kanalen);
    let zaken = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["naam"] == "zaken")
        .unwrap();
    assert_eq!(
        zaken["filters"],
        json!([
            "bronorganisatie",
            "zaaktype",
            "zaaktype.catalogus",
            "vertrouwelijkheidaanduiding"
        ])
    );
    assert_eq!(
        zaken["documentatieLink"],
        "https://open-zaak.example.nl/ref/kanalen/#zaken"
    );

    let callback = Sink::start().await;
    callback.answer_always(Reply::status(204));
    let catalogus = "https://open-zaak.example.nl/catalogi/api/v1/catalogussen/1";
    let abonnement = client
        .post(hub.url("/api/v1/abonnement"))
        .bearer_auth(&zac)
        .json(&json!({"callbackUrl": callback.url, "auth": "Bearer zac",
                      "kanalen": [
                          {"naam": "zaken", "filters": {"zaaktype.catalogus": catalogus}},
                          {"naam": "besluiten", "filters": {"verantwoordelijke_organisatie": "224557609"}},
                          {"naam": "documenten", "filters": {"vertrouwelijkheidaanduiding": "openbaar"}},
                          {"naam": "autorisaties"},
                          {"naam": "zaaktypen", "filters": {"catalogus": catalogus}},
                          {"naam": "besluittypen"},
                          {"naam": "informatieobjecttypen", "filters": {"catalogus": "*"}}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(
        abonnement.status(),
        201,
        "{}",
        abonnement.text().await.unwrap()
    );

    let sent = {
        let (root, db) = (root.clone(), &django_db);
        tokio::task::block_in_place(|| open_zaak("send", &root, db))
    };
    let sent = sent["sent"].as_array().unwrap();
    assert_eq!(sent.len(), 7);
    assert_eq!(
        sent[1]["kenmerken"]["verantwoordelijkeOrganisatie"], "224557609",
        "camelCased as Open Zaak sends it: {}",
        sent[1]
    );
    // The test notificatie, then one per kanaal, each as it was sent.
    let arrived = callback.wait_for(8, Duration::from_secs(30)).await;
    let mut bodies: Vec<Value> = arrived[1..].iter().map(|r| r.json()).collect();
    bodies.sort_by_key(|b| b["kanaal"].as_str().unwrap().to_owned());
    let mut expected = sent.to_vec();
    expected.sort_by_key(|b| b["kanaal"].as_str().unwrap().to_owned());
    assert_eq!(bodies, expected);
    eprintln!(
        "{}: Open Zaak's kanalen through notifications-api-common",
        backend.name()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_zaaks_kanalen_through_notifications_api_common_on_the_embedded_store() {
    open_zaaks_kanalen(Backend::Embedded).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_zaaks_kanalen_through_notifications_api_common_on_postgres() {
    open_zaaks_kanalen(Backend::postgres("zgw-open-zaak")).await;
}

/// A configuration with an admin and these ZGW clients (`client_id`, secret, scopes).
fn config_with_clients(
    dir: &std::path::Path,
    clients: &[(&str, &str, &[&str])],
) -> std::path::PathBuf {
    let config = config_with_admin(dir, ADMIN);
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str("\n[zgw]\n");
    for (id, secret, scopes) in clients {
        text.push_str(&format!(
            "[[zgw.clients]]\nclient_id = \"{id}\"\nsecret = \"{secret}\"\nscopes = {scopes:?}\n"
        ));
    }
    std::fs::write(&config, text).unwrap();
    config
}

const IMPORTER: &str = "importeur-geheim-16";
const BOTH: &[&str] = &["notificaties.publiceren", "notificaties.consumeren"];

/// Runs `knooppunt import open-notificaties` into `hub` with `args`: its exit code and
/// standard output (and standard error, after a line `--`).
fn import(hub: &common::HubProcess, args: &[&str]) -> (i32, String) {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_knooppunt"))
        .args(["import", "open-notificaties", "--hub", &hub.url("")])
        .args(["--client-id", "importer"])
        .env("KNOOPPUNT_ZGW_SECRET", IMPORTER)
        .args(args)
        .output()
        .unwrap();
    let mut stdout = String::from_utf8(output.stdout).unwrap();
    if !output.stderr.is_empty() {
        stdout.push_str(&format!("--\n{}", String::from_utf8_lossy(&output.stderr)));
    }
    eprintln!("{stdout}");
    (output.status.code().unwrap(), stdout)
}

/// Moving over: a hub playing Open Notificaties (its own Notificaties API) holds kanalen and
/// abonnementen; `knooppunt import open-notificaties` reads them and makes them on a second
/// hub: a dry run makes nothing, an abonnement without its `auth` is skipped and said so,
/// the import makes each one, and running it again makes nothing twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn importing_from_open_notificaties_is_idempotent_with_a_dry_run_and_a_report() {
    let (there_dir, here_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let publish: &[&str] = &["notificaties.publiceren"];
    let consume: &[&str] = &["notificaties.consumeren"];
    let there = Backend::Embedded.hub_with(
        &config_with_clients(
            there_dir.path(),
            &[("open-zaak", OPEN_ZAAK, publish), ("zac", ZAC, consume)],
        ),
        there_dir.path(),
        "open-notificaties",
    );
    let here = Backend::Embedded.hub_with(
        &config_with_clients(here_dir.path(), &[("importer", IMPORTER, BOTH)]),
        here_dir.path(),
        "knooppunt",
    );
    let client = reqwest::Client::new();
    let post = |hub: &common::HubProcess, path: &str, token: String, body: Value| {
        client
            .post(hub.url(&format!("/api/v1{path}")))
            .bearer_auth(token)
            .json(&body)
            .send()
    };
    for kanaal in [
        json!({"naam": "zaken", "filters": ["bronorganisatie", "zaaktype"],
               "documentatieLink": "https://open-zaak.example.nl/ref/kanalen/#zaken"}),
        json!({"naam": "documenten", "filters": []}),
    ] {
        let made = post(
            &there,
            "/kanaal",
            token("open-zaak", OPEN_ZAAK.as_bytes()),
            kanaal,
        )
        .await
        .unwrap();
        assert_eq!(made.status(), 201, "{}", made.text().await.unwrap());
    }
    let (zaken, documenten) = (Sink::start().await, Sink::start().await);
    zaken.answer_always(Reply::status(204));
    documenten.answer_always(Reply::status(204));
    for abonnement in [
        json!({"callbackUrl": zaken.url, "auth": "Bearer zaken-ontvanger",
               "kanalen": [{"naam": "zaken", "filters": {"bronorganisatie": "224557609"}}]}),
        json!({"callbackUrl": documenten.url, "auth": "Bearer documenten-ontvanger",
               "kanalen": [{"naam": "documenten"}, {"naam": "zaken", "filters": {}}]}),
    ] {
        let made = post(
            &there,
            "/abonnement",
            token("zac", ZAC.as_bytes()),
            abonnement,
        )
        .await
        .unwrap();
        assert_eq!(made.status(), 201, "{}", made.text().await.unwrap());
    }
    let source = ["--url".to_owned(), there.url("/api/v1")];
    let reading = ["--on-client-id", "zac", "--on-secret", ZAC];
    let auth_file = here_dir.path().join("auth.txt");
    std::fs::write(
        &auth_file,
        format!("# callbackUrl auth\n{} Bearer zaken-ontvanger\n", zaken.url),
    )
    .unwrap();
    let auth = ["--auth-file", auth_file.to_str().unwrap()];
    let args = |extra: &[&str]| -> Vec<String> {
        source
            .iter()
            .cloned()
            .chain(reading.iter().chain(extra).map(|s| (*s).to_owned()))
            .collect()
    };
    let run = |extra: &[&str]| {
        let args = args(extra);
        import(&here, &args.iter().map(String::as_str).collect::<Vec<_>>())
    };
    let listed = |path: &'static str| {
        let client = client.clone();
        let url = here.url(&format!("/api/v1{path}"));
        async move {
            client
                .get(url)
                .bearer_auth(token("importer", IMPORTER.as_bytes()))
                .send()
                .await
                .unwrap()
                .json::<Vec<Value>>()
                .await
                .unwrap()
        }
    };

    // The dry run reads both sides and reports; it makes nothing.
    let (code, out) = run(&[auth[0], auth[1], "--dry-run"]);
    assert_eq!(code, 1, "the skipped abonnement needs attention");
    assert!(out.contains("kanaal zaken: would create"), "{out}");
    assert!(out.contains("kanaal documenten: would create"), "{out}");
    assert!(
        out.contains(&format!("abonnement {} (zaken): would create", zaken.url)),
        "{out}"
    );
    assert!(
        out.contains(&format!("abonnement {} (documenten, zaken): skipped (Open Notificaties does not show its `auth`", documenten.url)),
        "{out}"
    );
    assert!(
        out.contains("dry run, nothing made: 3 would create, 1 skipped"),
        "{out}"
    );
    assert!(listed("/kanaal").await.is_empty());
    assert!(listed("/abonnement").await.is_empty());

    // Without the second auth: what can be made is made; the rest is reported.
    let (code, out) = run(&auth);
    assert_eq!(code, 1);
    assert!(out.ends_with("3 created, 1 skipped\n"), "{out}");
    std::fs::write(
        &auth_file,
        format!(
            "{} Bearer zaken-ontvanger\n{} Bearer documenten-ontvanger\n",
            zaken.url, documenten.url
        ),
    )
    .unwrap();
    let (code, out) = run(&[auth[0], auth[1], "--json"]);
    assert_eq!(code, 0, "{out}");
    let report: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        report["counts"],
        json!({"created": 1, "already here": 3}),
        "{report}"
    );

    // What was made is what Open Notificaties held: the same kanalen and abonnementen.
    let kanalen = listed("/kanaal").await;
    let zaken_kanaal = kanalen.iter().find(|k| k["naam"] == "zaken").unwrap();
    assert_eq!(
        zaken_kanaal["filters"],
        json!(["bronorganisatie", "zaaktype"])
    );
    assert_eq!(
        zaken_kanaal["documentatieLink"],
        "https://open-zaak.example.nl/ref/kanalen/#zaken"
    );
    let abonnementen = listed("/abonnement").await;
    assert_eq!(abonnementen.len(), 2, "{abonnementen:?}");
    let made = abonnementen
        .iter()
        .find(|a| a["callbackUrl"] == zaken.url.as_str())
        .unwrap();
    assert_eq!(
        made["kanalen"],
        json!([{"naam": "zaken", "filters": {"bronorganisatie": "224557609"}}])
    );

    // Again: nothing is made twice.
    let (code, out) = run(&auth);
    assert_eq!(code, 0, "{out}");
    assert!(out.ends_with("4 already here\n"), "{out}");
    assert_eq!(listed("/abonnement").await.len(), 2);

    // A notificatie published here reaches the imported abonnement with its own auth.
    let published = post(
        &here,
        "/notificaties",
        token("importer", IMPORTER.as_bytes()),
        serde_json::from_str(NOTIFICATIE).unwrap(),
    )
    .await
    .unwrap();
    assert!(
        published.status().is_success(),
        "{}",
        published.text().await.unwrap()
    );
    let arrived = zaken.wait_for(3, Duration::from_secs(15)).await;
    assert_eq!(
        arrived.last().unwrap().header("authorization"),
        Some("Bearer zaken-ontvanger")
    );
}

/// Open Notificaties' own shapes, as its documentation and code give them: the kanalen as
/// a list (an empty `documentatieLink`), the abonnementen in pages of `results` linked by
/// `next`, `auth` never shown; a token it refuses stops the import with its answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn importing_reads_open_notificaties_own_shapes() {
    use axum::routing::get;
    let here_dir = tempfile::tempdir().unwrap();
    let here = Backend::Embedded.hub_with(
        &config_with_clients(here_dir.path(), &[("importer", IMPORTER, BOTH)]),
        here_dir.path(),
        "knooppunt",
    );
    let callback = Sink::start().await;
    callback.answer_always(Reply::status(204));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}/api/v1", listener.local_addr().unwrap());
    let (page_2, cb) = (format!("{base}/abonnement?page=2"), callback.url.clone());
    let authorized = |headers: &axum::http::HeaderMap| {
        headers.get("authorization").and_then(|v| v.to_str().ok()) == Some("Bearer on-token")
    };
    let kanalen = json!([
        {"url": format!("{base}/kanaal/1"), "naam": "zaken", "documentatieLink": "", "filters": ["bronorganisatie"]},
        {"url": format!("{base}/kanaal/2"), "naam": "besluiten", "documentatieLink": "", "filters": []}
    ]);
    let first = json!({"count": 2, "next": page_2, "previous": null, "results": [
        {"url": format!("{base}/abonnement/1"), "callbackUrl": format!("{cb}?a=1"),
         "kanalen": [{"naam": "zaken", "filters": {"bronorganisatie": "224557609"}}],
         "sendCloudevents": false, "cloudeventFilters": []}]});
    let second = json!({"count": 2, "next": null, "previous": format!("{base}/abonnement"), "results": [
        {"url": format!("{base}/abonnement/2"), "callbackUrl": format!("{cb}?b=2"),
         "kanalen": [{"naam": "besluiten", "filters": {}}],
         "sendCloudevents": false, "cloudeventFilters": []}]});
    let app = axum::Router::new()
        .route("/api/v1/kanaal", get(move |headers: axum::http::HeaderMap| async move {
            if authorized(&headers) { (axum::http::StatusCode::OK, axum::Json(kanalen)) }
            else { (axum::http::StatusCode::FORBIDDEN, axum::Json(json!({"code": "permission_denied", "detail": "Je hebt geen toestemming om deze actie uit te voeren."}))) }
        }))
        .route("/api/v1/abonnement", get(move |headers: axum::http::HeaderMap, query: axum::extract::RawQuery| async move {
            assert!(authorized(&headers));
            axum::Json(if query.0.as_deref() == Some("page=2") { second } else { first })
        }));
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    let auth_file = here_dir.path().join("auth.txt");
    std::fs::write(
        &auth_file,
        format!("{cb}?a=1 Bearer een\n{cb}?b=2 Bearer twee\n"),
    )
    .unwrap();
    let url = base.clone();
    let here_ref = &here;
    let run = move |token: &'static str| {
        let (url, auth) = (url.clone(), auth_file.to_str().unwrap().to_owned());
        tokio::task::block_in_place(|| {
            import(
                here_ref,
                &["--url", &url, "--token", token, "--auth-file", &auth],
            )
        })
    };
    let (code, out) = run("wrong-token");
    assert_eq!(code, 2, "{out}");
    assert!(
        out.contains(
            "Open Notificaties answered 403 Forbidden to GET /kanaal: Je hebt geen toestemming"
        ),
        "{out}"
    );
    let (code, out) = run("on-token");
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("kanaal zaken: created"), "{out}");
    assert!(
        out.contains(&format!("abonnement {cb}?b=2 (besluiten): created")),
        "{out}"
    );
    assert!(out.ends_with("4 created\n"), "{out}");
    let (code, out) = run("on-token");
    assert_eq!(code, 0, "{out}");
    assert!(out.ends_with("4 already here\n"), "{out}");
}
