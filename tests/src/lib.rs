//! The test harness shared by the scenarios in `scenarios/`: a real hub on 127.0.0.1 port 0
//! ([`TestHub`]), the principals it knows, and where the specifications are.

pub mod browser;
pub mod certificates;
/// Message brokers (Debian's Mosquitto) and their clients.
pub use knooppunt_test_brokers as brokers;
pub mod console;
pub mod openapi;
pub mod sink;
pub mod tools;
pub mod wait;
pub mod zgw;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use knooppunt_broker::{
    Authentication, Hub, HubOptions, IngestOptions, Principal, Role, Transport, hash_token,
};
use knooppunt_store_embedded::{EmbeddedStore, SledOptions};
use tempfile::TempDir;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// `specs/` in the repository: the specifications this project implements, as copied
/// (`specs/README.md` says from where, under which licence).
pub fn specs_dir() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../specs");
    assert!(
        dir.is_dir(),
        "the specifications are expected at {}",
        dir.display()
    );
    dir
}

/// Reads a file below `specs/`.
pub fn read_spec(path: &str) -> String {
    let path = specs_dir().join(path);
    std::fs::read_to_string(&path)
        .unwrap_or_else(|error| panic!("cannot read {}: {error}", path.display()))
}

/// Bearer tokens of the principals every test hub knows.
pub mod tokens {
    /// Admin: sees and changes everything.
    pub const ADMIN: &str = "admin-token";
    /// Subscriber limited to `nl.brp.` types.
    pub const GEMEENTE: &str = "gemeente-token";
    /// Subscriber without limits.
    pub const KVK: &str = "kvk-token";
    /// Publisher only.
    pub const PUBLISHER: &str = "publisher-token";
    /// Publisher limited to sources under `urn:nld:oin:00000001823288444000:`.
    pub const BRP_PUBLISHER: &str = "brp-publisher-token";
    /// Reads `/metrics` only (a Prometheus scraper).
    pub const METRICS: &str = "metrics-token";
}

fn principal(name: &str, roles: &[Role], type_prefixes: &[&str]) -> Principal {
    Principal {
        name: name.into(),
        roles: roles.iter().copied().collect(),
        subscribe_type_prefixes: type_prefixes.iter().map(|p| (*p).to_owned()).collect(),
        publish_source_prefixes: Vec::new(),
        oin: None,
    }
}

fn authentication() -> Authentication {
    Authentication::tokens([
        (
            hash_token(tokens::ADMIN),
            principal("admin", &[Role::Admin], &[]),
        ),
        (
            hash_token(tokens::GEMEENTE),
            principal("gemeente", &[Role::Subscriber], &["nl.brp."]),
        ),
        (
            hash_token(tokens::KVK),
            principal("kvk", &[Role::Subscriber], &[]),
        ),
        (
            hash_token(tokens::PUBLISHER),
            principal("publisher", &[Role::Publisher], &[]),
        ),
        (
            hash_token(tokens::METRICS),
            principal("prometheus", &[Role::Metrics], &[]),
        ),
        (hash_token(tokens::BRP_PUBLISHER), {
            let mut brp = principal("brp", &[Role::Publisher], &[]);
            brp.publish_source_prefixes = vec!["urn:nld:oin:00000001823288444000:".into()];
            brp
        }),
    ])
}

/// The settings of every test hub: the test principals, delivery settings that keep tests
/// quick (idle workers look every 100 ms, the handshake waits at most 5 s), and sinks on
/// loopback allowed.
pub fn test_options() -> HubOptions {
    let mut options = HubOptions::new(authentication());
    options.delivery.origin = ORIGIN.into();
    options.delivery.idle_poll = std::time::Duration::from_millis(100);
    options.delivery.handshake_timeout = std::time::Duration::from_secs(5);
    options.shutdown_grace = std::time::Duration::from_secs(5);
    // The test sinks listen on loopback, which a hub refuses unless the operator allows it.
    options.delivery.sink_networks =
        knooppunt_broker::SinkNetworks::parse(&["127.0.0.0/8".into(), "::1/128".into()])
            .expect("valid networks");
    // The test publisher publishes in the BRP's source space (`urn:nld:oin:…`) and
    // elsewhere, which the default reserves for the organisation; the reservation has
    // scenarios of its own that start hubs with it on (`identity.rs`).
    options.ingest.reserve_oin_sources = false;
    options
}

