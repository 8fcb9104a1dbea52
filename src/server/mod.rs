//! `typeahead serve`: the HTTP server browsers and the aggregator talk to.
//!
//! Two listeners: the public one (suggestions, OpenSearch, health, metrics) and, only when an
//! admin token is configured, an admin one (reload, blocklist) that defaults to loopback.
//! [`public_router`] and [`admin_router`] build the routes so tests can drive them directly;
//! [`run`] serves already-bound listeners until a shutdown signal, finishing in-flight requests.

mod admin;
mod fault;
mod gauges;
mod routes;

pub use admin::read_token;
pub use fault::Faults;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::middleware;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::blocklist::{Blocklist, Error as BlocklistError};
use crate::cache::Cache;
use crate::error::ApiError;
use crate::http::{
    AdmissionLayer, Front, Hot, Limits, Lookup, Prepared, protect, record, serve, size_limits,
};
use crate::metrics::{HttpMetrics, Registry, ServerMetrics};
use crate::store::{ActiveBlocklist, Preloaded, Store};
use crate::watch::{Fingerprint, Handled, Probe, Quiet, fingerprint, watch as watch_file};

/// Shared by every handler: one `Arc`, so handing it to a request is one atomic increment.
pub type AppState = Arc<Shared>;

/// What [`AppState`] points to.
#[derive(Debug)]
pub struct Shared {
    /// What is being served.
    pub store: Arc<Store>,
    /// Request and connection metrics (the plumbing both processes share).
    pub http_metrics: Arc<HttpMetrics>,
    /// Reload and blocklist counters.
    pub metrics: Arc<ServerMetrics>,
    /// Everything `/metrics` exports: both sets above and the snapshot's gauges.
    pub registry: Registry,
    /// Bearer token of the admin routes; `None` disables them.
    pub admin_token: Option<Arc<str>>,
    /// Rejected admin requests, logged at most once a second.
    pub rejections_logged: admin::RejectionLog,
    /// The blocklist file, kept in sync with `PUT /admin/blocklist`.
    pub blocklist_path: Option<PathBuf>,
    /// The identity of that file when the list in force at startup was read from it (taken
    /// before the read): where its watch starts.
    pub blocklist_identity: Option<Fingerprint>,
    /// One blocklist change at a time, from the file to the published list: a `PUT` (which
    /// writes the file, then applies) and the file's watcher (which reads it, compares, then
    /// applies) take turns. Otherwise two `PUT`s could leave the file saying one list while the
    /// other is served, and the watcher could apply a `PUT`'s list a second time meanwhile.
    pub blocklist_turn: tokio::sync::Mutex<()>,
    /// Blocklist `PUT`s accepted and not finished ([`admin::MAX_PENDING_CHANGES`] at most):
    /// each holds its body twice and refilters every key when its turn comes, and finishes
    /// even when its client has gone, so a retrying script must not queue them without end.
    pub blocklist_pending: Arc<tokio::sync::Semaphore>,
    /// False once shutdown began: `/readyz` turns 503 so balancers stop sending traffic.
    pub ready: Arc<AtomicBool>,
    /// The search page's settings.
    pub web: crate::web::WebConfig,
    /// Serialized answers of hot prefixes, keyed by everything they depend on.
    pub answers: Cache<Prepared>,
}

/// The public routes with their middleware, and cached suggestions answered in front of them
/// ([`crate::http::Hot`]): when there is an answer cache, and not while faults are injected,
/// which must delay every answer.
pub fn public_router(state: AppState, limits: &Limits, faults: Faults) -> Front {
    let router = routes::router()
        .fallback(|| async { ApiError::NotFound })
        .method_not_allowed_fallback(|| async { ApiError::MethodNotAllowed });
    let router = faults.mount(router);
    let metrics = Arc::clone(&state.http_metrics);
    let admission = AdmissionLayer::for_limits(limits);
    let hot = faults.is_none().then(|| {
        let state = Arc::clone(&state);
        let lookup: Lookup = Arc::new(move |uri, headers| {
            routes::suggestion_before_routing(&state, uri.query(), headers)
        });
        Hot::new(routes::SUGGEST, lookup, admission.clone(), Arc::clone(&metrics))
    });
    let router = protect(router, routes::probes(), state.web.clone(), admission, metrics);
    Front::new(router.with_state(state), hot)
}

