//! Each route declared once: its handler (whose `#[utoipa::path]` gives the method, the path and
//! the description) and who may call it. One declaration adds it to the router, to the OpenAPI
//! document, and to the table that `auth::guard` consults.

use std::collections::HashMap;
use std::sync::Arc;

use axum::Router;
use axum::extract::{MatchedPath, Request};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::Response;
use axum::routing::MethodRouter;
use utoipa::openapi::path::{Operation, PathItem};
use utoipa::openapi::{self, ContentBuilder, Ref, RefOr, ResponseBuilder};
use utoipa_axum::router::{OpenApiRouter, UtoipaMethodRouter};

use crate::app::App;
use crate::auth::Access;

/// The access of every route, by route template and method.
#[derive(Default, Debug)]
pub struct AccessTable(HashMap<String, Vec<(Method, Access)>>);

impl AccessTable {
    /// The access of a request to `template` (its matched route; `None` when no route
    /// matched). A method the route does not take is answered 405 with the access of the
    /// route's other methods when they are all public, else as for any signed-in caller; an
    /// unknown path needs a signed-in caller, so it reveals nothing to strangers.
    pub fn of(&self, template: Option<&str>, method: &Method) -> Access {
        let Some(methods) = template.and_then(|t| self.0.get(t)) else {
            return Access::Signed;
        };
        // HEAD is served by the GET handler, so it has its access.
        let method = if method == Method::HEAD {
            &Method::GET
        } else {
            method
        };
        if let Some((_, access)) = methods.iter().find(|(m, _)| m == method) {
            return *access;
        }
        match methods.first() {
            Some((_, first)) if methods.iter().all(|(_, a)| a == first && a.is_public()) => *first,
            _ => Access::Signed,
        }
    }

    /// Every route's methods with their access, in no particular order.
    pub fn operations(&self) -> impl Iterator<Item = (&str, &Method, Access)> {
        self.0.iter().flat_map(|(path, methods)| {
            methods
                .iter()
                .map(move |(method, access)| (path.as_str(), method, *access))
        })
    }

    fn add(&mut self, path: &str, method: Method, access: Access) {
        self.0
            .entry(path.to_owned())
            .or_default()
            .push((method, access));
    }
}

/// The routes declared so far.
pub struct Routes {
    router: OpenApiRouter<App>,
    access: AccessTable,
}

impl Routes {
    pub fn new(doc: openapi::OpenApi) -> Self {
        Routes {
            router: OpenApiRouter::with_openapi(doc),
            access: AccessTable::default(),
        }
    }

    /// A documented route (or several with one access): `routes!(handler, …)`.
    pub fn add(
        mut self,
        access: Access,
        (schemas, mut paths, router): UtoipaMethodRouter<App>,
    ) -> Self {
        for (path, item) in paths.paths.iter_mut() {
            for (method, operation) in operations(item) {
                self.access.add(path, method.clone(), access);
                describe(operation, access);
                refused_short_of_space(path, &method, operation);
            }
        }
        self.router = self.router.routes((schemas, paths, router));
        self
    }

    /// A route left out of the OpenAPI document (the landing page).
    pub fn hidden(
        mut self,
        path: &str,
        method: Method,
        access: Access,
        router: MethodRouter<App>,
    ) -> Self {
        self.access.add(path, method, access);
        self.router = self.router.route(path, router);
        self
    }

    pub fn finish(self) -> (Router<App>, openapi::OpenApi, Arc<AccessTable>) {
        let (router, doc) = self.router.split_for_parts();
        (router, doc, Arc::new(self.access))
    }
}

/// Puts the [`Access`] of the route a request matched into it, for `auth::guard`.
pub async fn mark(
    axum::extract::State(table): axum::extract::State<Arc<AccessTable>>,
    mut req: Request,
    next: Next,
) -> Response {
    let template = req
        .extensions()
        .get::<MatchedPath>()
        .map(MatchedPath::as_str);
    let access = table.of(template, req.method());
    req.extensions_mut().insert(access);
    next.run(req).await
}

fn operations(item: &mut PathItem) -> Vec<(Method, &mut Operation)> {
    [
        (Method::GET, item.get.as_mut()),
        (Method::POST, item.post.as_mut()),
        (Method::PUT, item.put.as_mut()),
        (Method::PATCH, item.patch.as_mut()),
        (Method::DELETE, item.delete.as_mut()),
    ]
    .into_iter()
    .filter_map(|(m, op)| op.map(|op| (m, op)))
    .collect()
}

