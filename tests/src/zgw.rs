//! Tokens as ZGW components make them (gemma-zds-client, notifications-api-common): HS256
//! over `client_id`, `iat`, `iss` and the user claims, with the client's secret.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

/// A JWT signed HS256 with `secret` over `header` and `claims`.
pub fn jwt(header: &serde_json::Value, claims: &serde_json::Value, secret: &[u8]) -> String {
    let signing = format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(header.to_string()),
        URL_SAFE_NO_PAD.encode(claims.to_string())
    );
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret);
    let tag = ring::hmac::sign(&key, signing.as_bytes());
    format!("{signing}.{}", URL_SAFE_NO_PAD.encode(tag.as_ref()))
}

/// A token of client `client` made now, as gemma-zds-client makes it.
pub fn token(client: &str, secret: &[u8]) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    jwt(
        &serde_json::json!({"alg": "HS256", "typ": "JWT", "client_identifier": client}),
        &serde_json::json!({"iss": client, "iat": now, "client_id": client,
                            "user_id": "", "user_representation": ""}),
        secret,
    )
}