/// The `WebHook-Request-Origin` of test hubs.
pub const ORIGIN: &str = "knooppunt.test";

/// A hub serving on 127.0.0.1 with a fresh store in a temporary directory.
#[allow(missing_debug_implementations)]
pub struct TestHub {
    pub address: SocketAddr,
    pub hub: Hub,
    /// The hub's store, for looking at what it holds.
    pub store: EmbeddedStore,
    pub client: reqwest::Client,
    data: Arc<TempDir>,
    options: HubOptions,
    transport: Transport,
    store_options: SledOptions,
    shutdown: oneshot::Sender<()>,
    task: JoinHandle<()>,
    /// Every answer under `/v1` is checked against the hub's OpenAPI document; the test
    /// fails when the hub is dropped if one broke it.
    conformance: openapi::ConformanceGuard,
}

/// How a [`TestHub`] starts: the test settings ([`test_options`]), a fresh data directory,
/// the default transport and store, each changed by a call.
#[allow(missing_debug_implementations)]
pub struct TestHubBuilder {
    options: HubOptions,
    transport: Transport,
    store: SledOptions,
    data: Option<TempDir>,
}

impl TestHubBuilder {
    /// These settings.
    pub fn options(mut self, options: HubOptions) -> Self {
        self.options = options;
        self
    }

    /// These ingest settings (the reservation of organisations' source spaces lifted, as in
    /// [`test_options`]).
    pub fn ingest(mut self, ingest: IngestOptions) -> Self {
        self.options.ingest = IngestOptions {
            reserve_oin_sources: false,
            ..ingest
        };
        self
    }

    /// Served with these connection limits and HTTPS.
    pub fn transport(mut self, transport: Transport) -> Self {
        self.transport = transport;
        self
    }

    /// These store settings (such as one event per segment).
    pub fn store(mut self, store: SledOptions) -> Self {
        self.store = store;
        self
    }

    /// The store in `data` (a directory the test made, such as one on a small filesystem).
    pub fn in_dir(mut self, data: TempDir) -> Self {
        self.data = Some(data);
        self
    }

    /// Authentication disabled, as `serve --dev-no-auth` runs it.
    pub fn without_authentication(mut self) -> Self {
        self.options.authentication = Authentication::Disabled;
        self
    }

    pub async fn start(self) -> TestHub {
        let data = match self.data {
            Some(data) => data,
            None => tempfile::tempdir().unwrap(),
        };
        TestHub::start_in(Arc::new(data), self.options, self.transport, self.store).await
    }
}

impl TestHub {
    /// A hub with the test settings.
    pub async fn start() -> TestHub {
        TestHub::builder().start().await
    }

    /// A hub of other settings: [`TestHubBuilder`].
    pub fn builder() -> TestHubBuilder {
        TestHubBuilder {
            options: test_options(),
            transport: Transport::default(),
            store: SledOptions::default(),
            data: None,
        }
    }

    async fn start_in(
        data: Arc<TempDir>,
        options: HubOptions,
        transport: Transport,
        store: SledOptions,
    ) -> TestHub {
        let store_options = store;
        let store = EmbeddedStore::open_with(data.path(), store_options).unwrap();
        let hub = Hub::open_with(Arc::new(store.clone()), options.clone(), transport.clone())
            .await
            .unwrap();
        let listener = knooppunt_broker::listen(([127, 0, 0, 1], 0).into()).unwrap();
        let address = listener.local_addr().unwrap();
        let (shutdown, stop) = oneshot::channel::<()>();
        let serving = hub.clone();
        let conformance = openapi::Conformance::new(hub.openapi_document());
        let router = openapi::conformance_layer(hub.router(), &conformance);
        let task = tokio::spawn(async move {
            knooppunt_broker::serve_router(listener, serving, router, async {
                let _ = stop.await;
            })
            .await
            .unwrap();
        });
        TestHub {
            address,
            hub,
            store,
            client: reqwest::Client::new(),
            data,
            options,
            transport,
            store_options,
            shutdown,
            task,
            conformance: openapi::ConformanceGuard(conformance),
        }
    }

