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

/// The operator's theme as the console serves it: its style sheet, with the selectors of
/// its class (`.rijkshuisstijl-theme`, say) made to select the pages' own theme class, so
/// its design tokens apply. Empty without a theme.
pub(crate) fn theme_css(theme: &knooppunt_services::app::ConsoleTheme) -> String {
    let Some(css) = theme.css.as_deref() else {
        return "/* No theme is set: the built-in, neutral one applies. */\n".into();
    };
    let Some(class) = theme.class.as_deref() else {
        return css.to_owned();
    };
    let selector = format!(".{class}");
    let mut out = String::with_capacity(css.len());
    let mut rest = css;
    while let Some(at) = rest.find(&selector) {
        let after = &rest[at + selector.len()..];
        let whole = !after
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        out.push_str(&rest[..at]);
        out.push_str(if whole { ".voorbeeld-theme" } else { &selector });
        rest = after;
    }
    out.push_str(rest);
    out
}

/// The theme's entity tag: a digest of what is served.
pub(crate) fn theme_tag(css: &str) -> String {
    format!("\"{}\"", hex::encode(&Sha256::digest(css.as_bytes())[..8]))
}

/// `GET /console/assets/theme.css`: revalidated on each use (a new theme shows after the
/// hub restarts), answered `304 Not Modified` while the browser has it.
pub(crate) async fn serve_theme(
    axum::extract::State(console): axum::extract::State<std::sync::Arc<crate::Console>>,
    headers: http::HeaderMap,
) -> Response {
    let tag = HeaderValue::try_from(console.theme_tag.as_str()).expect("hex in quotes");
    let unchanged = headers
        .get(http::header::IF_NONE_MATCH)
        .is_some_and(|asked| asked == tag);
    let cache = [
        (CACHE_CONTROL, HeaderValue::from_static("no-cache")),
        (http::header::ETAG, tag),
    ];
    if unchanged {
        return (StatusCode::NOT_MODIFIED, cache).into_response();
    }
    (
        cache,
        [(
            CONTENT_TYPE,
            HeaderValue::from_static("text/css; charset=utf-8"),
        )],
        console.theme_css.clone(),
    )
        .into_response()
}

#[cfg(test)]
mod theme_tests {
    use super::theme_css;
    use knooppunt_services::app::ConsoleTheme;

    #[test]
    fn the_theme_class_selects_the_pages_and_nothing_else_changes() {
        let theme = ConsoleTheme {
            css: Some(".gemeente-theme { --a: 1 } .gemeente-theme-dark { --b: 2 } .gemeente-theme.x, p { }".into()),
            class: Some("gemeente-theme".into()),
        };
        assert_eq!(
            theme_css(&theme),
            ".voorbeeld-theme { --a: 1 } .gemeente-theme-dark { --b: 2 } .voorbeeld-theme.x, p { }"
        );
        assert!(theme_css(&ConsoleTheme::default()).starts_with("/*"));
    }
}
