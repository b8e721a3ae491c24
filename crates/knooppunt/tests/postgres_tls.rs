//! TLS to PostgreSQL (`sslmode` and `sslrootcert` in `store.url`, as libpq reads them),
//! against a throwaway cluster serving a certificate made in the test: `verify-full` checks
//! the chain and the name, `verify-ca` the chain, a certificate of another CA is refused
//! naming why, `require` refuses a server without TLS, and every connection of a hub (its
//! pool and its listener for other hubs' changes) is encrypted.

mod common;

use std::path::Path;
use std::process::{Command, Output};

use common::{HubProcess, config_with_admin};
use knooppunt_test_postgres::Cluster;
use knooppunt_tests::certificates::TestCa;

/// Files the server reads: owned by the user it runs as (postgres, when the tests run as
/// root), the key readable by it alone.
fn server_files(dir: &Path, certificate: &str, key: &str) -> (String, String) {
    let (cert_path, key_path) = (dir.join("server.crt"), dir.join("server.key"));
    std::fs::write(&cert_path, certificate).unwrap();
    std::fs::write(&key_path, key).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&key_path, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let root = Command::new("id").arg("-u").output().unwrap().stdout == b"0\n";
    if root {
        let owned = Command::new("chown")
            .args(["postgres:postgres"])
            .arg(&cert_path)
            .arg(&key_path)
            .status()
            .unwrap();
        assert!(owned.success());
    }
    (
        format!("ssl_cert_file={}", cert_path.display()),
        format!("ssl_key_file={}", key_path.display()),
    )
}

/// `knooppunt check --store` on `url`.
fn check_store(url: &str) -> Output {
    Command::new(env!("CARGO_BIN_EXE_knooppunt"))
        .args(["check", "--store"])
        .env("KNOOPPUNT_STORE_BACKEND", "postgres")
        .env("KNOOPPUNT_STORE_URL", url)
        .output()
        .unwrap()
}

fn said(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hub_talks_to_postgresql_over_tls_with_the_certificate_checked() {
    let ca = TestCa::new("Test database CA");
    let (certificate, key) = ca.issue("database", None, true); // for 127.0.0.1
    let dir = tempfile::tempdir().unwrap();
    let (cert_setting, key_setting) = server_files(dir.path(), &certificate, &key);
    let cluster = Cluster::start_with(&["ssl=on", &cert_setting, &key_setting]);
    let url = cluster.create_database("tls");
    let ca_file = dir.path().join("ca.pem");
    std::fs::write(&ca_file, ca.pem()).unwrap();
    let rogue_file = dir.path().join("rogue.pem");
    std::fs::write(&rogue_file, TestCa::new("Rogue CA").pem()).unwrap();
    let with = |url: &str, mode: &str, root: &Path| {
        format!("{url}?sslmode={mode}&sslrootcert={}", root.display())
    };

    let checked = check_store(&with(&url, "verify-full", &ca_file));
    assert!(checked.status.success(), "{}", said(&checked));

    // The certificate names 127.0.0.1, not localhost: verify-full refuses, verify-ca not.
    let by_name = url.replace("127.0.0.1", "localhost");
    let refused = check_store(&with(&by_name, "verify-full", &ca_file));
    assert!(!refused.status.success());
    let why = said(&refused);
    assert!(
        why.contains("TLS") && why.contains("not valid for"),
        "{why}"
    );
    let chain_only = check_store(&with(&by_name, "verify-ca", &ca_file));
    assert!(chain_only.status.success(), "{}", said(&chain_only));

    // Another CA's certificate: refused, saying so.
    let rogue = check_store(&with(&url, "verify-full", &rogue_file));
    assert!(!rogue.status.success());
    let why = said(&rogue);
    assert!(
        why.contains("UnknownIssuer") || why.contains("unknown issuer"),
        "{why}"
    );

    // A hub on TLS: every one of its connections is encrypted, the listener's included.
    let config = config_with_admin(dir.path(), "tls-admin");
    let tls_url = with(&url, "verify-full", &ca_file);
    let hub = HubProcess::start_with_env(
        &config,
        &dir.path().join("data"),
        &[
            ("KNOOPPUNT_STORE_BACKEND", "postgres"),
            ("KNOOPPUNT_STORE_URL", &tls_url),
        ],
    );
    let client = reqwest::Client::new();
    let created = client
        .post(hub.url("/v1/subscriptions"))
        .bearer_auth("tls-admin")
        .json(
            &serde_json::json!({"protocol": "HTTP", "types": ["nl.test.tls"],
                                  "config": {"delivery": "pull"}}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    let connections = |encrypted: bool| -> u64 {
        cluster
            .psql(
                "postgres",
                &format!(
                    "SELECT count(*) FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) \
                     WHERE a.datname = 'tls' AND s.ssl = {encrypted}"
                ),
            )
            .parse()
            .unwrap()
    };
    assert!(connections(true) >= 2, "the pool and the listener");
    assert_eq!(connections(false), 0);
    assert!(hub.terminate().success());

    // `require` refuses a server that does not offer TLS.
    let plain = Cluster::start();
    let plain_url = plain.create_database("plain");
    let refused = check_store(&with(&plain_url, "require", &ca_file));
    assert!(!refused.status.success());
    let why = said(&refused);
    assert!(why.to_lowercase().contains("tls"), "{why}");
}
