//! The `identity` workload: what authenticating a publisher costs. Ingest against one hub
//! with a token the hub issued (a SHA-256 and a lookup), an ES256 access token and an RS256
//! access token of trusted issuers (a JWKS served here), in the same run.

use std::sync::Arc;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use knooppunt_broker::{IssuerSettings, Role};
use ring::rand::SystemRandom;
use ring::signature::{self, EcdsaKeyPair, KeyPair};
use serde_json::{Value, json};

use crate::{Shape, TOKEN, hub_options, hub_with_options, measure, print};

const AUDIENCE: &str = "knooppunt-bench";

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn jwt(header: &Value, claims: &Value, sign: impl FnOnce(&[u8]) -> Vec<u8>) -> String {
    let message = format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(header.to_string()),
        URL_SAFE_NO_PAD.encode(claims.to_string())
    );
    let signature = sign(message.as_bytes());
    format!("{message}.{}", URL_SAFE_NO_PAD.encode(signature))
}

/// An ES256 key's JWK and a token it signed for `issuer`.
fn es256(issuer: &str) -> anyhow::Result<(Value, String)> {
    let rng = SystemRandom::new();
    let alg = &signature::ECDSA_P256_SHA256_FIXED_SIGNING;
    let pkcs8 = EcdsaKeyPair::generate_pkcs8(alg, &rng).map_err(|_| anyhow::anyhow!("keygen"))?;
    let pair =
        EcdsaKeyPair::from_pkcs8(alg, pkcs8.as_ref(), &rng).map_err(|_| anyhow::anyhow!("key"))?;
    let point = pair.public_key().as_ref();
    let jwk = json!({"kty": "EC", "crv": "P-256", "kid": "es", "x": URL_SAFE_NO_PAD.encode(&point[1..33]),
                     "y": URL_SAFE_NO_PAD.encode(&point[33..65])});
    let claims = json!({"iss": issuer, "aud": AUDIENCE, "sub": "bench-es", "scope": "knooppunt:publisher",
                        "oin": crate::BENCH_OIN, "exp": now() + 3600});
    let token = jwt(&json!({"alg": "ES256", "kid": "es"}), &claims, |message| {
        pair.sign(&rng, message)
            .map(|s| s.as_ref().to_vec())
            .unwrap_or_default()
    });
    Ok((jwk, token))
}

/// An RS256 key's JWK and a token it signed for `issuer` (the key made by `openssl`).
fn rs256(issuer: &str) -> anyhow::Result<(Value, String)> {
    let der = std::process::Command::new("openssl")
        .args([
            "genpkey",
            "-algorithm",
            "RSA",
            "-pkeyopt",
            "rsa_keygen_bits:2048",
            "-outform",
            "DER",
        ])
        .output()?
        .stdout;
    let pair = ring::rsa::KeyPair::from_der(&der)
        .or_else(|_| ring::rsa::KeyPair::from_pkcs8(&der))
        .map_err(|error| anyhow::anyhow!("the RSA key: {error}"))?;
    let public: ring::rsa::PublicKeyComponents<Vec<u8>> = pair.public().into();
    let jwk = json!({"kty": "RSA", "kid": "rs", "n": URL_SAFE_NO_PAD.encode(&public.n),
                     "e": URL_SAFE_NO_PAD.encode(&public.e)});
    let claims = json!({"iss": issuer, "aud": AUDIENCE, "sub": "bench-rs", "scope": "knooppunt:publisher",
                        "oin": crate::BENCH_OIN, "exp": now() + 3600});
    let token = jwt(&json!({"alg": "RS256", "kid": "rs"}), &claims, |message| {
        let mut signature = vec![0; pair.public().modulus_len()];
        let _ = pair.sign(
            &signature::RSA_PKCS1_SHA256,
            &SystemRandom::new(),
            message,
            &mut signature,
        );
        signature
    });
    Ok((jwk, token))
}

pub(crate) async fn run(shape: Shape, warmup: u64, subscriptions: usize) -> anyhow::Result<()> {
    // The issuers' keys, served as one JWKS each.
    let (es_jwk, es_token) = es256("https://es.bench")?;
    let (rs_jwk, rs_token) = rs256("https://rs.bench")?;
    let keys = Arc::new([es_jwk, rs_jwk]);
    let router = axum::Router::new()
        .route(
            "/es",
            axum::routing::get({
                let keys = Arc::clone(&keys);
                move || async move { axum::Json(json!({"keys": [keys[0].clone()]})) }
            }),
        )
        .route(
            "/rs",
            axum::routing::get({
                let keys = Arc::clone(&keys);
                move || async move { axum::Json(json!({"keys": [keys[1].clone()]})) }
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let jwks = format!("http://{}", listener.local_addr()?);
    tokio::spawn(async move { axum::serve(listener, router).await });

    let mut options = hub_options();
    let issuer = |iss: &str, path: &str| {
        let mut settings = IssuerSettings::new(iss, &format!("{jwks}{path}"), AUDIENCE);
        settings.roles = [("knooppunt:publisher".to_owned(), Role::Publisher)].into();
        // The organisation whose source space the bench's events are in.
        settings.oin_claim = Some("oin".into());
        settings
    };
    options.authentication = options.authentication.with_issuers(vec![
        issuer("https://es.bench", "/es"),
        issuer("https://rs.bench", "/rs"),
    ]);
    let data = tempfile::tempdir()?;
    let base = hub_with_options(
        data.path(),
        crate::ingest_subscriptions(subscriptions),
        options,
    )
    .await?;
    let url = format!("{base}/v1/events");

    println!(
        "identity: {} connections, {}-byte events, {} s after {warmup} s of warm-up, one hub \
         on the embedded store",
        shape.connections, shape.event_bytes, shape.seconds
    );
    println!(
        "{:<28} {:>12} {:>12} {:>12} {:>8} {:>6} {:>11}",
        "", "rate", "p50", "p99", "acked", "failed", "CPU/event"
    );
    for (name, token) in [
        ("token the hub issued", TOKEN),
        ("ES256 access token", es_token.as_str()),
        ("RS256 access token", rs_token.as_str()),
    ] {
        let summary = measure(shape, warmup, &url, Some(token), 202).await?;
        print(name, &summary);
    }
    Ok(())
}
