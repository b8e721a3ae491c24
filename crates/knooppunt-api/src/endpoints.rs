//! The API's endpoints, each written once: its path, its method, its handler and its
//! description. The router and the OpenAPI document are both made from this one table, so
//! a route cannot go undocumented, nor a documented path unrouted, and a path's `Allow`
//! list is what it routes.

use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use axum::Router;
use axum::handler::Handler;
use axum::routing::MethodRouter;
use serde_json::Value;

use crate::BASE_PATH;
use crate::document::{Document, Operation};
use crate::problem::ApiError;
use knooppunt_services::app::AppState;

/// A path (below the host), its methods' router and their names in the order they were
/// added (the order `Allow` lists them in).
type Route = (String, MethodRouter<Arc<AppState>>, Vec<&'static str>);

/// The table being filled in: the description (reached through `Deref`, for the schemas
/// an operation names) and the routes.
pub(crate) struct Endpoints {
    doc: Document,
    /// Each path (below the host) with its methods, in the order they were added.
    routes: Vec<Route>,
    /// The most a published body may be (the publish route's own limit).
    pub(crate) body_limit: usize,
}

impl Endpoints {
    pub(crate) fn new(body_limit: usize) -> Endpoints {
        Endpoints {
            doc: Document::new(),
            routes: Vec::new(),
            body_limit,
        }
    }

    /// Adds `method` (`get`, `post`, …) of `path` (below [`BASE_PATH`]) with the path's
    /// `parameters`, as `router` serves it and `operation` describes it.
    pub(crate) fn route(
        &mut self,
        path: &str,
        method: &'static str,
        router: MethodRouter<Arc<AppState>>,
        parameters: &Value,
        operation: Operation,
    ) {
        self.doc.add(path, method, parameters, operation);
        self.serve(&format!("{BASE_PATH}{path}"), method, router);
    }

    /// A route the document does not describe (the operators' `/healthz`, `/readyz` and
    /// `/metrics`, outside the API's base path): `full_path` as it is.
    pub(crate) fn serve(
        &mut self,
        full_path: &str,
        method: &'static str,
        router: MethodRouter<Arc<AppState>>,
    ) {
        match self.routes.iter_mut().find(|(path, ..)| path == full_path) {
            Some((_, routed, methods)) => {
                *routed = std::mem::take(routed).merge(router);
                methods.push(method);
            }
            None => self
                .routes
                .push((full_path.to_owned(), router, vec![method])),
        }
    }

    pub(crate) fn get<H: Handler<T, Arc<AppState>>, T: 'static>(
        &mut self,
        path: &str,
        handler: H,
        parameters: &Value,
        operation: Operation,
    ) {
        self.route(
            path,
            "get",
            axum::routing::get(handler),
            parameters,
            operation,
        );
    }

    pub(crate) fn post<H: Handler<T, Arc<AppState>>, T: 'static>(
        &mut self,
        path: &str,
        handler: H,
        parameters: &Value,
        operation: Operation,
    ) {
        self.route(
            path,
            "post",
            axum::routing::post(handler),
            parameters,
            operation,
        );
    }

    pub(crate) fn put<H: Handler<T, Arc<AppState>>, T: 'static>(
        &mut self,
        path: &str,
        handler: H,
        parameters: &Value,
        operation: Operation,
    ) {
        self.route(
            path,
            "put",
            axum::routing::put(handler),
            parameters,
            operation,
        );
    }

    pub(crate) fn patch<H: Handler<T, Arc<AppState>>, T: 'static>(
        &mut self,
        path: &str,
        handler: H,
        parameters: &Value,
        operation: Operation,
    ) {
        self.route(
            path,
            "patch",
            axum::routing::patch(handler),
            parameters,
            operation,
        );
    }

    pub(crate) fn delete<H: Handler<T, Arc<AppState>>, T: 'static>(
        &mut self,
        path: &str,
        handler: H,
        parameters: &Value,
        operation: Operation,
    ) {
        self.route(
            path,
            "delete",
            axum::routing::delete(handler),
            parameters,
            operation,
        );
    }

    pub(crate) fn options<H: Handler<T, Arc<AppState>>, T: 'static>(
        &mut self,
        path: &str,
        handler: H,
        parameters: &Value,
        operation: Operation,
    ) {
        self.route(
            path,
            "options",
            axum::routing::options(handler),
            parameters,
            operation,
        );
    }

    /// The routes: each path with its methods, and 405 with their `Allow` list for others.
    pub(crate) fn into_router(self) -> (Router<Arc<AppState>>, Document) {
        let mut router = Router::new();
        for (path, routed, methods) in self.routes {
            let allow: Arc<str> = methods
                .iter()
                .map(|m| m.to_ascii_uppercase())
                .collect::<Vec<_>>()
                .join(", ")
                .into();
            router = router.route(
                &path,
                routed.fallback(move || {
                    let allow = Arc::clone(&allow);
                    async move { ApiError::MethodNotAllowed { allow } }
                }),
            );
        }
        (router, self.doc)
    }

    /// The description alone.
    pub(crate) fn into_document(self) -> Document {
        self.doc
    }
}

impl Deref for Endpoints {
    type Target = Document;

    fn deref(&self) -> &Document {
        &self.doc
    }
}

impl DerefMut for Endpoints {
    fn deref_mut(&mut self) -> &mut Document {
        &mut self.doc
    }
}
