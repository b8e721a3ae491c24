//! The pagination of lists (ADR: cursor-based): `pageSize` and `cursor` in the query, read
//! the same way for every list, every problem collected.

use std::collections::HashMap;

use axum::Json;
use axum::response::{IntoResponse, Response};
use http::HeaderValue;
use http::header::LINK;
use knooppunt_event::binding::percent::encode_component;
use serde::Serialize;

use crate::BASE_PATH;
use crate::problem::InvalidParam;

/// Items per page unless the client asks otherwise.
pub(crate) const DEFAULT_PAGE_SIZE: usize = 100;
/// The most items per page.
pub(crate) const MAX_PAGE_SIZE: usize = 1000;

/// A list request's page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Page {
    pub(crate) size: usize,
    /// Where the previous page ended; `None` for the first page (no cursor, or an empty one).
    pub(crate) cursor: Option<String>,
}

impl Page {
    /// Reads `pageSize` and `cursor`; any other parameter is a problem.
    pub(crate) fn read(query: &HashMap<String, String>, problems: &mut Vec<InvalidParam>) -> Page {
        for key in query.keys() {
            if key != "pageSize" && key != "cursor" {
                problems.push(InvalidParam::new(
                    key.as_str(),
                    "unknown query parameter; use `pageSize` and `cursor`",
                ));
            }
        }
        let size = match query.get("pageSize").map(|v| v.parse::<usize>()) {
            None => DEFAULT_PAGE_SIZE,
            Some(Ok(n)) if (1..=MAX_PAGE_SIZE).contains(&n) => n,
            Some(_) => {
                problems.push(InvalidParam::new(
                    "pageSize",
                    format!("must be a whole number from 1 to {MAX_PAGE_SIZE}"),
                ));
                DEFAULT_PAGE_SIZE
            }
        };
        let cursor = query.get("cursor").filter(|c| !c.is_empty()).cloned();
        Page { size, cursor }
    }
}

/// A page of a list as the answer (one shape for every list of the API): its items, and
/// when more follow, `Link: <…?pageSize=N&cursor=C>; rel="next"` for `path` (below the
/// base path, with the list's filters as its query if it has any), `next` being the last
/// item's cursor.
#[derive(Debug)]
pub(crate) struct ListResponse<'a, T> {
    pub(crate) items: Vec<T>,
    pub(crate) path: &'a str,
    pub(crate) size: usize,
    pub(crate) next: Option<&'a str>,
}

impl<T: Serialize> IntoResponse for ListResponse<'_, T> {
    fn into_response(self) -> Response {
        let mut response = Json(self.items).into_response();
        if let Some(cursor) = self.next {
            let path = self.path;
            let link = format!(
                "<{BASE_PATH}{path}{}pageSize={}&cursor={}>; rel=\"next\"",
                if path.contains('?') { '&' } else { '?' },
                self.size,
                encode_component(cursor)
            );
            response.headers_mut().insert(
                LINK,
                HeaderValue::try_from(link).expect("a percent-encoded link is header-safe"),
            );
        }
        response
    }
}

/// [`ListResponse`] of `items` as a response.
pub(crate) fn answer<T: Serialize>(
    items: Vec<T>,
    path: &str,
    size: usize,
    next: Option<&str>,
) -> Response {
    ListResponse {
        items,
        path,
        size,
        next,
    }
    .into_response()
}
