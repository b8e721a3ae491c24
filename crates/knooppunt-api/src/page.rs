//! The pagination of lists (ADR: cursor-based): `pageSize` and `cursor` in the query, read
//! the same way for every list, every problem collected.

use axum::Json;
use axum::response::{IntoResponse, Response};
use http::HeaderValue;
use http::header::LINK;
use knooppunt_event::binding::percent::encode_component;
use serde::Serialize;

use crate::BASE_PATH;
use crate::input::{Body, Field, Problems, whole_number};
use schemars::JsonSchema;

/// Items per page unless the client asks otherwise.
pub(crate) const DEFAULT_PAGE_SIZE: usize = 100;
/// The most items per page.
pub(crate) const MAX_PAGE_SIZE: usize = 1000;

/// A list request's page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Page<C = String> {
    pub(crate) size: usize,
    /// Where the previous page ended; `None` for the first page (no cursor, or an empty one).
    pub(crate) cursor: Option<C>,
}

/// What a list's `cursor` is: the text of its last item's key, or a [`Sequence`].
pub(crate) trait Cursor: serde::de::DeserializeOwned + JsonSchema + 'static {
    /// Whether it names no item: the first page.
    fn is_first(&self) -> bool;
}

impl Cursor for String {
    fn is_first(&self) -> bool {
        self.is_empty()
    }
}

/// The cursor of a list whose items are numbered (dead letters, the audit trail): the
/// sequence number of the previous page's last item, as the digits a query carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, JsonSchema)]
#[schemars(inline)]
pub(crate) struct Sequence(
    #[schemars(with = "String", regex(pattern = r"^[0-9]{0,20}$"))] pub(crate) u64,
);

impl<'de> serde::Deserialize<'de> for Sequence {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse()
            .map(Sequence)
            .map_err(|_| serde::de::Error::custom("not a sequence number"))
    }
}

impl Cursor for Sequence {
    fn is_first(&self) -> bool {
        false
    }
}

/// `pageSize` and `cursor` in a list's query: the one declaration every list reads (alone,
/// or flattened into the list's own query type), its cursor a `C`.
#[derive(Debug, serde::Deserialize, JsonSchema)]
#[serde(bound(deserialize = "C: Cursor"))]
pub(crate) struct PageIn<C = String> {
    /// How many items per page (1 to 1000, default 100).
    #[serde(default, rename = "pageSize")]
    #[schemars(with = "u32", extend("format" = "int32", "minimum" = 1, "maximum" = 1000))]
    page_size: Field<String>,
    /// Where the previous page ended, as given in the `next` link; empty or left out for
    /// the first page.
    #[serde(default)]
    cursor: Field<C>,
}

impl<C> Default for PageIn<C> {
    fn default() -> Self {
        PageIn {
            page_size: Field::Absent,
            cursor: Field::Absent,
        }
    }
}

impl<C: Cursor> PageIn<C> {
    /// The page asked for; a problem recorded for a size out of bounds or a cursor that is
    /// not one of this list.
    pub(crate) fn read(self, problems: &mut Problems) -> Page<C> {
        let size = whole_number(
            &self.page_size,
            "pageSize",
            1..=MAX_PAGE_SIZE,
            DEFAULT_PAGE_SIZE,
            problems,
        );
        let cursor = match self.cursor {
            Field::Given(cursor) => Some(cursor).filter(|c| !c.is_first()),
            Field::Wrong(serde_json::Value::String(text)) if text.is_empty() => None,
            Field::Wrong(_) => {
                problems.add(
                    "cursor",
                    "is not a cursor of this list: use the link of the previous page",
                );
                None
            }
            Field::Absent | Field::Null => None,
        };
        Page { size, cursor }
    }
}

/// A list's query of `pageSize` and `cursor` only.
impl<C: Cursor> Body for PageIn<C> {
    const NAME: &'static str = "query";
    type Representation = ();
    type Read = Page<C>;

    fn read(self, problems: &mut Problems) -> Option<Page<C>> {
        Some(PageIn::read(self, problems))
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
