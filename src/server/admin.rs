//! Admin routes: `POST /admin/reload`, `GET`/`PUT /admin/blocklist`. Every request needs
//! `Authorization: Bearer <token>`; a wrong or missing token gets 401 and changes nothing.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::Json;
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::{get, post};
use serde::Serialize;

use super::AppState;
use crate::blocklist::Blocklist;
use crate::error::ApiError;
use crate::store::ActiveBlocklist;

/// Largest blocklist body accepted.
pub(super) const MAX_BLOCKLIST_BYTES: usize = 4 << 20;

/// The admin routes; a blocklist upload must arrive whole within `body_timeout`.
pub(super) fn router(state: AppState, body_timeout: Duration) -> Router<AppState> {
    let put = move |State(state): State<AppState>, body: Body| async move {
        let body = read_body(body, body_timeout).await?;
        put_blocklist(state, body).await
    };
    Router::new()
        .route("/admin/reload", post(reload))
        .route("/admin/blocklist", get(get_blocklist).put(put))
        .route_layer(middleware::from_fn_with_state(state, authorize))
}

/// Reads a whole body of at most [`MAX_BLOCKLIST_BYTES`] within `timeout`.
///
/// The deadline covers the whole body, not the gap between chunks: a client that trickles a
/// byte now and then must not hold the admin listener for hours. Only the read is timed; once
/// a change is being applied, it finishes.
async fn read_body(body: Body, timeout: Duration) -> Result<Bytes, ApiError> {
    match tokio::time::timeout(timeout, axum::body::to_bytes(body, MAX_BLOCKLIST_BYTES)).await {
        Ok(Ok(bytes)) => Ok(bytes),
        Ok(Err(e)) => {
            let e = e.into_inner();
            if e.is::<http_body_util::LengthLimitError>() {
                Err(ApiError::PayloadTooLarge)
            } else {
                Err(ApiError::bad_request("unreadable_body", format!("cannot read the body: {e}")))
            }
        }
        Err(_) => Err(ApiError::bad_request(
            "unreadable_body",
            format!("the body did not arrive within {} ms", timeout.as_millis()),
        )),
    }
}

/// Whether `presented` is `secret`, in time that depends neither on where the bytes differ
/// nor on how long `presented` is (`subtle`, the dalek cryptography project's constant-time
/// primitives). `subtle`'s own slice comparison returns at once when the lengths differ, which
/// would let a client time its way to the token's length; this walks the secret's length
/// whatever was presented.
fn constant_time_eq(presented: &[u8], secret: &[u8]) -> bool {
    use subtle::ConstantTimeEq;
    let mut same = presented.len().ct_eq(&secret.len());
    for (i, byte) in secret.iter().enumerate() {
        same &= presented.get(i).unwrap_or(&0).ct_eq(byte);
    }
    same.into()
}

/// The credentials of a `Bearer` authorization: the scheme is case-insensitive and separated
/// from the token by one or more spaces (RFC 9110, section 11.4).
fn bearer_token(value: &str) -> Option<&str> {
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim_start_matches(' '))
}

/// Why an admin token file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// It cannot be read (missing, not a regular file, too large).
    #[error("cannot read admin token file {path}")]
    Read {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Group or others may access it.
    #[error(
        "admin token file {path} is accessible by group or others (mode {mode:03o}); run chmod 600 on it"
    )]
    Exposed {
        /// The file.
        path: std::path::PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// The token is too short to be a secret.
    #[error("the admin token in {path} must be at least 16 characters")]
    TooShort {
        /// The file.
        path: std::path::PathBuf,
    },
}

/// Longest admin token file read.
const MAX_TOKEN_BYTES: u64 = 4096;

/// Reads the admin token from `path`: at least 16 characters, in a regular file that neither
/// group nor others may read (like ssh with a private key: a token others can read is no
/// secret).
pub fn read_token(path: &std::path::Path) -> Result<String, TokenError> {
    use std::os::unix::fs::PermissionsExt;
    let read_err = |source| TokenError::Read { path: path.to_owned(), source };
    let (file, meta) = typeahead_core::file::open_regular(path).map_err(read_err)?;
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(TokenError::Exposed { path: path.to_owned(), mode });
    }
    // Read through the handle whose permissions were checked: opening the path again could
    // read another file put there in between.
    let mut token = String::new();
    std::io::Read::read_to_string(&mut std::io::Read::take(file, MAX_TOKEN_BYTES + 1), &mut token)
        .map_err(read_err)?;
    if token.len() as u64 > MAX_TOKEN_BYTES {
        let too_long = std::io::Error::new(std::io::ErrorKind::InvalidData, "over 4 KiB");
        return Err(read_err(too_long));
    }
    let token = token.trim().to_owned();
    if token.len() < 16 {
        return Err(TokenError::TooShort { path: path.to_owned() });
    }
    Ok(token)
}

