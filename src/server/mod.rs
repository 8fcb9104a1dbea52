//! `typeahead serve`: the HTTP server browsers and the aggregator talk to.
//!
//! Two listeners: the public one (suggestions, OpenSearch, health, metrics) and, only when an
//! admin token is configured, an admin one (reload, blocklist) that defaults to loopback.
//! [`public_router`] and [`admin_router`] build the routes so tests can drive them directly;
//! [`run`] serves already-bound listeners until a shutdown signal, finishing in-flight requests.

mod admin;
mod listen;
pub(crate) mod routes;

pub use admin::read_token;
pub use listen::{ConnLimits, serve};

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::error_handling::HandleErrorLayer;
use axum::extract::{MatchedPath, Request, State};
use axum::middleware::{self, Next};
use axum::response::Response;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tower::ServiceBuilder;

use crate::blocklist::Blocklist;
use crate::error::ApiError;
use crate::metrics::{self, Metrics};
use crate::store::{self, ActiveBlocklist, Store};

/// Longest request URI the public routes accept: a prefix is at most
/// [`crate::api::MAX_QUERY_BYTES`], and percent-encoding can triple it.
pub const MAX_URI_BYTES: usize = 8 << 10;

/// Largest request body the public routes accept; they read none.
pub const MAX_PUBLIC_BODY_BYTES: u64 = 16 << 10;

/// Limits and timing of a server.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Requests served at once; more are shed with 503 + Retry-After.
    pub max_concurrency: usize,
    /// Longest a request may take before it is answered with 503.
    pub request_timeout: Duration,
    /// How often the snapshot and blocklist files are checked for changes.
    pub watch_interval: Duration,
    /// Longest an admin client may take to send a whole request body (a blocklist upload).
    pub admin_body_timeout: Duration,
    /// Longest one snapshot load (read and verify) may take before it is abandoned.
    pub load_timeout: Duration,
    /// Connection-level limits: header timeout, head size, open connections.
    pub conn: ConnLimits,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_concurrency: 512,
            request_timeout: Duration::from_secs(2),
            watch_interval: Duration::from_millis(250),
            admin_body_timeout: Duration::from_secs(30),
            load_timeout: Duration::from_secs(120),
            conn: ConnLimits::default(),
        }
    }
}

/// Shared by every handler: one `Arc`, so handing it to a request is one atomic increment.
pub type AppState = Arc<Shared>;

/// What [`AppState`] points to.
#[derive(Debug)]
pub struct Shared {
    /// What is being served.
    pub store: Arc<Store>,
    /// Request and lifecycle counters.
    pub metrics: Arc<Metrics>,
    /// Bearer token of the admin routes; `None` disables them.
    pub admin_token: Option<Arc<str>>,
    /// The blocklist file, kept in sync with `PUT /admin/blocklist`.
    pub blocklist_path: Option<PathBuf>,
    /// False once shutdown began: `/readyz` turns 503 so balancers stop sending traffic.
    pub ready: Arc<AtomicBool>,
    /// Fault injection: added to every suggestion answer (tests of hedging and deadlines).
    pub inject_delay: Duration,
    /// The search page's settings.
    pub web: crate::web::WebConfig,
}

/// The public routes with their middleware.
pub fn public_router(state: AppState, limits: &Limits) -> Router {
    let router = routes::router()
        .merge(crate::web::router(state.web.clone(), Arc::clone(&state.metrics)))
        .fallback(|| async { ApiError::NotFound })
        .method_not_allowed_fallback(|| async { ApiError::MethodNotAllowed });
    protect(router, limits, Arc::clone(&state.metrics)).with_state(state)
}