/// The admin routes (token-checked) with their middleware.
pub fn admin_router(state: AppState, limits: &Limits) -> Router {
    admin::router(state.clone(), limits.admin_body_timeout)
        .fallback(|| async { ApiError::NotFound })
        .method_not_allowed_fallback(|| async { ApiError::MethodNotAllowed })
        .layer(middleware::from_fn_with_state(admin::MAX_BLOCKLIST_BYTES as u64, size_limits))
        .layer(middleware::from_fn_with_state(Arc::clone(&state.http_metrics), record))
        .layer(middleware::map_response(no_store))
        .with_state(state)
}

/// Admin answers (the blocklist's entries among them) are for the operator who asked: no
/// cache between keeps them.
async fn no_store(mut response: axum::response::Response) -> axum::response::Response {
    let value = axum::http::HeaderValue::from_static("no-store");
    response.headers_mut().insert(axum::http::header::CACHE_CONTROL, value);
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
    /// Faults to inject (tests and demos only).
    pub faults: Faults,
    /// Answers kept in the answer cache at most (0 disables it).
    pub cache_entries: usize,
    /// The search page's settings.
    pub web: crate::web::WebConfig,
}

/// Largest blocklist file read (a list of ten thousand phrases is well under 1 MiB).
const MAX_BLOCKLIST_FILE_BYTES: u64 = 64 << 20;

/// Why `typeahead serve` cannot start, or a blocklist file cannot be taken.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The blocklist file cannot be read (missing, not a regular file, too large).
    #[error("cannot read blocklist {path}")]
    BlocklistRead {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The blocklist file is not a valid blocklist.
    #[error("blocklist {path} is invalid")]
    BlocklistInvalid {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        #[source]
        source: crate::blocklist::Error,
    },
    /// The snapshot cannot be loaded or verified.
    #[error("cannot load snapshot {path}")]
    Snapshot {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: crate::store::StoreError,
    },
    /// The admin token cannot be used.
    #[error(transparent)]
    Token(#[from] admin::TokenError),
}

/// Reads and parses a blocklist file (a regular file: a FIFO is refused, not waited on).
pub fn read_blocklist(path: &std::path::Path) -> Result<ActiveBlocklist, StartError> {
    read_blocklist_text(path).map(|(list, _)| list)
}

/// [`read_blocklist`], and the text it was parsed from.
fn read_blocklist_text(path: &std::path::Path) -> Result<(ActiveBlocklist, String), StartError> {
    let text = typeahead_core::file::read_regular_string(path, MAX_BLOCKLIST_FILE_BYTES)
        .map_err(|source| StartError::BlocklistRead { path: path.to_owned(), source })?;
    let list = Blocklist::parse(&text)
        .map_err(|source| StartError::BlocklistInvalid { path: path.to_owned(), source })?;
    Ok((ActiveBlocklist::new(list, path.display().to_string()), text))
}

/// `in_force` and the entries of the complete lines of `text`: a file being written in place
/// can end in a fragment of a line ("wea" of "weather"), which must not be blocked meanwhile.
fn with_complete_lines(in_force: &Blocklist, text: &str) -> Result<Blocklist, BlocklistError> {
    let complete = text.rfind(crate::blocklist::LINE_ENDS).map_or(0, |end| end + 1);
    in_force.union(Blocklist::parse(&text[..complete])?.entries())
}

/// Loads the snapshot and blocklist; fails before anything listens if either is bad. A
/// blocklist that was asked for and cannot be read is an error, never an empty list.
pub fn load_state(config: &ServeConfig) -> Result<AppState, StartError> {
    load_state_with(config, None)
}

/// [`load_state`] with the snapshot file already read and verified, when it was.
pub fn load_state_with(
    config: &ServeConfig,
    loaded: Option<Preloaded>,
) -> Result<AppState, StartError> {
    let blocklist_identity = config.blocklist.as_deref().and_then(fingerprint);
    let blocklist = match &config.blocklist {
        Some(path) => read_blocklist(path)?,
        None => ActiveBlocklist::empty(),
    };
    let metrics = Arc::new(ServerMetrics::default());
    let timeout = config.limits.load_timeout;
    let path = &config.snapshot;
    let store = match loaded {
        Some(loaded) => Store::with_loaded(path, loaded, blocklist, timeout, Arc::clone(&metrics)),
        None => Store::open(path, blocklist, timeout, Arc::clone(&metrics)),
    };
    let store =
        store.map_err(|source| StartError::Snapshot { path: config.snapshot.clone(), source })?;
    let store = Arc::new(store);
    let http_metrics = Arc::new(HttpMetrics::default());
    let mut registry = Registry::default();
    http_metrics.register(&mut registry);
    metrics.register(&mut registry);
    registry.register_collector(Box::new(gauges::SnapshotGauges(Arc::clone(&store))));
    Ok(Arc::new(Shared {
        store,
        http_metrics,
        metrics,
        registry,
        admin_token: config.admin_token.as_deref().map(Arc::from),
        rejections_logged: admin::RejectionLog::default(),
        blocklist_path: config.blocklist.clone(),
        blocklist_identity,
        blocklist_turn: tokio::sync::Mutex::new(()),
        blocklist_pending: Arc::new(tokio::sync::Semaphore::new(admin::MAX_PENDING_CHANGES)),
        ready: Arc::new(AtomicBool::new(true)),
        web: config.web.clone(),
        answers: Cache::unexpiring(config.cache_entries),
    }))
}

/// Serves the public (and admin, if given) listeners until `shutdown` resolves, then stops
/// accepting, finishes in-flight requests and returns.
pub async fn run(
    state: AppState,
    limits: Limits,
    faults: Faults,
    public: TcpListener,
    admin: Option<TcpListener>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let (stop_tx, stop_rx) = watch::channel(false);
    let watchers = spawn_watchers(&state, &limits, stop_rx.clone());
    let stopped = |mut rx: watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|stop| *stop).await;
    };
    let metrics = Arc::clone(&state.http_metrics);
    let public_app = public_router(state.clone(), &limits, faults);
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