async fn authorize(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Result<Response, ApiError> {
    let Some(token) = &state.admin_token else { return Err(ApiError::NotFound) };
    let presented = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(bearer_token)
        .unwrap_or("");
    if !constant_time_eq(presented.as_bytes(), token.as_bytes()) {
        state.metrics.admin_rejected.inc();
        state.rejections_logged.record(request.uri().path());
        return Err(ApiError::Unauthorized);
    }
    Ok(next.run(request).await)
}

/// The audit log of rejected admin requests, one line a second at most, each saying how many
/// rejections it leaves out: a client guessing tokens must not turn into a flood of log lines.
/// Every rejection is counted in `typeahead_admin_rejected`.
#[derive(Debug)]
pub struct RejectionLog {
    start: std::time::Instant,
    /// The second (since `start`, plus one) of the last line; 0 before the first.
    last: AtomicU64,
    /// Rejections since the last line that it did not report.
    unlogged: AtomicU64,
}

impl Default for RejectionLog {
    fn default() -> RejectionLog {
        RejectionLog {
            start: std::time::Instant::now(),
            last: AtomicU64::new(0),
            unlogged: AtomicU64::new(0),
        }
    }
}

impl RejectionLog {
    /// Records a rejection of a request for `path`. When it logs a line, the number of
    /// rejections that line reports as left out before it.
    fn record(&self, path: &str) -> Option<u64> {
        let second = self.start.elapsed().as_secs() + 1;
        let last = self.last.load(Ordering::Relaxed);
        if second > last
            && self
                .last
                .compare_exchange(last, second, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            let left_out = self.unlogged.swap(0, Ordering::Relaxed);
            tracing::warn!(target: "audit", path, left_out, "admin request rejected: bad token");
            return Some(left_out);
        }
        self.unlogged.fetch_add(1, Ordering::Relaxed);
        None
    }
}

#[derive(Serialize)]
struct Reloaded {
    version: String,
    keys: usize,
}

async fn reload(State(state): State<AppState>) -> Result<Json<Reloaded>, ApiError> {
    tracing::info!(target: "audit", path = %state.store.path().display(), "reload requested via admin api");
    // A task of its own, as a blocklist change is: a client that gives up (a short
    // `curl --max-time` on a large snapshot) would otherwise cancel the load with the handler.
    let store = Arc::clone(&state.store);
    let reloaded = tokio::spawn(async move { store.reload().await });
    match reloaded.await.map_err(|e| ApiError::Internal(e.to_string()))? {
        Ok(served) => Ok(Json(Reloaded {
            version: served.snapshot.id().to_owned(),
            keys: served.snapshot.len(),
        })),
        Err(e) => Err(reload_failed(&e)),
    }
}

/// Writes the blocklist file. A write that fails while the file holds the new list (the rename
/// done and the directory's fsync failed, or a list sent again that the file already held)
/// counts as saved: the file watcher would apply that list anyway, so answering "unchanged"
/// would be untrue a second later.
fn save(path: &std::path::Path, body: &[u8]) -> Result<(), ApiError> {
    let Err(e) = crate::atomic::write_following(path, body) else { return Ok(()) };
    if holds(path, body) {
        tracing::warn!(
            path = %path.display(),
            error = %crate::error::chain(&e),
            "writing the blocklist file failed, but it holds the new list (if the failure came \
             after the rename, a power cut may still bring back the old file); applying it"
        );
        return Ok(());
    }
    Err(not_saved(path, &e))
}

/// Whether the file at `path` (its links followed) holds exactly `body`. Read as a regular
/// file of at most that length: a FIFO put there would block the change's turn for good.
fn holds(path: &std::path::Path, body: &[u8]) -> bool {
    let limit = body.len() as u64;
    typeahead_core::file::read_regular(path, limit).is_ok_and(|now| now == body)
}

/// A blocklist change that could not be written to its file: 503 with Retry-After for a
/// failure that may pass ([`crate::atomic::may_pass`]), else 422, which trying again does not mend.
fn not_saved(file: &std::path::Path, e: &std::io::Error) -> ApiError {
    let message = format!(
        "cannot write the blocklist file {} ({}); the list in force is unchanged",
        file.display(),
        crate::error::chain(e)
    );
    let code = "blocklist_not_saved";
    if crate::atomic::may_pass(e) {
        ApiError::Unavailable { code, message }
    } else {
        ApiError::Rejected { code, message }
    }
}

/// A failed reload's answer: 422 for a file rejected, 503 for a failure that may pass (the
/// file watcher tries those again too), so a script is not told a good file is corrupt.
fn reload_failed(e: &crate::store::StoreError) -> ApiError {
    let message = crate::error::chain(e);
    if e.is_transient() {
        ApiError::Unavailable { code: "reload_failed", message }
    } else {
        ApiError::Rejected { code: "snapshot_rejected", message }
    }
}

#[derive(Serialize)]
struct BlocklistView<'a> {
    version: &'a str,
    entries: &'a [String],
    source: &'a str,
    applied_unix: i64,
    hidden: usize,
}