/// The middleware every public listener (server or aggregator) runs: one concurrency limit for
/// the whole listener (a global semaphore: per-route limits would multiply it) with load
/// shedding, a request timeout, URI and body size limits, CORS, and request metrics.
pub fn protect<S: Clone + Send + Sync + 'static>(
    router: Router<S>,
    limits: &Limits,
    metrics: Arc<Metrics>,
) -> Router<S> {
    let overload = ServiceBuilder::new()
        .layer(HandleErrorLayer::new(|e: tower::BoxError| async move {
            if e.is::<tower::timeout::error::Elapsed>() {
                ApiError::Timeout
            } else {
                ApiError::Overloaded
            }
        }))
        .load_shed()
        .layer(tower::limit::GlobalConcurrencyLimitLayer::new(limits.max_concurrency))
        .timeout(limits.request_timeout);
    router
        .layer(overload)
        .layer(middleware::from_fn_with_state(MAX_PUBLIC_BODY_BYTES, size_limits))
        .layer(cors())
        .layer(middleware::from_fn_with_state(metrics, record))
}

/// Rejects oversized URIs (414) and declared bodies over `max_body` (413) before any handler
/// runs. (A body sent without a length is cut at its route's limit when it is read.)
async fn size_limits(
    State(max_body): State<u64>,
    request: Request,
    next: Next,
) -> Result<Response, ApiError> {
    let uri_len = request.uri().path_and_query().map_or(0, |pq| pq.as_str().len());
    if uri_len > MAX_URI_BYTES {
        return Err(ApiError::UriTooLong);
    }
    let declared = request
        .headers()
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|len| len > max_body) {
        return Err(ApiError::PayloadTooLarge);
    }
    Ok(next.run(request).await)
}

/// CORS for browser pages on other origins: any origin may read suggestions.
pub fn cors() -> tower_http::cors::CorsLayer {
    tower_http::cors::CorsLayer::new()
        .allow_origin(tower_http::cors::Any)
        .allow_methods([axum::http::Method::GET, axum::http::Method::HEAD])
        .expose_headers([axum::http::header::ETAG, routes::VERSION_HEADER])
}

/// The admin routes (token-checked) with their middleware.
pub fn admin_router(state: AppState, limits: &Limits) -> Router {
    admin::router(state.clone(), limits.admin_body_timeout)
        .fallback(|| async { ApiError::NotFound })
        .method_not_allowed_fallback(|| async { ApiError::MethodNotAllowed })
        .layer(middleware::from_fn_with_state(admin::MAX_BLOCKLIST_BYTES as u64, size_limits))
        .layer(middleware::from_fn_with_state(Arc::clone(&state.metrics), record))
        .with_state(state)
}

/// Counts every request by route and status, with its latency.
pub async fn record(State(metrics): State<Arc<Metrics>>, request: Request, next: Next) -> Response {
    let route =
        metrics::route_index(request.extensions().get::<MatchedPath>().map(MatchedPath::as_str));
    let started = Instant::now();
    // A guard, so a request whose client went away (its future dropped) still leaves the
    // in-flight gauge.
    let in_flight = metrics.in_flight();
    let response = next.run(request).await;
    drop(in_flight);
    metrics.end(route, response.status().as_u16(), started.elapsed());
    tracing::debug!(route = metrics::ROUTES[route], status = response.status().as_u16(), "request");
    response
}

/// Everything `typeahead serve` was asked to do.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// The snapshot file (watched for atomic replacement).
    pub snapshot: PathBuf,
    /// Blocklist file (watched; rewritten by `PUT /admin/blocklist`).
    pub blocklist: Option<PathBuf>,
    /// Admin bearer token; `None` disables admin routes.
    pub admin_token: Option<String>,
    /// Limits and timing.
    pub limits: Limits,
    /// Fault injection: delay every suggestion answer.
    pub inject_delay: Duration,
    /// The search page's settings.
    pub web: crate::web::WebConfig,
}

/// Largest blocklist file read (a list of ten thousand phrases is well under 1 MiB).
const MAX_BLOCKLIST_FILE_BYTES: u64 = 64 << 20;

/// Reads and parses a blocklist file (a regular file: a FIFO is refused, not waited on).
pub fn read_blocklist(path: &std::path::Path) -> anyhow::Result<ActiveBlocklist> {
    let text = typeahead_core::file::read_regular_string(path, MAX_BLOCKLIST_FILE_BYTES)
        .map_err(|e| anyhow::anyhow!("cannot read blocklist {}: {e}", path.display()))?;
    Ok(ActiveBlocklist::new(Blocklist::parse(&text)?, path.display().to_string()))
}