/// Writes what every operation shares into its description: who may call it (public ones
/// need no credential: `security: []`), and the error answers that the guard and the
/// extractors give before the handler runs.
fn describe(operation: &mut Operation, access: Access) {
    let mut errors: Vec<(u16, String)> = vec![(
        421,
        "The Host header does not name this server (server.allowed_hosts)".into(),
    )];
    match access {
        Access::Probe => errors.clear(),
        Access::Public => {
            errors.push((403, "A browser page of another origin".into()));
        }
        Access::Signed => {
            errors.push((
                401,
                "No credential, or one that is unknown or revoked".into(),
            ));
            errors.push((
                403,
                "A browser page of another origin, or a missing CSRF token".into(),
            ));
        }
        Access::Roles(roles) => {
            let names: Vec<&str> = roles.iter().map(|r| r.as_str()).collect();
            errors.push((
                401,
                "No credential, or one that is unknown or revoked".into(),
            ));
            errors.push((
                403,
                format!("The caller's role is not {}", names.join(" or ")),
            ));
        }
    }
    if access.is_public() {
        operation.security = Some(vec![]);
    }
    if let Some(body) = &operation.request_body {
        // JSON, but for a browser's form (`POST /signin`).
        let media = match body {
            RefOr::T(body) => body.content.keys().next().map(String::as_str),
            RefOr::Ref(_) => None,
        }
        .unwrap_or("application/json");
        let unreadable = if media == "application/json" {
            "The body is not valid JSON"
        } else {
            "The body could not be read"
        };
        errors.push((400, unreadable.into()));
        errors.push((408, "The body did not arrive in time".into()));
        errors.push((413, "The body is larger than server.max_body".into()));
        errors.push((415, format!("The body is not sent as {media}")));
        errors.push((422, "A field is wrong: details.field names it".into()));
    }
    let params = operation.parameters.as_deref().unwrap_or_default();
    let has = |place: openapi::path::ParameterIn| {
        params
            .iter()
            .any(|p| matches!(p, RefOr::T(p) if p.parameter_in == place))
    };
    if has(openapi::path::ParameterIn::Query) {
        errors.push((
            400,
            "A query parameter is wrong: details.field names it".into(),
        ));
    }
    if params
        .iter()
        .any(|p| matches!(p, RefOr::T(p) if p.name.eq_ignore_ascii_case("idempotency-key")))
    {
        errors.push((
            409,
            "The Idempotency-Key was used before for another request".into(),
        ));
    }
    // A path's id, or a world named in the query or the body, that does not exist (or that
    // this caller may not see).
    if has(openapi::path::ParameterIn::Path) || !access.is_public() {
        errors.push((404, "Not found (or not visible to this caller)".into()));
    }
    if !access.is_public() {
        errors.push((
            429,
            "Too many requests from this credential (limits.requests_per_second): nothing was done; Retry-After says when to try again".into(),
        ));
    }
    if access != Access::Probe {
        errors.push((503, "The storage is unavailable".into()));
    }
    for (status, description) in errors {
        let status = status.to_string();
        if let Some(declared) = operation.responses.responses.get_mut(&status) {
            // The handler's own says more, when it says anything.
            if let RefOr::T(declared) = declared {
                if declared.description.is_empty() {
                    declared.description = description;
                }
                if status == "429" {
                    declared
                        .headers
                        .insert("Retry-After".into(), RefOr::T(retry_after()));
                }
            }
            continue;
        }
        let mut response = ResponseBuilder::new().description(description);
        if status == "429" {
            response = response.header("Retry-After", retry_after());
        }
        let response = response
            .content(
                "application/json",
                ContentBuilder::new()
                    .schema(Some(Ref::from_schema_name("ErrorBody")))
                    .build(),
            )
            .build();
        operation
            .responses
            .responses
            .insert(status, RefOr::T(response));
    }
}

/// A write that is not a decision or a withdrawal (nor a read sent by POST) may be refused
/// while the store is short of space: 507 `storage_full`, with `Retry-After`
/// (docs/reliability.md, "Disk full").
fn refused_short_of_space(path: &str, method: &Method, operation: &mut Operation) {
    const RESOLVE_OR_READ: [&str; 5] =
        ["/decision", "/withdraw", "/default", "/explain", "/replay"];
    // The MCP gateway answers JSON-RPC: its refusals are JSON-RPC errors (docs/mcp.md).
    if *method == Method::GET
        || path.starts_with("/mcp/")
        || RESOLVE_OR_READ.iter().any(|end| path.ends_with(end))
    {
        return;
    }
    let responses = &mut operation.responses.responses;
    if let Some(RefOr::T(declared)) = responses.get_mut("507") {
        declared
            .headers
            .insert("Retry-After".into(), RefOr::T(retry_after()));
        return;
    }
    let response = ResponseBuilder::new()
        .description(
            "The disk holding the data is short of space (`storage_full`): only decisions, \
             withdrawals and timeouts are written until the space needed is free; the message \
             and details say how much is free and needed, Retry-After when to try again",
        )
        .header("Retry-After", retry_after())
        .content(
            "application/json",
            ContentBuilder::new()
                .schema(Some(Ref::from_schema_name("ErrorBody")))
                .build(),
        )
        .build();
    responses.insert("507".into(), RefOr::T(response));
}

/// The header every answer of a limit carries.
fn retry_after() -> openapi::Header {
    openapi::HeaderBuilder::new()
        .schema(Some(
            openapi::ObjectBuilder::new()
                .schema_type(openapi::schema::Type::Integer)
                .minimum(Some(1)),
        ))
        .description(Some("Seconds to wait before trying again"))
        .build()
}
