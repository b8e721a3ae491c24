//! Government identity: principals managed at runtime over the API (stored, so they work
//! without a restart and survive one), OIN-bound publishing, and OAuth access tokens (JWTs)
//! checked against a real JWKS server with keys generated here.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use knooppunt_broker::{HubOptions, IssuerSettings};
use knooppunt_tests::certificates::TestCa;
use knooppunt_tests::wait::{quiet, until};
use knooppunt_tests::{Answer, TestHub, test_options, tokens};
use reqwest::Method;
use ring::rand::SystemRandom;
use ring::signature::{self, EcdsaKeyPair, KeyPair};
use serde_json::{Value, json};

const OIN: &str = "00000001003214345000";

fn event(id: &str, source: &str) -> String {
    json!({"specversion": "1.0", "id": id, "source": source, "type": "nl.rvo.subsidie.toegekend"})
        .to_string()
}

async fn publish(hub: &TestHub, token: &str, id: &str, source: &str) -> Answer {
    let request = hub
        .request(Method::POST, "/v1/events", token)
        .header("content-type", "application/cloudevents+json")
        .body(event(id, source));
    Answer::from(request.send().await.unwrap()).await
}

#[tokio::test]
async fn principals_are_managed_at_runtime_and_oin_bound() {
    let hub = TestHub::start().await;
    let own = format!("urn:nld:oin:{OIN}:subsidies");

    // Only an admin manages principals.
    hub.call(Method::GET, "/v1/principals", tokens::KVK, None)
        .await
        .assert_problem(403);
    let invalid = hub
        .call(
            Method::POST,
            "/v1/principals",
            tokens::ADMIN,
            Some(json!({"name": "r v o", "roles": ["root"], "oin": "123", "colour": 1})),
        )
        .await
        .assert_problem(400);
    let mut params = invalid.invalid_params();
    params.sort();
    assert_eq!(
        params,
        ["colour", "name", "oin", "roles"],
        "{}",
        invalid.body
    );

    // Created: the token is in this answer only, and works at once.
    let created = hub
        .call(
            Method::POST,
            "/v1/principals",
            tokens::ADMIN,
            Some(json!({"name": "rvo", "roles": ["publisher"], "oin": OIN})),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.body);
    assert_eq!(created.header("location"), Some("/v1/principals/rvo"));
    let token = created.body["token"].as_str().unwrap().to_owned();
    assert!(token.len() >= 64, "a long random token: {token}");
    let read = hub
        .call(Method::GET, "/v1/principals/rvo", tokens::ADMIN, None)
        .await;
    assert_eq!(read.status, 200);
    assert_eq!(read.body["hasToken"], true);
    assert_eq!(read.body["oin"], OIN);
    assert!(
        read.body.get("token").is_none(),
        "shown once: {}",
        read.body
    );
    assert!(!read.body.to_string().contains(&token));
    assert_eq!(publish(&hub, &token, "e-1", &own).await.status, 202);

    // OIN-bound: only its own organisation's sources.
    let outside = publish(&hub, &token, "e-2", "urn:nld:oin:00000001823288444000:brp")
        .await
        .assert_problem(403);
    let detail = outside.body["detail"].as_str().unwrap();
    assert!(detail.contains(&format!("urn:nld:oin:{OIN}:")), "{detail}");

    // A second principal cannot take the same OIN.
    hub.call(
        Method::POST,
        "/v1/principals",
        tokens::ADMIN,
        Some(json!({"name": "rvo-2", "roles": ["publisher"], "oin": OIN})),
    )
    .await
    .assert_problem(409);
    hub.call(
        Method::POST,
        "/v1/principals",
        tokens::ADMIN,
        Some(json!({"name": "rvo", "roles": ["publisher"]})),
    )
    .await
    .assert_problem(409);

    // Disabled: refused at once, with what to do; enabled again: accepted at once.
    let disabled = hub
        .call(
            Method::PATCH,
            "/v1/principals/rvo",
            tokens::ADMIN,
            Some(json!({"disabled": true})),
        )
        .await;
    assert_eq!(disabled.status, 200, "{}", disabled.body);
    assert_eq!(disabled.body["disabled"], true);
    let refused = publish(&hub, &token, "e-3", &own).await.assert_problem(403);
    assert!(
        refused.body["detail"]
            .as_str()
            .unwrap()
            .contains("disabled"),
        "{}",
        refused.body
    );
    hub.call(
        Method::PATCH,
        "/v1/principals/rvo",
        tokens::ADMIN,
        Some(json!({"disabled": false})),
    )
    .await;
    assert_eq!(publish(&hub, &token, "e-4", &own).await.status, 202);

    // A new token: the old one stops working at once.
    let issued = hub
        .call(
            Method::POST,
            "/v1/principals/rvo/token",
            tokens::ADMIN,
            None,
        )
        .await;
    assert_eq!(issued.status, 200, "{}", issued.body);
    let fresh = issued.body["token"].as_str().unwrap().to_owned();
    publish(&hub, &token, "e-5", &own).await.assert_problem(401);
    assert_eq!(publish(&hub, &fresh, "e-6", &own).await.status, 202);

    // An admin cannot lock themselves out.
    hub.call(
        Method::PATCH,
        "/v1/principals/admin",
        tokens::ADMIN,
        Some(json!({"disabled": true})),
    )
    .await
    .assert_problem(409);
    hub.call(Method::DELETE, "/v1/principals/admin", tokens::ADMIN, None)
        .await
        .assert_problem(409);

    // A configuration principal disabled at runtime stays disabled after a restart: changed
    // over the API, it is the store's.
    hub.call(
        Method::PATCH,
        "/v1/principals/publisher",
        tokens::ADMIN,
        Some(json!({"disabled": true})),
    )
    .await;
    // Meanwhile the file gives `kvk` a new token (a rotation by the operator): a principal
    // still as the file made it follows the file.
    let knooppunt_broker::Authentication::Enabled { mut seeds, issuers } =
        test_options().authentication
    else {
        panic!("the test hub authenticates")
    };
    for (hash, principal) in &mut seeds {
        if principal.name == "kvk" || principal.name == "publisher" {
            *hash = knooppunt_broker::hash_token(&format!("{}-rotated", principal.name));
        }
    }
    let rotated = HubOptions {
        authentication: knooppunt_broker::Authentication::Enabled { seeds, issuers },
        ..test_options()
    };
    let hub = hub.restart_with(rotated).await;
    hub.call(Method::GET, "/v1/subscriptions", tokens::KVK, None)
        .await
        .assert_problem(401);
    let kvk = hub
        .call(Method::GET, "/v1/subscriptions", "kvk-rotated", None)
        .await;
    assert_eq!(kvk.status, 200, "{}", kvk.body);
    // `publisher`, changed over the API, is the store's: still disabled, old token.
    publish(&hub, tokens::PUBLISHER, "e-7", "urn:x")
        .await
        .assert_problem(403);
    publish(&hub, "publisher-rotated", "e-7", "urn:x")
        .await
        .assert_problem(401);
    assert_eq!(publish(&hub, &fresh, "e-8", &own).await.status, 202, "kept");
    let list = hub
        .call(Method::GET, "/v1/principals", tokens::ADMIN, None)
        .await;
    let names: Vec<&str> = list
        .body
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"rvo") && names.contains(&"admin"),
        "{names:?}"
    );
    // Paged in name order, following `Link: rel="next"`.
    let mut paged = Vec::new();
    let mut next = Some("/v1/principals?pageSize=2".to_owned());
    while let Some(path) = next {
        let page = hub.call(Method::GET, &path, tokens::ADMIN, None).await;
        assert_eq!(page.status, 200, "{}", page.body);
        let items = page.body.as_array().unwrap();
        assert!(items.len() <= 2);
        paged.extend(items.iter().map(|p| p["name"].as_str().unwrap().to_owned()));
        next = page.header("link").map(|link| {
            link.strip_prefix('<')
                .and_then(|l| l.split_once('>'))
                .unwrap()
                .0
                .to_owned()
        });
    }
    let mut sorted = names.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>();
    sorted.sort();
    assert_eq!(paged, sorted);

    // Deleted: unknown at once.
    let deleted = hub
        .call(Method::DELETE, "/v1/principals/rvo", tokens::ADMIN, None)
        .await;
    assert_eq!(deleted.status, 204);
    publish(&hub, &fresh, "e-9", &own).await.assert_problem(401);
    hub.call(Method::GET, "/v1/principals/rvo", tokens::ADMIN, None)
        .await
        .assert_problem(404);
}