async fn get_blocklist(State(state): State<AppState>) -> Json<serde_json::Value> {
    let served = state.store.current();
    let b = &served.blocklist;
    let view = BlocklistView {
        version: &b.version,
        entries: b.list.entries(),
        source: &b.source,
        applied_unix: b.applied_unix,
        hidden: served.hidden(),
    };
    Json(serde_json::to_value(view).unwrap_or_default())
}

/// Blocklist changes accepted at once (applied one at a time); a `PUT` past them is answered
/// 503 with Retry-After.
pub const MAX_PENDING_CHANGES: usize = 4;

async fn put_blocklist(state: AppState, body: Bytes) -> Result<Json<serde_json::Value>, ApiError> {
    // Nowhere to save it: applied, the list would be gone at the next restart, and its terms
    // served again without a word.
    let Some(saved_to) = state.blocklist_path.clone() else {
        tracing::warn!(target: "audit", "blocklist change refused: no --blocklist FILE to save it to");
        let message = "the list in force is unchanged: this server has no --blocklist FILE to \
                       save a list to, and one not saved would be lost at the next restart"
            .to_owned();
        return Err(ApiError::Rejected { code: "blocklist_not_saved", message });
    };
    let pending = Arc::clone(&state.blocklist_pending);
    let Ok(place) = pending.try_acquire_owned() else {
        tracing::warn!(target: "audit", "blocklist change refused: {MAX_PENDING_CHANGES} are pending");
        return Err(ApiError::Overloaded);
    };
    let text = std::str::from_utf8(&body).map_err(|_| {
        ApiError::bad_request("invalid_blocklist", "the blocklist must be UTF-8 text")
    })?;
    let text = text.to_owned();
    // A task of its own: a client that disconnects (or gives up) mid-change drops this
    // handler, and with it the change half done (the file written, the list never published).
    let change = tokio::spawn(async move {
        let _place = place;
        // Parsing builds an automaton over every entry: not on a worker that answers requests.
        let list = tokio::task::spawn_blocking(move || Blocklist::parse(&text))
            .await
            .map_err(|e| ApiError::Internal(e.to_string()))?
            .map_err(|e| ApiError::bad_request("invalid_blocklist", e.to_string()))?;
        let _turn = state.blocklist_turn.lock().await;
        // Persist first, so a restart keeps what operators set; the file watcher, which waits
        // for this turn, then finds the same list in force and does nothing. A list that cannot
        // be saved is not applied (a restart would silently unblock it), and the operator is
        // told why, not "internal error".
        tokio::task::spawn_blocking(move || save(&saved_to, &body))
            .await
            .map_err(|e| ApiError::Internal(e.to_string()))??;
        state
            .store
            .set_blocklist(ActiveBlocklist::new(list, "admin api"))
            .await
            .map_err(|e| ApiError::Internal(e.to_string()))
    });
    let served = change.await.map_err(|e| ApiError::Internal(e.to_string()))??;
    Ok(Json(serde_json::json!({
        "version": served.blocklist.version,
        "entries": served.blocklist.list.len(),
        "hidden": served.hidden(),
    })))
}

#[cfg(test)]
mod tests {
    use super::{RejectionLog, bearer_token, constant_time_eq, reload_failed};
    use crate::store::StoreError;

    #[test]
    fn bearer_scheme_is_case_insensitive() {
        for v in ["Bearer tok", "bearer tok", "BEARER tok", "bEaReR  tok"] {
            assert_eq!(bearer_token(v), Some("tok"), "{v}");
        }
        for v in ["Basic tok", "Bearertok", "Bearer", ""] {
            assert_ne!(bearer_token(v), Some("tok"), "{v}");
        }
    }