    /// What checks this hub's answers against its OpenAPI document.
    pub fn conformance(&self) -> &openapi::Conformance {
        &self.conformance.0
    }

    /// Stops the hub, waits until it has let go of its store, and starts it again on the
    /// same data directory.
    pub async fn restart(self) -> TestHub {
        let options = self.options.clone();
        self.restart_with(options).await
    }

    /// [`TestHub::restart`] with other settings.
    pub async fn restart_with(mut self, options: HubOptions) -> TestHub {
        self.options = options;
        self.restart_after_editing(|_| {}).await
    }

    /// Stops the hub, lets `edit` change what is in its data directory (as someone with
    /// access to the disk could), and starts it again.
    pub async fn restart_after_editing(self, edit: impl FnOnce(&std::path::Path)) -> TestHub {
        let TestHub {
            hub,
            store,
            data,
            options,
            transport,
            store_options,
            shutdown,
            task,
            ..
        } = self;
        let _ = shutdown.send(());
        task.await.unwrap();
        drop((hub, store));
        edit(data.path());
        TestHub::start_in(data, options, transport, store_options).await
    }

    /// The sequence numbers of a subscription's pending deliveries, as the store has them.
    pub async fn store_pending(&self, subscription: &str) -> Vec<u64> {
        use knooppunt_store::Inspect;
        let pending = self.store.pending_deliveries(subscription, usize::MAX);
        pending.await.unwrap().iter().map(|d| d.seq).collect()
    }

    /// The attempts recorded for a subscription's oldest pending delivery.
    pub async fn store_pending_attempts(&self, subscription: &str) -> u32 {
        use knooppunt_store::Inspect;
        let pending = self
            .store
            .pending_deliveries(subscription, 1)
            .await
            .unwrap();
        pending.first().map_or(0, |d| d.attempts)
    }

    pub fn url(&self, path: &str) -> String {
        let scheme = if self.transport.tls.is_some() {
            "https"
        } else {
            "http"
        };
        format!("{scheme}://{}{path}", self.address)
    }

    /// Creates `count` subscriber principals `p-0`, `p-1`, … as the admin: as many entries on
    /// the audit trail (`principal.create`).
    pub async fn create_principals(&self, count: usize) {
        for n in 0..count {
            let created = self
                .call(
                    reqwest::Method::POST,
                    "/v1/principals",
                    tokens::ADMIN,
                    Some(serde_json::json!({"name": format!("p-{n}"), "roles": ["subscriber"]})),
                )
                .await;
            assert_eq!(created.status, 201, "{}", created.body);
        }
    }