/// A signing key and its public JWK.
struct SigningKey {
    kid: String,
    pair: EcdsaKeyPair,
}

impl SigningKey {
    fn new(kid: &str) -> SigningKey {
        let rng = SystemRandom::new();
        let alg = &signature::ECDSA_P256_SHA256_FIXED_SIGNING;
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(alg, &rng).unwrap();
        let pair = EcdsaKeyPair::from_pkcs8(alg, pkcs8.as_ref(), &rng).unwrap();
        SigningKey {
            kid: kid.into(),
            pair,
        }
    }

    fn jwk(&self) -> Value {
        let point = self.pair.public_key().as_ref();
        json!({"kty": "EC", "crv": "P-256", "use": "sig", "alg": "ES256", "kid": self.kid,
               "x": URL_SAFE_NO_PAD.encode(&point[1..33]), "y": URL_SAFE_NO_PAD.encode(&point[33..65])})
    }

    fn sign(&self, claims: &Value) -> String {
        self.sign_with(&json!({}), claims)
    }

    /// Signs with these members added to the header.
    fn sign_with(&self, extra_header: &Value, claims: &Value) -> String {
        let mut header = json!({"alg": "ES256", "typ": "at+jwt", "kid": self.kid});
        for (name, value) in extra_header.as_object().unwrap() {
            header[name] = value.clone();
        }
        let message = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(header.to_string()),
            URL_SAFE_NO_PAD.encode(claims.to_string())
        );
        let signature = self
            .pair
            .sign(&SystemRandom::new(), message.as_bytes())
            .unwrap();
        format!("{message}.{}", URL_SAFE_NO_PAD.encode(signature.as_ref()))
    }
}

/// A JWKS endpoint on 127.0.0.1 serving `keys`, counting its fetches.
struct Jwks {
    url: String,
    keys: Arc<Mutex<Vec<Value>>>,
    fetches: Arc<AtomicUsize>,
}