/// Watches the snapshot file (reload on replacement) and the blocklist file (re-read on change),
/// each from the identity of the version read at startup.
fn spawn_watchers(
    state: &AppState,
    limits: &Limits,
    stop: watch::Receiver<bool>,
) -> Vec<tokio::task::JoinHandle<()>> {
    let mut tasks = Vec::new();
    let store = Arc::clone(&state.store);
    let (probe, since) = (Arc::clone(store.probe()), store.verified_identity());
    let every = limits.watch_interval;
    let quiet = Arc::new(Quiet::new(Arc::clone(&probe)));
    tasks.push(tokio::spawn(watch_file(probe, every, since, stop.clone(), move |read_from| {
        let (store, quiet) = (Arc::clone(&store), Arc::clone(&quiet));
        async move { reload_snapshot(&store, read_from, &quiet).await }
    })));
    if let Some(path) = state.blocklist_path.clone() {
        let since = state.blocklist_identity;
        let state = Arc::clone(state);
        let probe = Arc::new(Probe::new(&path));
        let quiet = Arc::new(Quiet::new(Arc::clone(&probe)));
        tasks.push(tokio::spawn(watch_file(probe, every, since, stop, move |read_from| {
            let (state, path, quiet) = (Arc::clone(&state), path.clone(), Arc::clone(&quiet));
            async move { apply_blocklist_file(&state, &path, read_from, &quiet).await }
        })));
    }
    tasks
}

/// Reloads the snapshot file at `path` after its watcher saw it change. A rejected file is
/// read again (with the watcher's back-off) while it is fresh: a file written in place may
/// have been read half done, and when the rest lands within the same tick of a coarse file
/// clock, its identity (inode, size, time) never changes again, so no later poll would read
/// the whole file. Past [`SNAPSHOT_SETTLE`] a rejection is for good, until the next change.
/// `read_from` is the identity the watcher saw, before the reload read the file.
async fn reload_snapshot(
    store: &crate::store::Store,
    read_from: Option<Fingerprint>,
    quiet: &Quiet,
) -> Handled {
    match store.reload().await {
        Err(e) if e.is_transient() => Handled::Retry,
        // A file that is gone is waited for, not read again and again.
        Err(_) if read_from.is_none() => Handled::Done,
        Err(_) => {
            let settled = quiet.for_at_least(SNAPSHOT_SETTLE, read_from).await;
            if settled { Handled::Done } else { Handled::Retry }
        }
        Ok(_) => Handled::Done,
    }
}

