//! Tokens as ZGW components make them (gemma-zds-client, notifications-api-common): HS256
//! over `client_id`, `iat`, `iss` and the user claims, with the client's secret.

/// A JWT signed HS256 with `secret` over `header` and `claims`.
pub use knooppunt_broker::identity::zgw::jwt;

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