impl Jwks {
    async fn start(keys: Vec<Value>) -> Jwks {
        let keys = Arc::new(Mutex::new(keys));
        let fetches = Arc::new(AtomicUsize::new(0));
        let (served, counted) = (Arc::clone(&keys), Arc::clone(&fetches));
        let router = axum::Router::new().route(
            "/jwks.json",
            axum::routing::get(move || {
                let keys = served.lock().unwrap().clone();
                counted.fetch_add(1, Ordering::SeqCst);
                async move { axum::Json(json!({"keys": keys})) }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/jwks.json", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, router).await });
        Jwks { url, keys, fetches }
    }
}

const ISSUER: &str = "https://auth.example.nl/realms/overheid";
const AUDIENCE: &str = "https://knooppunt.example.nl";

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

fn claims(scope: &str) -> Value {
    json!({"iss": ISSUER, "aud": [AUDIENCE, "other"], "sub": "svc-rvo", "client_id": "svc-rvo",
           "scope": scope, "iat": now(), "exp": now() + 300, "oin": OIN})
}

/// An RSA signing key (made by `openssl`, which Debian's ca-certificates brings along: ring
/// signs with RSA keys but does not make them) and its public JWK.
struct RsaKey {
    kid: String,
    pair: ring::rsa::KeyPair,
}

impl RsaKey {
    fn new(kid: &str) -> RsaKey {
        let output = std::process::Command::new("openssl")
            .args([
                "genpkey",
                "-algorithm",
                "RSA",
                "-pkeyopt",
                "rsa_keygen_bits:2048",
                "-outform",
                "DER",
            ])
            .output()
            .expect("openssl makes the test's RSA key (apt install openssl)");
        assert!(output.status.success());
        RsaKey {
            kid: kid.into(),
            // OpenSSL 3 writes PKCS#1; others PKCS#8.
            pair: ring::rsa::KeyPair::from_der(&output.stdout)
                .or_else(|_| ring::rsa::KeyPair::from_pkcs8(&output.stdout))
                .unwrap(),
        }
    }

    fn jwk(&self) -> Value {
        let public: ring::rsa::PublicKeyComponents<Vec<u8>> = self.pair.public().into();
        json!({"kty": "RSA", "use": "sig", "kid": self.kid,
               "n": URL_SAFE_NO_PAD.encode(&public.n), "e": URL_SAFE_NO_PAD.encode(&public.e)})
    }

    /// Signed with RS256 or PS256.
    fn sign(&self, alg: &str, claims: &Value) -> String {
        let header = json!({"alg": alg, "typ": "at+jwt", "kid": self.kid});
        let message = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(header.to_string()),
            URL_SAFE_NO_PAD.encode(claims.to_string())
        );
        let padding: &dyn ring::signature::RsaEncoding = if alg == "PS256" {
            &signature::RSA_PSS_SHA256
        } else {
            &signature::RSA_PKCS1_SHA256
        };
        let mut signature = vec![0; self.pair.public().modulus_len()];
        self.pair
            .sign(
                padding,
                &SystemRandom::new(),
                message.as_bytes(),
                &mut signature,
            )
            .unwrap();
        format!("{message}.{}", URL_SAFE_NO_PAD.encode(signature))
    }
}

#[tokio::test]
async fn access_tokens_of_a_trusted_issuer_are_checked_against_its_jwks() {
    let key = SigningKey::new("key-1");
    let jwks = Jwks::start(vec![key.jwk()]).await;
    let mut issuer = IssuerSettings::new(ISSUER, &jwks.url, AUDIENCE);
    issuer.oin_claim = Some("oin".into());
    issuer.leeway = std::time::Duration::ZERO;
    // A second issuer, with RSA keys and its own claims: `client_id` names the principal
    // and an array claim holds its own role names.
    const SECOND: &str = "https://login.example.nl/oauth2";
    let rsa = RsaKey::new("rsa-1");
    let second_jwks = Jwks::start(vec![rsa.jwk()]).await;
    let mut second = IssuerSettings::new(SECOND, &second_jwks.url, AUDIENCE);
    second.name_claim = "client_id".into();
    second.name_prefix = "login:".into();
    second.roles_claim = "roles".into();
    second.roles = [(
        "Events.Publish".to_owned(),
        knooppunt_broker::Role::Publisher,
    )]
    .into();
    let options = HubOptions {
        authentication: test_options()
            .authentication
            .with_issuers(vec![issuer, second]),
        ..test_options()
    };
    let hub = TestHub::builder().options(options).start().await;
    let own = format!("urn:nld:oin:{OIN}:subsidies");

    // Valid: the scope gives the role, `sub` the name, the `oin` claim the organisation.
    let valid = key.sign(&claims("openid knooppunt:publisher"));
    let accepted = publish(&hub, &valid, "j-1", &own).await;
    assert_eq!(accepted.status, 202, "{}", accepted.body);
    assert_eq!(jwks.fetches.load(Ordering::SeqCst), 1, "fetched once");
    assert_eq!(publish(&hub, &valid, "j-2", &own).await.status, 202);
    assert_eq!(jwks.fetches.load(Ordering::SeqCst), 1, "then cached");
    publish(&hub, &valid, "j-3", "urn:nld:oin:00000001823288444000:brp")
        .await
        .assert_problem(403);
    // A role the scope does not give.
    hub.call(Method::GET, "/v1/subscriptions", &valid, None)
        .await
        .assert_problem(403);

    let refusal = |answer: Answer, needle: &str| {
        let answer = answer.assert_problem(401);
        let detail = answer.body["detail"].as_str().unwrap().to_owned();
        assert!(detail.contains(needle), "`{needle}` not in: {detail}");
        assert!(answer.header("www-authenticate").is_some());
    };
    let mut expired = claims("knooppunt:publisher");
    expired["exp"] = json!(now() - 600);
    refusal(
        publish(&hub, &key.sign(&expired), "j-4", &own).await,
        "expired",
    );
    let mut wrong_audience = claims("knooppunt:publisher");
    wrong_audience["aud"] = json!("https://elders.example.nl");
    refusal(
        publish(&hub, &key.sign(&wrong_audience), "j-5", &own).await,
        "aud",
    );
    let mut wrong_issuer = claims("knooppunt:publisher");
    wrong_issuer["iss"] = json!("https://evil.example.com");
    refusal(
        publish(&hub, &key.sign(&wrong_issuer), "j-6", &own).await,
        "not trusted",
    );
    let mut no_expiry = claims("knooppunt:publisher");
    no_expiry.as_object_mut().unwrap().remove("exp");
    refusal(
        publish(&hub, &key.sign(&no_expiry), "j-7", &own).await,
        "exp",
    );

    // Tampered: the payload changed after signing (more scope).
    let (head_body, signature) = valid.rsplit_once('.').unwrap();
    let (head, _) = head_body.split_once('.').unwrap();
    let forged_claims = URL_SAFE_NO_PAD.encode(claims("knooppunt:admin").to_string());
    let tampered = format!("{head}.{forged_claims}.{signature}");
    refusal(publish(&hub, &tampered, "j-8", &own).await, "signature");
    // Signed by a key the issuer does not have, under a known key id.
    let impostor = SigningKey::new("key-1");
    refusal(
        publish(
            &hub,
            &impostor.sign(&claims("knooppunt:publisher")),
            "j-9",
            &own,
        )
        .await,
        "signature",
    );
    // `alg: none`.
    let unsigned = format!(
        "{}.{}.",
        URL_SAFE_NO_PAD.encode(json!({"alg": "none", "kid": "key-1"}).to_string()),
        URL_SAFE_NO_PAD.encode(claims("knooppunt:admin").to_string())
    );
    refusal(publish(&hub, &unsigned, "j-10", &own).await, "none");

    // An unknown key id makes the hub fetch the JWKS again (the issuer rotated its keys)...
    let fetches = jwks.fetches.load(Ordering::SeqCst);
    let rotated = SigningKey::new("key-2");
    jwks.keys.lock().unwrap().push(rotated.jwk());
    let after_rotation = publish(
        &hub,
        &rotated.sign(&claims("knooppunt:publisher")),
        "j-11",
        &own,
    )
    .await;
    assert_eq!(after_rotation.status, 202, "{}", after_rotation.body);
    assert_eq!(jwks.fetches.load(Ordering::SeqCst), fetches + 1);
    // ... but made-up key ids do not make it fetch again and again.
    let unknown = SigningKey::new("key-made-up");
    for n in 0..5 {
        refusal(
            publish(
                &hub,
                &unknown.sign(&claims("knooppunt:publisher")),
                &format!("u-{n}"),
                &own,
            )
            .await,
            "key-made-up",
        );
    }
    assert!(
        jwks.fetches.load(Ordering::SeqCst) <= fetches + 2,
        "at most one more fetch for unknown key ids"
    );

    // The second issuer's tokens, RS256 and PS256; its role names are its own.
    let second_claims = json!({"iss": SECOND, "aud": AUDIENCE, "client_id": "svc-kvk",
                               "roles": ["Events.Publish"], "exp": now() + 300});
    for alg in ["RS256", "PS256"] {
        let answer = publish(
            &hub,
            &rsa.sign(alg, &second_claims),
            &format!("r-{alg}"),
            "urn:x",
        )
        .await;
        assert_eq!(answer.status, 202, "{alg}: {}", answer.body);
    }
    let mut unmapped = second_claims.clone();
    unmapped["roles"] = json!(["knooppunt:publisher"]);
    publish(&hub, &rsa.sign("RS256", &unmapped), "r-3", "urn:x")
        .await
        .assert_problem(403);
    // A key of one issuer does not sign for the other.
    let mut crossed = claims("knooppunt:publisher");
    crossed["iss"] = json!(SECOND);
    refusal(
        publish(&hub, &key.sign(&crossed), "r-4", &own).await,
        "key id",
    );

    // A verified token is remembered, but only until it expires.
    let mut brief = claims("knooppunt:publisher");
    brief["exp"] = json!(now() + 2);
    let brief = key.sign(&brief);
    assert_eq!(publish(&hub, &brief, "b-1", &own).await.status, 202);
    tokio::time::sleep(std::time::Duration::from_millis(2100)).await;
    refusal(publish(&hub, &brief, "b-2", &own).await, "expired");

    // An oversized token is refused unread.
    let huge = format!("eyJ{}.{}.x", "A".repeat(20_000), "B".repeat(10));
    refusal(publish(&hub, &huge, "h-1", &own).await, "longer than");

    // A stored principal of the same name (with the issuer's prefix) limits the token's
    // principal with its source prefixes...
    let limited = hub
        .call(
            Method::POST,
            "/v1/principals",
            tokens::ADMIN,
            Some(
                json!({"name": "login:svc-kvk", "roles": ["publisher"], "issueToken": false,
                    "publishSourcePrefixes": ["urn:nld:kvk:"]}),
            ),
        )
        .await;
    assert_eq!(limited.status, 201, "{}", limited.body);
    publish(&hub, &rsa.sign("RS256", &second_claims), "r-5", "urn:x")
        .await
        .assert_problem(403);
    assert_eq!(
        publish(
            &hub,
            &rsa.sign("RS256", &second_claims),
            "r-6",
            "urn:nld:kvk:handelsregister"
        )
        .await
        .status,
        202
    );

    // ... and disables it.
    let created = hub.call(Method::POST,
        "/v1/principals",
        tokens::ADMIN,
        Some(json!({"name": "svc-rvo", "roles": ["publisher"], "disabled": true, "issueToken": false})),
    )
    .await;
    assert_eq!(created.status, 201, "{}", created.body);
    assert!(created.body.get("token").is_none());
    publish(&hub, &valid, "j-12", &own)
        .await
        .assert_problem(403);
}

/// A client of the hub over HTTPS, trusting `ca`, with this client certificate if any.
fn tls_client(ca: &TestCa, identity: Option<&(String, String)>) -> reqwest::Client {
    knooppunt_tests::certificates::https_client(ca, identity)
        .build()
        .unwrap()
}

#[tokio::test]
async fn client_certificates_identify_principals_by_their_oin() {
    let government = TestCa::new("Test Staat der Nederlanden Private Services CA");
    let rogue = TestCa::new("Rogue CA");
    let transport = knooppunt_broker::Transport {
        limits: knooppunt_broker::ServerLimits {
            header_timeout: std::time::Duration::from_secs(1),
            ..Default::default()
        },
        tls: Some(knooppunt_tests::certificates::hub_tls(&government)),
    };
    let hub = TestHub::builder()
        .options(test_options())
        .transport(transport)
        .start()
        .await;
    let own = format!("urn:nld:oin:{OIN}:subsidies");

    // A token still works over HTTPS without a certificate.
    let anonymous = tls_client(&government, None);
    let created = Answer::from(
        anonymous
            .post(hub.url("/v1/principals"))
            .bearer_auth(tokens::ADMIN)
            .json(&json!({"name": "rvo", "roles": ["publisher"], "oin": OIN, "issueToken": false}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(created.status, 201, "{}", created.body);

    let send = |client: reqwest::Client, id: &str, source: &str| {
        let request = client
            .post(hub.url("/v1/events"))
            .header("content-type", "application/cloudevents+json")
            .body(event(id, source));
        async move { Answer::from(request.send().await.unwrap()).await }
    };
    let detail = |answer: Answer, status: u16| {
        answer.assert_problem(status).body["detail"]
            .as_str()
            .unwrap()
            .to_owned()
    };

    // The OIN in a trusted certificate names the principal; it publishes its own sources.
    let rvo = tls_client(
        &government,
        Some(&government.issue("RVO", Some(OIN), false)),
    );
    let accepted = send(rvo.clone(), "c-1", &own).await;
    assert_eq!(accepted.status, 202, "{}", accepted.body);
    let outside = detail(
        send(rvo.clone(), "c-2", "urn:nld:oin:00000001823288444000:brp").await,
        403,
    );
    assert!(outside.contains(OIN), "{outside}");

    // The same subject from a CA the hub does not trust.
    let impostor = tls_client(&government, Some(&rogue.issue("RVO", Some(OIN), false)));
    let untrusted = detail(send(impostor, "c-3", &own).await, 401);
    assert!(untrusted.contains("not trusted"), "{untrusted}");
    // Trusted, but without an OIN; trusted, but an OIN no principal has.
    let anonymous_org = tls_client(
        &government,
        Some(&government.issue("Some service", None, false)),
    );
    let without = detail(send(anonymous_org, "c-4", &own).await, 401);
    assert!(without.contains("no OIN"), "{without}");
    let stranger = tls_client(
        &government,
        Some(&government.issue("Stranger", Some("00000009999999999000"), false)),
    );
    let unknown = detail(send(stranger, "c-5", &own).await, 401);
    assert!(unknown.contains("00000009999999999000"), "{unknown}");
    // No certificate and no token.
    let nothing = detail(send(anonymous.clone(), "c-6", &own).await, 401);
    assert!(nothing.contains("Bearer"), "{nothing}");

    // Disabled: refused at once.
    let disabled = anonymous
        .patch(hub.url("/v1/principals/rvo"))
        .bearer_auth(tokens::ADMIN)
        .header("content-type", "application/merge-patch+json")
        .body(json!({"disabled": true}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(disabled.status(), 200);
    let refused = detail(send(rvo, "c-7", &own).await, 403);
    assert!(refused.contains("disabled"), "{refused}");

    // Clients that connect and never finish the TLS handshake hold nothing for long: the
    // hub serves others meanwhile and drops them after the header timeout.
    let mut stalled = Vec::new();
    for _ in 0..5 {
        stalled.push(tokio::net::TcpStream::connect(hub.address).await.unwrap());
    }
    let served = send(
        tls_client(
            &government,
            Some(&government.issue("RVO", Some(OIN), false)),
        ),
        "c-8",
        &own,
    )
    .await;
    assert_eq!(
        served.status, 403,
        "disabled, but answered: {}",
        served.body
    );
    for mut stream in stalled {
        use tokio::io::AsyncReadExt;
        let mut buffer = [0u8; 16];
        let read =
            tokio::time::timeout(std::time::Duration::from_secs(5), stream.read(&mut buffer))
                .await
                .expect("the hub closes a connection that never finished its handshake");
        assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
    }

    // A certificate that expires while its connection is kept alive is refused from then
    // on, on that same connection (requests closer together than the idle limit keep it).
    let short_oin = "00000009000000000001";
    let created = anonymous
        .post(hub.url("/v1/principals"))
        .bearer_auth(tokens::ADMIN)
        .json(&json!({"name": "short", "roles": ["publisher"], "oin": short_oin, "issueToken": false}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    let expires = time::OffsetDateTime::now_utc() + time::Duration::seconds(2);
    let short = tls_client(
        &government,
        Some(&government.issue_until("Short", Some(short_oin), false, Some(expires))),
    );
    let source = format!("urn:nld:oin:{short_oin}:x");
    let mut statuses = Vec::new();
    let started = std::time::Instant::now();
    while started.elapsed() < std::time::Duration::from_millis(3500) {
        let answer = send(short.clone(), &format!("s-{}", statuses.len()), &source).await;
        if answer.status == 401 {
            let detail = answer.body["detail"].as_str().unwrap().to_owned();
            assert!(
                detail.contains("expired during this connection"),
                "{detail}"
            );
        }
        statuses.push(answer.status);
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
    assert_eq!(statuses.first(), Some(&202), "{statuses:?}");
    assert_eq!(statuses.last(), Some(&401), "{statuses:?}");

    // Plain HTTP is not served on an HTTPS port.
    let plain = reqwest::Client::new()
        .get(format!("http://{}/v1/subscriptions", hub.address))
        .send()
        .await;
    assert!(plain.is_err() || !plain.unwrap().status().is_success());
}

/// An OAuth token endpoint (client credentials) on 127.0.0.1: issues `tok-1`, `tok-2`, ...
/// to `knooppunt-hub` with secret `s3cret`, and counts what it issued.
struct TokenEndpoint {
    url: String,
    issued: Arc<AtomicUsize>,
}

impl TokenEndpoint {
    async fn start() -> TokenEndpoint {
        let issued = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&issued);
        let router = axum::Router::new().route(
            "/token",
            axum::routing::post(move |headers: axum::http::HeaderMap, body: String| {
                let counted = Arc::clone(&counted);
                async move {
                    let basic = format!(
                        "Basic {}",
                        base64::engine::general_purpose::STANDARD.encode("knooppunt-hub:s3cret")
                    );
                    let authorized = headers
                        .get("authorization")
                        .is_some_and(|v| v.to_str().unwrap() == basic);
                    if !authorized
                        || !body.contains("grant_type=client_credentials")
                        || !body.contains("scope=events.write")
                    {
                        return (
                            axum::http::StatusCode::UNAUTHORIZED,
                            axum::Json(json!({"error": "invalid_client", "error_description": "unknown client or secret"})),
                        );
                    }
                    let n = counted.fetch_add(1, Ordering::SeqCst) + 1;
                    (
                        axum::http::StatusCode::OK,
                        axum::Json(json!({"access_token": format!("tok-{n}"), "token_type": "Bearer", "expires_in": 3600})),
                    )
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/token", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, router).await });
        TokenEndpoint { url, issued }
    }
}

#[tokio::test]
async fn deliveries_present_a_client_certificate_and_fetched_access_tokens() {
    use knooppunt_tests::sink::{Reply, Sink};
    use std::time::Duration;

    let organisation = TestCa::new("Test PKIoverheid Private Services CA");
    let (certificate, private_key) =
        organisation.issue("knooppunt.test", Some("00000001823288444000"), false);
    let sink = Sink::start_mtls(organisation.pem().as_bytes()).await;
    let tokens = TokenEndpoint::start().await;
    let mut options = test_options();
    options.delivery.extra_root_certificates = knooppunt_tests::sink::test_ca_pem();
    let hub = TestHub::builder().options(options).start().await;
    let config = json!({"initialBackoff": "PT0.05S", "maxBackoff": "PT0.1S"});
    let credential = |secret: &str| {
        json!({"credentialtype": "CLIENTCREDENTIALS", "tokenurl": tokens.url,
               "clientid": "knooppunt-hub", "clientsecret": secret, "scope": "events.write"})
    };
    let subscription = json!({"sink": sink.url, "protocol": "HTTP", "types": ["nl.rvo.subsidie.toegekend"],
        "sinkcredential": credential("s3cret"), "config": config,
        "clientcertificate": {"certificate": certificate, "privatekey": private_key}});

    // Not a certificate: refused, saying which member.
    let mut broken = subscription.clone();
    broken["clientcertificate"]["certificate"] = json!("-----BEGIN CERTIFICATE-----\nnope\n");
    let refused = hub
        .call(Method::POST, "/v1/subscriptions", tokens::KVK, Some(broken))
        .await
        .assert_problem(400);
    assert!(
        refused
            .invalid_params()
            .iter()
            .any(|p| p.starts_with("clientcertificate")),
        "{}",
        refused.body
    );

    // A token endpoint in a network the hub does not deliver to (SSRF) is refused.
    let mut metadata = subscription.clone();
    metadata["sinkcredential"]["tokenurl"] = json!("https://169.254.169.254/latest/token");
    let refused = hub
        .call(
            Method::POST,
            "/v1/subscriptions",
            tokens::KVK,
            Some(metadata),
        )
        .await
        .assert_problem(400);
    assert_eq!(refused.invalid_params(), ["sinkcredential.tokenurl"]);

    // The handshake and the deliveries present the certificate (the sink requires one).
    let created = hub
        .call(
            Method::POST,
            "/v1/subscriptions",
            tokens::KVK,
            Some(subscription.clone()),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.body);
    assert_eq!(created.body["state"], "active", "{}", created.body);
    assert_eq!(created.body["clientcertificate"]["privatekey"], "********");
    assert!(created.body.get("sinkcredential").is_none(), "write-only");
    assert!(!created.body.to_string().contains("s3cret"));
    let id = created.body["id"].as_str().unwrap().to_owned();

    let own = format!("urn:nld:oin:{OIN}:subsidies");
    for n in 0..3 {
        assert_eq!(
            publish(&hub, tokens::PUBLISHER, &format!("o-{n}"), &own)
                .await
                .status,
            202
        );
    }
    let delivered = sink.wait_for(3, Duration::from_secs(10)).await;
    for delivery in &delivered {
        assert_eq!(delivery.header("authorization"), Some("Bearer tok-1"));
    }
    assert_eq!(
        tokens.issued.load(Ordering::SeqCst),
        1,
        "one token for all deliveries"
    );

    // The sink refuses the token: the next attempt fetches a new one.
    sink.answer([Reply::status(401)]);
    assert_eq!(
        publish(&hub, tokens::PUBLISHER, "o-3", &own).await.status,
        202
    );
    let delivered = sink.wait_for(5, Duration::from_secs(10)).await;
    assert_eq!(delivered[3].header("authorization"), Some("Bearer tok-1"));
    assert_eq!(delivered[4].header("authorization"), Some("Bearer tok-2"));
    assert_eq!(delivered[4].json()["id"], "o-3");

    // A replacement that sends the key back as `********` keeps the stored key.
    let mut replacement = subscription.clone();
    replacement["clientcertificate"]["privatekey"] = json!("********");
    let replaced = hub
        .call(
            Method::PUT,
            &format!("/v1/subscriptions/{id}"),
            tokens::KVK,
            Some(replacement),
        )
        .await;
    assert_eq!(replaced.status, 200, "{}", replaced.body);
    assert_eq!(
        publish(&hub, tokens::PUBLISHER, "o-4", &own).await.status,
        202
    );
    let delivered = sink.wait_for(6, Duration::from_secs(10)).await;
    assert_eq!(delivered[5].json()["id"], "o-4");

    // Without a certificate the sink cannot be reached: the handshake fails.
    let mut without = subscription.clone();
    without.as_object_mut().unwrap().remove("clientcertificate");
    let pending = hub
        .call(
            Method::POST,
            "/v1/subscriptions",
            tokens::KVK,
            Some(without),
        )
        .await;
    assert_eq!(pending.status, 201, "{}", pending.body);
    assert_eq!(pending.body["state"], "pending", "{}", pending.body);

    // A wrong secret: the attempt fails saying what the token endpoint answered.
    let plain = Sink::start().await;
    let wrong = json!({"sink": plain.url, "protocol": "HTTP", "types": ["nl.rvo.subsidie.toegekend"],
        "sinkcredential": credential("wrong"), "config": {"maxAttempts": "1"}});
    let created = hub
        .call(Method::POST, "/v1/subscriptions", tokens::KVK, Some(wrong))
        .await;
    assert_eq!(created.status, 201, "{}", created.body);
    let wrong_id = created.body["id"].as_str().unwrap().to_owned();
    assert_eq!(
        publish(&hub, tokens::PUBLISHER, "o-5", &own).await.status,
        202
    );
    until("an attempt", Duration::from_secs(10), || async {
        let read = hub
            .call(
                Method::GET,
                &format!("/v1/subscriptions/{wrong_id}"),
                tokens::KVK,
                None,
            )
            .await;
        match read.body["lastDelivery"]["error"].as_str() {
            Some(error) => {
                assert!(error.contains("invalid_client"), "{error}");
                Ok(())
            }
            None => Err(read.body),
        }
    })
    .await;
    assert!(
        plain.deliveries().is_empty(),
        "nothing was sent without a token"
    );
}

/// A hub trusting one ES256 issuer whose `oin` claim names the organisation.
async fn hub_with_issuer(key: &SigningKey) -> (TestHub, Jwks) {
    let jwks = Jwks::start(vec![key.jwk()]).await;
    let mut issuer = IssuerSettings::new(ISSUER, &jwks.url, AUDIENCE);
    issuer.oin_claim = Some("oin".into());
    let options = HubOptions {
        authentication: test_options().authentication.with_issuers(vec![issuer]),
        ..test_options()
    };
    (TestHub::builder().options(options).start().await, jwks)
}

#[tokio::test]
async fn a_tokens_oin_claim_must_be_an_oin_and_the_stored_principals() {
    let key = SigningKey::new("key-1");
    let (hub, _jwks) = hub_with_issuer(&key).await;
    let other = "00000001823288444000";
    let created = hub
        .call(
            Method::POST,
            "/v1/principals",
            tokens::ADMIN,
            Some(
                json!({"name": "svc-rvo", "roles": ["publisher"], "oin": OIN, "issueToken": false}),
            ),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.body);
    let token = |oin: Option<&str>, sub: &str| {
        let mut claims = claims("openid knooppunt:publisher");
        claims["sub"] = json!(sub);
        match oin {
            Some(oin) => claims["oin"] = json!(oin),
            None => {
                claims.as_object_mut().unwrap().remove("oin");
            }
        }
        key.sign(&claims)
    };
    // The probe: a stored principal of OIN …5000 whose token says another OIN published in
    // that other organisation's sources.
    let mismatch = publish(
        &hub,
        &token(Some(other), "svc-rvo"),
        "o-1",
        &format!("urn:nld:oin:{other}:x"),
    )
    .await
    .assert_problem(403);
    let detail = mismatch.body["detail"].as_str().unwrap();
    assert!(detail.contains(other) && detail.contains(OIN), "{detail}");
    // Not an OIN at all: refused, whoever the principal is.
    for bad in [format!("{other}:evil"), String::new(), "123".into()] {
        let refused = publish(
            &hub,
            &token(Some(&bad), "svc-new"),
            "o-2",
            &format!("urn:nld:oin:{other}:x"),
        )
        .await
        .assert_problem(401);
        let detail = refused.body["detail"].as_str().unwrap();
        assert!(detail.contains("20 digits"), "{bad:?}: {detail}");
    }
    // Without the claim the stored OIN applies; with the right one, the same.
    let own = format!("urn:nld:oin:{OIN}:subsidies");
    assert_eq!(
        publish(&hub, &token(None, "svc-rvo"), "o-3", &own)
            .await
            .status,
        202
    );
    publish(
        &hub,
        &token(None, "svc-rvo"),
        "o-4",
        &format!("urn:nld:oin:{other}:x"),
    )
    .await
    .assert_problem(403);
    assert_eq!(
        publish(&hub, &token(Some(OIN), "svc-rvo"), "o-5", &own)
            .await
            .status,
        202
    );
}

#[tokio::test]
async fn token_headers_and_dates_the_hub_cannot_honour_are_refused() {
    let key = SigningKey::new("key-1");
    let (hub, _jwks) = hub_with_issuer(&key).await;
    let own = format!("urn:nld:oin:{OIN}:subsidies");
    let valid = claims("openid knooppunt:publisher");
    for (header, why) in [
        (json!({"crit": ["exp"]}), "crit"),
        (
            json!({"crit": ["urn:example:unknown"], "urn:example:unknown": true}),
            "crit",
        ),
        (json!({"enc": "A256GCM"}), "enc"),
        (json!({"zip": "DEF"}), "zip"),
    ] {
        let refused = publish(&hub, &key.sign_with(&header, &valid), "h-1", &own)
            .await
            .assert_problem(401);
        let detail = refused.body["detail"].as_str().unwrap();
        assert!(detail.contains(why), "{header}: {detail}");
    }
    let with_nbf = |nbf: Value| {
        let mut claims = valid.clone();
        claims["nbf"] = nbf;
        key.sign(&claims)
    };
    let later = (now() + 3600) as f64 + 0.5;
    for nbf in [json!(later), json!(later.to_string()), json!("yesterday")] {
        publish(&hub, &with_nbf(nbf.clone()), "h-2", &own)
            .await
            .assert_problem(401);
    }
    let earlier = (now() - 60) as f64 + 0.25;
    assert_eq!(
        publish(&hub, &with_nbf(json!(earlier)), "h-3", &own)
            .await
            .status,
        202
    );
}

#[tokio::test]
async fn a_certificate_with_two_serial_numbers_names_no_organisation() {
    let government = TestCa::new("Test Staat der Nederlanden Private Services CA");
    let transport = knooppunt_broker::Transport {
        tls: Some(knooppunt_tests::certificates::hub_tls(&government)),
        ..Default::default()
    };
    let hub = TestHub::builder()
        .options(test_options())
        .transport(transport)
        .start()
        .await;
    let other = "00000009111111111000";
    let anonymous = tls_client(&government, None);
    for (name, oin) in [("rvo", OIN), ("other-org", other)] {
        let created = anonymous
            .post(hub.url("/v1/principals"))
            .bearer_auth(tokens::ADMIN)
            .json(&json!({"name": name, "roles": ["publisher"], "oin": oin, "issueToken": false}))
            .send()
            .await
            .unwrap();
        assert_eq!(created.status(), 201, "{}", created.text().await.unwrap());
    }
    // The probe's certificate authenticated as the last serialNumber.
    let two = tls_client(
        &government,
        Some(&government.issue_with_two_serial_numbers("Twee", OIN, other)),
    );
    let answer = Answer::from(
        two.post(hub.url("/v1/events"))
            .header("content-type", "application/cloudevents+json")
            .body(event("t-1", &format!("urn:nld:oin:{other}:x")))
            .send()
            .await
            .unwrap(),
    )
    .await
    .assert_problem(401);
    let detail = answer.body["detail"].as_str().unwrap();
    assert!(detail.contains("2 serialNumbers"), "{detail}");
}

/// A client certificate revoked in the CA's revocation list (`server.tls_client_crl`)
/// identifies no one on a connection made after the list's file changed; the hub read the
/// list again by itself, and the refusal says the certificate was revoked.
#[tokio::test]
async fn a_revoked_client_certificate_identifies_no_one_once_the_list_changes() {
    let government = TestCa::new("Test Staat der Nederlanden Private Services CA");
    let lists = tempfile::tempdir().unwrap();
    let crl = lists.path().join("government.crl");
    std::fs::write(&crl, government.revocation_list(&[], 1)).unwrap();
    let transport = knooppunt_broker::Transport {
        tls: Some(
            knooppunt_tests::certificates::hub_tls(&government)
                .with_revocation_lists(vec![crl.clone()])
                .unwrap(),
        ),
        ..Default::default()
    };
    let hub = TestHub::builder()
        .options(test_options())
        .transport(transport)
        .start()
        .await;
    let created = tls_client(&government, None)
        .post(hub.url("/v1/principals"))
        .bearer_auth(tokens::ADMIN)
        .json(&json!({"name": "rvo", "roles": ["subscriber"], "oin": OIN, "issueToken": false}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201, "{}", created.text().await.unwrap());
    let certificate = government.issue_numbered("RVO", OIN, 4242);
    let other = government.issue_numbered("RVO 2", OIN, 4343);
    // Each client below is a new connection.
    let list = |identity: &(String, String)| {
        let client = tls_client(&government, Some(identity));
        let url = hub.url("/v1/subscriptions");
        async move { client.get(url).send().await.unwrap().status() }
    };
    assert_eq!(list(&certificate).await, 200);

    std::fs::write(&crl, government.revocation_list(&[4242], 2)).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let client = tls_client(&government, Some(&certificate));
        let answer = Answer::from(
            client
                .get(hub.url("/v1/subscriptions"))
                .send()
                .await
                .unwrap(),
        )
        .await;
        if answer.status == 401 {
            let detail = answer.body["detail"].as_str().unwrap().to_lowercase();
            assert!(detail.contains("revoked"), "{detail}");
            break;
        }
        assert_eq!(answer.status, 200);
        assert!(
            std::time::Instant::now() < deadline,
            "the revocation list was not read again"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    // Another certificate of the same organisation still identifies it.
    assert_eq!(list(&other).await, 200);
    // A list that no longer reads keeps the previous one in force.
    std::fs::write(&crl, "not a list").unwrap();
    quiet(
        "the unreadable list replacing the one in force",
        std::time::Duration::from_millis(2500),
    )
    .await;
    assert_eq!(list(&certificate).await, 401);
    assert_eq!(list(&other).await, 200);
}

#[tokio::test]
async fn two_admins_demoting_each_other_at_once_leave_one_admin() {
    let hub = TestHub::start().await;
    // Rounds of two fresh admins, each demoting the other at the same moment: the role is
    // checked again under the principals' lock, so exactly one change is made each time.
    for round in 0..10 {
        let mut tokens_of = Vec::new();
        for name in [format!("a{round}"), format!("b{round}")] {
            let created = hub
                .call(
                    Method::POST,
                    "/v1/principals",
                    tokens::ADMIN,
                    Some(json!({"name": name, "roles": ["admin"]})),
                )
                .await;
            assert_eq!(created.status, 201, "{}", created.body);
            tokens_of.push((name, created.body["token"].as_str().unwrap().to_owned()));
        }
        let demote = |token: &str, other: &str| {
            let request = hub
                .request(Method::PATCH, &format!("/v1/principals/{other}"), token)
                .header("content-type", "application/merge-patch+json")
                .body(json!({"roles": ["publisher"]}).to_string());
            async move { Answer::from(request.send().await.unwrap()).await }
        };
        let (first, second) = tokio::join!(
            demote(&tokens_of[0].1, &tokens_of[1].0),
            demote(&tokens_of[1].1, &tokens_of[0].0)
        );
        let mut statuses = [first.status, second.status];
        statuses.sort_unstable();
        assert_eq!(
            statuses,
            [200, 403],
            "round {round}: {} / {}",
            first.body,
            second.body
        );
    }
}

/// An organisation's source space (`urn:nld:oin:<OIN>:`, NL GOV profile) is reserved: a
/// principal without that OIN publishes there only when its prefixes name that OIN (a
/// supplier on the organisation's behalf); case and trailing characters do not get around
/// it; an operator can lift the rule.
#[tokio::test]
async fn oin_shaped_sources_are_reserved_for_their_organisation() {
    // The default of the hub (the harness lifts it for its test publisher).
    let mut options = test_options();
    options.ingest.reserve_oin_sources =
        knooppunt_broker::IngestOptions::default().reserve_oin_sources;
    assert!(options.ingest.reserve_oin_sources, "reserved by default");
    let hub = TestHub::builder().options(options).start().await;
    let theirs = format!("urn:nld:oin:{OIN}:subsidies");

    // The plain publisher (no OIN, no prefixes) is refused there, saying why and how.
    let refused = publish(&hub, tokens::PUBLISHER, "r-1", &theirs)
        .await
        .assert_problem(403);
    let detail = refused.body["detail"].as_str().unwrap();
    assert!(detail.contains(&format!("OIN {OIN}")), "{detail}");
    assert!(detail.contains("reserve_oin_sources"), "{detail}");
    for disguised in [
        format!("URN:NLD:OIN:{OIN}:subsidies"),
        format!("urn:nld:oin:{OIN}x"),
        format!("urn:NLD:oin:{OIN}"),
    ] {
        publish(&hub, tokens::PUBLISHER, "r-2", &disguised)
            .await
            .assert_problem(403);
    }
    // Outside any organisation's source space it publishes as before.
    for free in ["urn:nld:oin:123:x", "https://example.nl/x", "urn:nld:kvk:x"] {
        assert_eq!(
            publish(&hub, tokens::PUBLISHER, "f-1", free).await.status,
            202,
            "{free}"
        );
    }

    // A supplier whose prefixes name the organisation publishes on its behalf; a prefix
    // that does not name an OIN names nobody's space.
    let created = hub
        .call(
            Method::POST,
            "/v1/principals",
            tokens::ADMIN,
            Some(json!({"name": "leverancier", "roles": ["publisher"],
                        "publishSourcePrefixes": [format!("urn:nld:oin:{OIN}:"), "urn:nld:oin:"]})),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.body);
    let supplier = created.body["token"].as_str().unwrap().to_owned();
    assert_eq!(publish(&hub, &supplier, "s-1", &theirs).await.status, 202);
    publish(
        &hub,
        &supplier,
        "s-2",
        "urn:nld:oin:00000001823288444000:brp",
    )
    .await
    .assert_problem(403);
    // The organisation itself, and an admin, may.
    let created = hub
        .call(
            Method::POST,
            "/v1/principals",
            tokens::ADMIN,
            Some(json!({"name": "rvo", "roles": ["publisher"], "oin": OIN})),
        )
        .await;
    let own = created.body["token"].as_str().unwrap().to_owned();
    assert_eq!(publish(&hub, &own, "o-1", &theirs).await.status, 202);
    assert_eq!(
        publish(&hub, tokens::ADMIN, "a-1", &theirs).await.status,
        202
    );

    // The operator's switch lifts the rule.
    let mut options = test_options();
    options.ingest.reserve_oin_sources = false;
    let open = TestHub::builder().options(options).start().await;
    assert_eq!(
        publish(&open, tokens::PUBLISHER, "r-1", &theirs)
            .await
            .status,
        202
    );
}

/// Offboarding: disabling a principal suspends its subscriptions at once (nothing routed
/// to them or sent, pull receive and the stream refused, shown as `suspended`), enabling it
/// resumes them; deleting it deletes its subscriptions with what was queued for them, each
/// on the audit trail.
#[tokio::test]
async fn a_disabled_or_deleted_principal_receives_nothing_more() {
    use knooppunt_tests::sink::Sink;
    const TYPE: &str = "nl.test.offboarding";
    let hub = TestHub::start().await;
    let created = hub
        .call(
            Method::POST,
            "/v1/principals",
            tokens::ADMIN,
            Some(json!({"name": "leaving", "roles": ["subscriber"]})),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.body);
    let token = created.body["token"].as_str().unwrap().to_owned();
    let sink = Sink::start().await;
    let push = hub.subscribe(&token, &sink.url, TYPE, json!({})).await;
    let pull = hub
        .call(
            Method::POST,
            "/v1/subscriptions",
            &token,
            Some(json!({"protocol": "HTTP", "types": [TYPE],
                        "config": {"delivery": "pull", "ordering": "unordered"}})),
        )
        .await;
    assert_eq!(pull.status, 201, "{}", pull.body);
    let pull = pull.body["id"].as_str().unwrap().to_owned();
    let mut n = 0;
    let mut publish = async || {
        n += 1;
        let event = json!({"specversion": "1.0", "id": format!("o-{n}"), "source": "urn:test",
                           "type": TYPE});
        hub.publish_as(tokens::PUBLISHER, &event).await.body["matchedSubscriptions"]
            .as_u64()
            .unwrap()
    };
    assert_eq!(publish().await, 2);
    sink.wait_for(1, std::time::Duration::from_secs(10)).await;

    let patch = |disabled: bool| {
        hub.call(
            Method::PATCH,
            "/v1/principals/leaving",
            tokens::ADMIN,
            Some(json!({"disabled": disabled})),
        )
    };
    assert_eq!(patch(true).await.status, 200);
    assert_eq!(
        publish().await,
        0,
        "nothing is routed to a disabled principal"
    );
    for id in [&push, &pull] {
        let shown = hub
            .call(
                Method::GET,
                &format!("/v1/subscriptions/{id}"),
                tokens::ADMIN,
                None,
            )
            .await;
        assert_eq!(shown.body["state"], "suspended", "{}", shown.body);
        assert!(
            shown.body["suspendedReason"]
                .as_str()
                .unwrap()
                .contains("`leaving`"),
            "{}",
            shown.body
        );
    }
    hub.call(
        Method::POST,
        &format!("/v1/subscriptions/{pull}/receive?maxWait=PT0S"),
        tokens::ADMIN,
        None,
    )
    .await
    .assert_problem(409);
    hub.call(
        Method::GET,
        &format!("/v1/subscriptions/{push}/events"),
        tokens::ADMIN,
        None,
    )
    .await
    .assert_problem(409);
    quiet(
        "a delivery after the refused change",
        std::time::Duration::from_millis(500),
    )
    .await;
    assert_eq!(sink.deliveries().len(), 1, "nothing more was sent");

    assert_eq!(patch(false).await.status, 200);
    assert_eq!(publish().await, 2, "enabled again, it receives again");
    sink.wait_for(2, std::time::Duration::from_secs(10)).await;
    let mut pulled = Vec::new();
    for _ in 0..5 {
        let received = hub
            .call(
                Method::POST,
                &format!("/v1/subscriptions/{pull}/receive?maxWait=PT1S&maxEvents=10"),
                tokens::ADMIN,
                None,
            )
            .await;
        assert_eq!(received.status, 200, "{}", received.body);
        pulled.extend(
            received
                .body
                .as_array()
                .unwrap()
                .iter()
                .map(|e| e["id"].clone()),
        );
        if pulled.len() >= 2 {
            break;
        }
    }
    assert_eq!(
        pulled,
        [json!("o-1"), json!("o-3")],
        "received again once enabled"
    );

    let deleted = hub
        .call(
            Method::DELETE,
            "/v1/principals/leaving",
            tokens::ADMIN,
            None,
        )
        .await;
    assert_eq!(deleted.status, 204, "{}", deleted.body);
    for id in [&push, &pull] {
        hub.call(
            Method::GET,
            &format!("/v1/subscriptions/{id}"),
            tokens::ADMIN,
            None,
        )
        .await
        .assert_problem(404);
    }
    assert_eq!(publish().await, 0);
    let trail = hub
        .call(Method::GET, "/v1/audit?pageSize=1000", tokens::ADMIN, None)
        .await;
    let objects: Vec<&str> = trail
        .body
        .as_array()
        .unwrap_or_else(|| panic!("{}", trail.body))
        .iter()
        .filter(|e| e["name"] == "subscription.delete")
        .map(|e| e["object"].as_str().unwrap())
        .collect();
    for id in [&push, &pull] {
        assert!(
            objects.contains(&format!("subscription/{id}").as_str()),
            "{objects:?}"
        );
    }
    quiet("a third delivery", std::time::Duration::from_millis(300)).await;
    assert_eq!(sink.deliveries().len(), 2);
}