/// How long a rejected snapshot file must have been left alone before the rejection holds
/// until its next change ([`reload_snapshot`]).
const SNAPSHOT_SETTLE: std::time::Duration = std::time::Duration::from_secs(5);

/// Reads the blocklist file at `path` and applies it if it differs from the list in force.
/// `read_from` is the file's identity the watcher saw (before this read), `quiet` the
/// watcher's record of how long the file has been left alone.
async fn apply_blocklist_file(
    state: &Shared,
    path: &std::path::Path,
    read_from: Option<Fingerprint>,
    quiet: &Quiet,
) -> Handled {
    let _turn = state.blocklist_turn.lock().await;
    // Reading (up to 64 MiB) and parsing (an automaton over every entry) block: not on a
    // worker that answers requests.
    let owned = path.to_owned();
    let read = tokio::task::spawn_blocking(move || read_blocklist_text(&owned)).await;
    let Ok(read) = read else {
        return Handled::Retry;
    };
    let (list, text) = match read {
        Ok(read) => read,
        Err(e) => {
            blocklist_failed(state, &e, "blocklist file unreadable or rejected");
            let transient = matches!(&e, StartError::BlocklistRead { source, .. } if crate::watch::is_transient_io(source));
            return if transient { Handled::Retry } else { Handled::Done };
        }
    };
    let current = state.store.current();
    let in_force = current.blocklist.list.entries();
    // A file written in place (`cat new > list`, an editor saving in place) is read empty or
    // cut short when a poll lands mid-write, and publishing that would serve every term it
    // lost. Unblocking is never urgent: a list that drops entries is applied only once its
    // file has been left alone for a moment. Blocking is: what its complete lines add goes at
    // once (with what it drops still in, until the file settles). A last line without its
    // end may be the start of one being written ("new" of "new york porn", which would hide
    // every "new ..." meanwhile): it too waits until the file settles.
    let drops = in_force.iter().any(|e| list.list.entries().binary_search(e).is_err());
    let fragment = !text.is_empty() && !text.ends_with(crate::blocklist::LINE_ENDS);
    if (drops || fragment) && !quiet.for_at_least(BLOCKLIST_SETTLE, read_from).await {
        let in_force_list = current.blocklist.list.clone();
        let union =
            tokio::task::spawn_blocking(move || with_complete_lines(&in_force_list, &text)).await;
        match union {
            Ok(Ok(union)) if union.entries() != in_force => {
                let union = ActiveBlocklist::new(union, list.source.clone());
                if let Err(e) = state.store.set_blocklist(union).await {
                    blocklist_failed(state, &e, "blocklist file could not be applied");
                }
            }
            Ok(Err(e)) => blocklist_failed(state, &e, "blocklist file could not be applied"),
            _ => {}
        }
        return Handled::Retry;
    }
    match state.store.set_blocklist(list).await {
        Ok(_) => Handled::Done,
        Err(e) => {
            // Not the file's fault (a thread that could not start, say): try it again.
            blocklist_failed(state, &e, "blocklist file could not be applied");
            Handled::Retry
        }
    }
}

/// How long a blocklist file must be left alone before a list that drops entries is read
/// from it.
const BLOCKLIST_SETTLE: std::time::Duration = std::time::Duration::from_secs(1);

/// Counts and logs a blocklist change that did not happen.
fn blocklist_failed(state: &Shared, e: &dyn std::error::Error, what: &str) {
    state.metrics.blocklist_failed.inc();
    let error = crate::error::chain(e);
    tracing::warn!(%error, "{what}; the last good list stays active");
}

/// Resolves on SIGTERM or Ctrl-C.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = unix_signal(tokio::signal::unix::SignalKind::terminate());
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = terminate => {}
    }
}