    /// Sends a request with a bearer token and, if given, a JSON body; returns the answer.
    pub async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        token: &str,
        body: Option<serde_json::Value>,
    ) -> Answer {
        let mut request = self.request(method, path, token);
        if let Some(body) = body {
            request = request.json(&body);
        }
        Answer::from(request.send().await.unwrap()).await
    }

    /// Publishes `body` as the test publisher with this content type; returns the answer.
    pub async fn publish_raw(&self, content_type: &str, body: impl Into<reqwest::Body>) -> Answer {
        let request = self
            .request(reqwest::Method::POST, "/v1/events", tokens::PUBLISHER)
            .header("content-type", content_type)
            .body(body);
        Answer::from(request.send().await.unwrap()).await
    }

    /// Publishes one event in the structured JSON format as the principal of `token`; the
    /// answer, which must be 202.
    pub async fn publish_as(&self, token: &str, event: &serde_json::Value) -> Answer {
        let request = self
            .request(reqwest::Method::POST, "/v1/events", token)
            .header("content-type", "application/cloudevents+json")
            .body(event.to_string());
        let answer = Answer::from(request.send().await.unwrap()).await;
        assert_eq!(answer.status, 202, "{}", answer.body);
        answer
    }

    /// Creates a subscription of the principal of `token` to events of `event_type`,
    /// delivered to `sink` (a URL) with this `config`; its id (the creation must succeed).
    pub async fn subscribe(
        &self,
        token: &str,
        sink: &str,
        event_type: &str,
        config: serde_json::Value,
    ) -> String {
        let body = serde_json::json!({"sink": sink, "protocol": "HTTP", "types": [event_type],
                                      "config": config});
        let answer = self
            .call(
                reqwest::Method::POST,
                "/v1/subscriptions",
                token,
                Some(body),
            )
            .await;
        assert_eq!(answer.status, 201, "{}", answer.body);
        answer.body["id"].as_str().unwrap().to_owned()
    }

    /// The hub's `/metrics` text, read with the metrics principal's token.
    pub async fn metrics(&self) -> String {
        let request = self.request(reqwest::Method::GET, "/metrics", tokens::METRICS);
        request.send().await.unwrap().text().await.unwrap()
    }

    /// The JSON of an unauthenticated `GET` (such as `/v1/openapi.json`).
    pub async fn get_json(&self, path: &str) -> serde_json::Value {
        let response = self.client.get(self.url(path)).send().await.unwrap();
        response.json().await.unwrap()
    }

    /// A request with a bearer token.
    pub fn request(
        &self,
        method: reqwest::Method,
        path: &str,
        token: &str,
    ) -> reqwest::RequestBuilder {
        self.client
            .request(method, self.url(path))
            .bearer_auth(token)
    }
}

/// A response's status, headers and JSON body (or `Null`).
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub body: serde_json::Value,
}

impl Answer {
    pub async fn from(response: reqwest::Response) -> Answer {
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let bytes = response.bytes().await.unwrap();
        let body = serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null);
        Answer {
            status,
            headers,
            body,
        }
    }

    /// The path of the `Link: <…>; rel="next"` header, if there is one.
    pub fn next_link(&self) -> Option<String> {
        let link = self.header("link")?;
        Some(link.strip_prefix('<')?.split('>').next()?.to_owned())
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(|v| v.to_str().unwrap())
    }

    /// The `name`s of the invalid params of a problem.
    pub fn invalid_params(&self) -> Vec<String> {
        self.body["invalidParams"]
            .as_array()
            .map(|list| {
                list.iter()
                    .map(|p| p["name"].as_str().unwrap().to_owned())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Asserts a problem+json answer with this status and returns it.
    pub fn assert_problem(self, status: u16) -> Answer {
        assert_eq!(self.status, status, "{}", self.body);
        assert_eq!(
            self.header("content-type"),
            Some("application/problem+json")
        );
        for field in ["type", "title", "detail"] {
            assert!(
                self.body[field].is_string(),
                "problem lacks {field}: {}",
                self.body
            );
        }
        assert_eq!(self.body["status"], status);
        self
    }
}

/// A small tmpfs mounted for one test (the tests run as root), unmounted when dropped.
#[derive(Debug)]
pub struct SmallDisk {
    dir: tempfile::TempDir,
}

impl SmallDisk {
    /// Where it is mounted.
    pub fn path(&self) -> &std::path::Path {
        self.dir.path()
    }

    pub fn mount(size: &str) -> SmallDisk {
        let dir = tempfile::tempdir().unwrap();
        let status = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .status()
            .expect("mount runs");
        assert!(
            status.success(),
            "mounting a {size} tmpfs failed (the tests run as root)"
        );
        SmallDisk { dir }
    }

    /// Writes zeros to a file on it until the disk is full.
    pub fn fill(&self) -> std::path::PathBuf {
        use std::io::Write;
        let path = self.dir.path().join("filler");
        let mut file = std::fs::File::create(&path).unwrap();
        let chunk = vec![0u8; 64 * 1024];
        while file.write_all(&chunk).is_ok() {}
        let _ = file.sync_all();
        path
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}
