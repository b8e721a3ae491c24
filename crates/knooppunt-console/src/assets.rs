//! The console's static files, compiled into the binary: the NL Design System's CSS
//! (vendored with its licences by `scripts/console-assets.sh`), and our own small style
//! sheet and script. Nothing is fetched from elsewhere at run time.

use std::sync::OnceLock;

use axum::extract::Path;
use axum::response::{IntoResponse, Response};
use http::header::{CACHE_CONTROL, CONTENT_TYPE};
use http::{HeaderValue, StatusCode};
use sha2::{Digest, Sha256};

/// (name, content type, bytes).
const FILES: [(&str, &str, &[u8]); 4] = [
    (
        "utrecht-components.css",
        "text/css; charset=utf-8",
        include_bytes!("../assets/console/vendor/utrecht-components.css"),
    ),
    (
        "voorbeeld-theme.css",
        "text/css; charset=utf-8",
        include_bytes!("../assets/console/vendor/voorbeeld-theme.css"),
    ),
    (
        "console.css",
        "text/css; charset=utf-8",
        include_bytes!("../assets/console/console.css"),
    ),
    (
        "console.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../assets/console/console.js"),
    ),
];

/// A digest of all the files: a new one in every URL when any changes, so browsers may
/// keep them long.
fn version() -> &'static str {
    static VERSION: OnceLock<String> = OnceLock::new();
    VERSION.get_or_init(|| {
        let mut digest = Sha256::new();
        for (_, _, bytes) in FILES {
            digest.update(bytes);
        }
        hex::encode(&digest.finalize()[..6])
    })
}

/// The URL of a file.
pub(crate) fn url(name: &str) -> String {
    format!("{}/assets/{name}?v={}", crate::BASE, version())
}

/// `GET /console/assets/{name}`.
pub(crate) async fn serve(Path(name): Path<String>) -> Response {
    let Some((_, content_type, bytes)) = FILES.iter().find(|(n, _, _)| *n == name) else {
        return StatusCode::NOT_FOUND.into_response();
    };
    (
        [
            (CONTENT_TYPE, HeaderValue::from_static(content_type)),
            (
                CACHE_CONTROL,
                HeaderValue::from_static("public, max-age=86400"),
            ),
        ],
        *bytes,
    )
        .into_response()
}