    /// A reload that may work when tried again is a 503 with Retry-After, not a rejected file.
    #[test]
    fn a_transient_reload_failure_is_not_a_rejection() {
        use axum::response::IntoResponse;
        let transient = reload_failed(&StoreError::Panicked).into_response();
        assert_eq!(transient.status(), 503);
        assert!(transient.headers().contains_key("retry-after"));
        let path = std::path::PathBuf::from("live.snap");
        let io = std::io::Error::other("no such thing");
        let rejected = reload_failed(&StoreError::Place { path, source: io }).into_response();
        assert_eq!(rejected.status(), 422);
    }

    /// A burst of rejections logs one line, and the next second's line reports the others.
    #[test]
    fn rejections_are_logged_once_a_second() {
        let log = RejectionLog::default();
        let lines: Vec<u64> = (0..1000).filter_map(|_| log.record("/admin/reload")).collect();
        // The burst may straddle the turn of a second, at most once.
        assert!((1..=2).contains(&lines.len()), "{} lines", lines.len());
        assert_eq!(lines[0], 0, "nothing was left out before the first line");
        std::thread::sleep(std::time::Duration::from_millis(1100));
        let reported = log.record("/admin/reload").expect("a line in the next second");
        assert_eq!(lines.iter().sum::<u64>() + reported + lines.len() as u64, 1000);
    }

    #[test]
    fn token_comparison() {
        assert!(constant_time_eq(b"secret", b"secret"));
        assert!(!constant_time_eq(b"secret", b"secreT"));
        assert!(!constant_time_eq(b"secret", b"secret2"));
        assert!(!constant_time_eq(b"", b"x"));
        assert!(constant_time_eq(b"", b""));
        assert!(!constant_time_eq(b"secre", b"secret"), "a prefix of the secret");
        assert!(!constant_time_eq(b"sec", b"sec\0\0"), "short, where the secret holds zeros");
        assert!(!constant_time_eq(b"secret\0", b"secret"));
    }

    /// A server's state over a snapshot of "bomb threat" and "news" written in `dir`.
    fn serving(dir: &std::path::Path, blocklist: Option<std::path::PathBuf>) -> super::AppState {
        use crate::snapshot::{self, BuildInfo, Entry};

        let snap = dir.join("s.snap");
        let entries = [("bomb threat", 2.0), ("news", 1.0)].map(|(key, score)| Entry {
            key: key.into(),
            display: None,
            score,
        });
        snapshot::write_file(&snap, &entries, &BuildInfo::default()).unwrap();
        let config = crate::server::ServeConfig {
            snapshot: snap,
            blocklist,
            admin_token: None,
            limits: crate::http::Limits::default(),
            faults: crate::server::Faults::default(),
            cache_entries: 0,
            web: crate::web::WebConfig::default(),
        };
        crate::server::load_state(&config).unwrap()
    }

    /// A `PUT` whose client goes away while the change waits its turn (behind a reload, say):
    /// the change still happens, file and list both.
    #[tokio::test]
    async fn a_change_finishes_when_its_client_goes_away() {
        use std::future::Future;
        use std::task::{Context, Poll, Waker};

        let dir = tempfile::tempdir().unwrap();
        let listed = dir.path().join("blocked.txt");
        std::fs::write(&listed, "").unwrap();
        let state = serving(dir.path(), Some(listed.clone()));
        let turn = state.blocklist_turn.lock().await;
        let mut put = Box::pin(super::put_blocklist(state.clone(), "bomb\n".into()));
        let polled = put.as_mut().poll(&mut Context::from_waker(Waker::noop()));
        assert!(matches!(polled, Poll::Pending), "the change waits for its turn");
        drop(put); // the client went away
        drop(turn);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while state.store.current().blocklist.list.is_empty()
            && std::time::Instant::now() < deadline
        {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        assert_eq!(state.store.current().blocklist.list.len(), 1);
        assert_eq!(std::fs::read_to_string(&listed).unwrap(), "bomb\n");
    }

    /// A change that cannot be saved is not applied, and the answer says why.
    #[tokio::test]
    async fn a_change_that_cannot_be_saved_says_so_and_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let sub = dir.path().join("lists");
        std::fs::create_dir(&sub).unwrap();
        let listed = sub.join("blocked.txt");
        std::fs::write(&listed, "").unwrap();
        let state = serving(dir.path(), Some(listed));
        std::fs::remove_dir_all(&sub).unwrap();
        let refused = super::put_blocklist(state.clone(), "bomb\n".into()).await.unwrap_err();
        // The directory is gone: trying again does not mend that (422, no Retry-After).
        let crate::error::ApiError::Rejected { code, message } = &refused else {
            panic!("{refused:?}")
        };
        assert_eq!(*code, "blocklist_not_saved");
        assert!(message.contains("blocked.txt") && message.contains("unchanged"), "{message}");
        assert!(state.store.current().blocklist.list.is_empty());
    }

