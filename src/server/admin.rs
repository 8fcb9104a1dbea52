//! Admin routes: `POST /admin/reload`, `GET`/`PUT /admin/blocklist`. Every request needs
//! `Authorization: Bearer <token>`; a wrong or missing token gets 401 and changes nothing.

use axum::Json;
use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, Request, State};
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

pub(super) fn router(state: AppState) -> Router<AppState> {
    Router::new()
        .route("/admin/reload", post(reload))
        .route("/admin/blocklist", get(get_blocklist).put(put_blocklist))
        .layer(DefaultBodyLimit::max(MAX_BLOCKLIST_BYTES))
        .route_layer(middleware::from_fn_with_state(state, authorize))
}

/// Compares in time that depends only on the lengths, not on where the bytes differ.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let mut diff = a.len() ^ b.len();
    for i in 0..a.len().max(b.len()) {
        diff |= usize::from(a.get(i).copied().unwrap_or(0) ^ b.get(i).copied().unwrap_or(0));
    }
    diff == 0
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
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("");
    if !constant_time_eq(presented.as_bytes(), token.as_bytes()) {
        tracing::warn!(target: "audit", path = request.uri().path(), "admin request rejected: bad token");
        return Err(ApiError::Unauthorized);
    }
    Ok(next.run(request).await)
}

#[derive(Serialize)]
struct Reloaded {
    version: String,
    keys: usize,
}

async fn reload(State(state): State<AppState>) -> Result<Json<Reloaded>, ApiError> {
    tracing::info!(target: "audit", path = %state.store.path().display(), "reload requested via admin api");
    match state.store.reload().await {
        Ok(served) => Ok(Json(Reloaded {
            version: served.snapshot.id().to_owned(),
            keys: served.snapshot.len(),
        })),
        Err(e) => Err(ApiError::Rejected { code: "snapshot_rejected", message: e.to_string() }),
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

async fn put_blocklist(
    State(state): State<AppState>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<serde_json::Value>, ApiError> {
    // Our JSON errors instead of axum's plain-text rejections: too large, or a body that could
    // not be read (cut off, or slower than the admin body timeout).
    let body = body.map_err(|e| match e.status() {
        axum::http::StatusCode::PAYLOAD_TOO_LARGE => ApiError::PayloadTooLarge,
        _ => ApiError::bad_request("unreadable_body", e.body_text()),
    })?;
    let text = std::str::from_utf8(&body).map_err(|_| {
        ApiError::bad_request("invalid_blocklist", "the blocklist must be UTF-8 text")
    })?;
    let list = Blocklist::parse(text)
        .map_err(|e| ApiError::bad_request("invalid_blocklist", e.to_string()))?;
    if let Some(path) = state.blocklist_path.clone() {
        // Persist first, so a restart keeps what operators set; the file watcher then sees the
        // same version and does nothing.
        let bytes = body.to_vec();
        tokio::task::spawn_blocking(move || crate::atomic::write(&path, &bytes))
            .await
            .map_err(|e| ApiError::Internal(e.to_string()))?
            .map_err(|e| ApiError::Internal(format!("cannot write the blocklist file: {e}")))?;
    }
    let served = state
        .store
        .set_blocklist(ActiveBlocklist::new(list, "admin api"))
        .await
        .map_err(|e| ApiError::Internal(e.to_string()))?;
    Ok(Json(serde_json::json!({
        "version": served.blocklist.version,
        "entries": served.blocklist.list.len(),
        "hidden": served.hidden(),
    })))
}

#[cfg(test)]
mod tests {
    use super::constant_time_eq;

    #[test]
    fn token_comparison() {
        assert!(constant_time_eq(b"secret", b"secret"));
        assert!(!constant_time_eq(b"secret", b"secreT"));
        assert!(!constant_time_eq(b"secret", b"secret2"));
        assert!(!constant_time_eq(b"", b"x"));
        assert!(constant_time_eq(b"", b""));
    }
}