/// Loads the snapshot and blocklist; fails before anything listens if either is bad. A
/// blocklist that was asked for and cannot be read is an error, never an empty list.
pub fn load_state(config: &ServeConfig) -> anyhow::Result<AppState> {
    let blocklist = match &config.blocklist {
        Some(path) => read_blocklist(path)?,
        None => ActiveBlocklist::empty(),
    };
    let metrics = Arc::new(Metrics::default());
    let timeout = config.limits.load_timeout;
    let store = Store::open(&config.snapshot, blocklist, timeout, Arc::clone(&metrics))
        .map_err(|e| anyhow::anyhow!("cannot load snapshot {}: {e}", config.snapshot.display()))?;
    Ok(Arc::new(Shared {
        store: Arc::new(store),
        metrics,
        admin_token: config.admin_token.as_deref().map(Arc::from),
        blocklist_path: config.blocklist.clone(),
        ready: Arc::new(AtomicBool::new(true)),
        inject_delay: config.inject_delay,
        web: config.web.clone(),
    }))
}

/// Serves the public (and admin, if given) listeners until `shutdown` resolves, then stops
/// accepting, finishes in-flight requests and returns.
pub async fn run(
    state: AppState,
    limits: Limits,
    public: TcpListener,
    admin: Option<TcpListener>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let (stop_tx, stop_rx) = watch::channel(false);
    let watchers = spawn_watchers(&state, &limits, stop_rx.clone());
    let stopped = |mut rx: watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|stop| *stop).await;
    };
    let metrics = Arc::clone(&state.metrics);
    let public_app = public_router(state.clone(), &limits);
    let public_server =
        serve(public, public_app, limits.conn.clone(), metrics.clone(), stopped(stop_rx.clone()));
    let admin_server = admin.map(|listener| {
        let app = admin_router(state.clone(), &limits);
        serve(listener, app, limits.conn.clone(), metrics.clone(), stopped(stop_rx.clone()))
    });
    let ready = Arc::clone(&state.ready);
    tokio::spawn(async move {
        shutdown.await;
        ready.store(false, Ordering::SeqCst);
        tracing::info!("shutting down: finishing in-flight requests");
        let _ = stop_tx.send(true);
    });
    match admin_server {
        Some(admin_server) => {
            let (a, b) = tokio::join!(public_server, admin_server);
            a.and(b)?;
        }
        None => public_server.await?,
    }
    // A watcher may be waiting on a load; shutdown does not wait for it (nothing is half
    // published: a change is published by synchronous stores after its last await).
    for w in watchers {
        w.abort();
        let _ = w.await;
    }
    Ok(())
}

/// Watches the snapshot file (reload on replacement) and the blocklist file (re-read on change).
fn spawn_watchers(
    state: &AppState,
    limits: &Limits,
    stop: watch::Receiver<bool>,
) -> Vec<tokio::task::JoinHandle<()>> {
    let mut tasks = Vec::new();
    let store = Arc::clone(&state.store);
    let path = store.path().to_owned();
    tasks.push(tokio::spawn(store::watch(path, limits.watch_interval, stop.clone(), move || {
        let store = Arc::clone(&store);
        async move {
            let _ = store.reload().await;
        }
    })));
    if let Some(path) = state.blocklist_path.clone() {
        let store = Arc::clone(&state.store);
        let metrics = Arc::clone(&state.metrics);
        let watched = path.clone();
        tasks.push(tokio::spawn(store::watch(watched, limits.watch_interval, stop, move || {
            let (store, metrics, path) = (Arc::clone(&store), Arc::clone(&metrics), path.clone());
            async move {
                match read_blocklist(&path) {
                    Ok(list) if list.version == store.current().blocklist.version => {}
                    Ok(list) => {
                        let _ = store.set_blocklist(list).await;
                    }
                    Err(e) => {
                        metrics.blocklist_failed.fetch_add(1, Ordering::Relaxed);
                        tracing::warn!(error = %e, "blocklist file unreadable or rejected; the last good list stays active");
                    }
                }
            }
        })));
    }
    tasks
}

/// Resolves on SIGTERM or Ctrl-C.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = terminate => {}
    }
}