    /// A server without a blocklist file refuses a change: applied in memory only, it would
    /// be lost at the next restart, and its terms served again.
    #[tokio::test]
    async fn a_change_with_no_file_to_save_it_to_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let state = serving(dir.path(), None);
        let refused = super::put_blocklist(state.clone(), "bomb\n".into()).await.unwrap_err();
        let crate::error::ApiError::Rejected { code, message } = &refused else {
            panic!("{refused:?}")
        };
        assert_eq!(*code, "blocklist_not_saved");
        assert!(message.contains("--blocklist FILE"), "{message}");
        assert!(state.store.current().blocklist.list.is_empty());
    }

    /// What decides whether a failed write saved the list anyway: the file's bytes, read
    /// through its links, are the new list's, exactly.
    #[test]
    fn a_write_that_failed_late_is_told_by_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("managed.txt");
        let link = dir.path().join("blocked.txt");
        std::fs::write(&file, "bomb\n").unwrap();
        std::os::unix::fs::symlink(&file, &link).unwrap();
        assert!(super::holds(&link, b"bomb\n"));
        assert!(!super::holds(&link, b"bomb\nmore\n"));
        assert!(!super::holds(&link, b"bomb"));
        assert!(!super::holds(&dir.path().join("missing.txt"), b""));
    }

    /// A reload whose client goes away once it has started still publishes the new file.
    #[tokio::test]
    async fn a_reload_finishes_when_its_client_goes_away() {
        use std::future::Future;
        use std::task::{Context, Poll, Waker};

        let dir = tempfile::tempdir().unwrap();
        let state = serving(dir.path(), None);
        let before = state.store.current().snapshot.id().to_owned();
        // Large enough that its load is still running when the handler is dropped.
        let entries: Vec<crate::snapshot::Entry> = (0..200_000)
            .map(|i| crate::snapshot::Entry {
                key: format!("key {i:07}"),
                display: None,
                score: 1.0,
            })
            .collect();
        let info = crate::snapshot::BuildInfo::default();
        crate::snapshot::write_file(&dir.path().join("s.snap"), &entries, &info).unwrap();
        let mut reload = Box::pin(super::reload(axum::extract::State(state.clone())));
        let polled = reload.as_mut().poll(&mut Context::from_waker(Waker::noop()));
        assert!(matches!(polled, Poll::Pending), "the load has started");
        drop(reload); // the client went away
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while state.store.current().snapshot.id() == before && std::time::Instant::now() < deadline
        {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        assert_eq!(state.store.current().snapshot.len(), 200_000);
    }

    /// Changes waiting their turn are bounded: one past the limit is refused at once (503),
    /// and a place frees when a change is done.
    #[tokio::test]
    async fn pending_changes_are_bounded() {
        use std::future::Future;
        use std::task::{Context, Poll, Waker};

        let dir = tempfile::tempdir().unwrap();
        let listed = dir.path().join("blocked.txt");
        std::fs::write(&listed, "").unwrap();
        let state = serving(dir.path(), Some(listed));
        let turn = state.blocklist_turn.lock().await;
        let mut waiting = Vec::new();
        for i in 0..super::MAX_PENDING_CHANGES {
            let mut put = Box::pin(super::put_blocklist(state.clone(), format!("w{i}\n").into()));
            let polled = put.as_mut().poll(&mut Context::from_waker(Waker::noop()));
            assert!(matches!(polled, Poll::Pending), "change {i} waits for its turn");
            waiting.push(put);
        }
        let refused = super::put_blocklist(state.clone(), "x\n".into()).await;
        assert!(matches!(refused, Err(crate::error::ApiError::Overloaded)), "{:?}", refused.err());
        drop(turn);
        for put in waiting {
            assert!(put.await.is_ok());
        }
        assert!(super::put_blocklist(state.clone(), "x\n".into()).await.is_ok());
    }
}