/// Resolves when the signal `kind` arrives (never, if its handler cannot be installed).
#[cfg(unix)]
pub async fn unix_signal(kind: tokio::signal::unix::SignalKind) {
    match tokio::signal::unix::signal(kind) {
        Ok(mut s) => {
            s.recv().await;
        }
        Err(_) => std::future::pending::<()>().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::{BuildInfo, Entry};
    use axum::body::Body;
    use axum::http::Request;
    use tower::ServiceExt;

    /// A server's state over a three-key snapshot in `dir`, with `cache_entries`.
    fn state(dir: &std::path::Path, cache_entries: usize) -> AppState {
        let path = dir.join(format!("s{cache_entries}.snap"));
        let entries: Vec<Entry> = [("new york", 3.0), ("newark", 2.0), ("news", 1.0)]
            .into_iter()
            .map(|(key, score)| Entry { key: key.into(), display: None, score })
            .collect();
        crate::snapshot::write_file(&path, &entries, &BuildInfo::default()).unwrap();
        let config = ServeConfig {
            snapshot: path,
            blocklist: None,
            admin_token: None,
            limits: Limits::default(),
            faults: Faults::default(),
            cache_entries,
            web: crate::web::WebConfig::default(),
        };
        load_state(&config).unwrap()
    }

    /// A suggestion is answered before routing, made or from the cache, with the headers and
    /// body the route sends, unless a fault is injected; invalid parameters reach the route.
    #[tokio::test]
    async fn suggestions_skip_the_routes_unless_invalid_or_faulty() {
        let dir = tempfile::tempdir().unwrap();
        let limits = Limits::default();
        let get = |uri: &str| Request::get(uri).body(Body::empty()).unwrap();
        let body = |r: axum::response::Response| axum::body::to_bytes(r.into_body(), 1 << 16);
        let uri = "/v1/suggest?q=new&k=2";
        let delay = Faults { suggest_delay: std::time::Duration::from_millis(1) };
        let delayed = public_router(state(dir.path(), 100), &limits, delay);
        assert!(delayed.answer_before_routing(&get(uri)).is_none(), "delayed");
        let (mut routed, routed_body) = delayed.oneshot(get(uri)).await.unwrap().into_parts();
        let routed_body = axum::body::to_bytes(routed_body, 1 << 16).await.unwrap();
        // The route's length header is axum's; hyper writes the same for an answer made here.
        routed.headers.remove(axum::http::header::CONTENT_LENGTH);
        assert!(String::from_utf8_lossy(&routed_body).contains("\"new york\""), "{routed_body:?}");
        for cache_entries in [100, 0] {
            let state = state(dir.path(), cache_entries);
            let front = public_router(Arc::clone(&state), &limits, Faults::default());
            for _ in 0..2 {
                let hot = front.answer_before_routing(&get(uri)).expect("answered before routing");
                assert_eq!(hot.headers(), &routed.headers, "{cache_entries} entries");
                assert_eq!(body(hot).await.unwrap(), routed_body, "{cache_entries} entries");
            }
            let m = &state.metrics;
            let counted = (m.answer_cache_hits.get(), m.answer_cache_misses.get());
            assert_eq!(counted, if cache_entries > 0 { (1, 1) } else { (0, 2) });
        }
        let state = state(dir.path(), 100);
        let invalid = public_router(Arc::clone(&state), &limits, Faults::default());
        assert!(invalid.answer_before_routing(&get("/v1/suggest?k=x")).is_none());
        let error = invalid.oneshot(get("/v1/suggest?k=x")).await.unwrap();
        assert_eq!(error.status(), axum::http::StatusCode::BAD_REQUEST);
        assert_eq!(state.metrics.answer_cache_misses.get(), 0, "an invalid request is no miss");
    }

    /// What a half-written file's complete lines add is blocked at once; a fragment of its
    /// last line ("wea" of "weather") is not.
    #[test]
    fn only_complete_lines_join_the_list_in_force() {
        let in_force = Blocklist::parse("term\n").unwrap();
        let union = with_complete_lines(&in_force, "weather\nwea").unwrap();
        assert_eq!(union.entries(), ["term", "weather"]);
        assert_eq!(with_complete_lines(&in_force, "wea").unwrap().entries(), ["term"]);
        assert_eq!(
            with_complete_lines(&in_force, "a\r\nb\rc").unwrap().entries(),
            ["a", "b", "term"]
        );
    }
}
