//! `ApiError`: the one way HTTP handlers fail. Only this module knows status codes; every error
//! body is `{"error": {"code": "...", "message": "..."}}` with a stable code.

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::api::{ErrorDetail, ErrorResponse};

/// An error answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApiError {
    /// The client sent something invalid (400). Not logged above debug.
    BadRequest {
        /// Stable code, e.g. `missing_query`.
        code: &'static str,
        /// Explanation.
        message: String,
    },
    /// Missing or wrong admin token (401).
    Unauthorized,
    /// The request was understood but cannot be applied, e.g. a corrupt snapshot (422).
    Rejected {
        /// Stable code, e.g. `snapshot_rejected`.
        code: &'static str,
        /// Explanation.
        message: String,
    },
    /// Too many requests in flight: shed instead of queueing (503 + Retry-After).
    Overloaded,
    /// The change failed for a reason that may pass (a load out of time, a thread that could
    /// not start): worth trying again, unlike [`ApiError::Rejected`] (503 + Retry-After).
    Unavailable {
        /// Stable code, e.g. `reload_failed`.
        code: &'static str,
        /// Explanation.
        message: String,
    },
    /// The request took longer than the server allows (503).
    Timeout,
    /// No route (404).
    NotFound,
    /// The route exists but not for this method (405; axum adds `Allow`).
    MethodNotAllowed,
    /// The request URI is longer than the server accepts (414).
    UriTooLong,
    /// The request body is larger than the route accepts (413).
    PayloadTooLarge,
    /// The asked snapshot version is not loaded (409): the aggregator tries another replica.
    VersionUnavailable(String),
    /// A bug or an environment failure (500); the message is logged, not sent.
    Internal(String),
}

impl ApiError {
    /// A 400 with a code and message.
    pub fn bad_request(code: &'static str, message: impl Into<String>) -> Self {
        ApiError::BadRequest { code, message: message.into() }
    }

    /// The stable code of this error.
    pub fn code(&self) -> &'static str {
        match self {
            ApiError::BadRequest { code, .. }
            | ApiError::Rejected { code, .. }
            | ApiError::Unavailable { code, .. } => code,
            ApiError::Unauthorized => "unauthorized",
            ApiError::Overloaded => "overloaded",
            ApiError::Timeout => "timeout",
            ApiError::NotFound => "not_found",
            ApiError::MethodNotAllowed => "method_not_allowed",
            ApiError::UriTooLong => "uri_too_long",
            ApiError::PayloadTooLarge => "payload_too_large",
            ApiError::VersionUnavailable(_) => "version_unavailable",
            ApiError::Internal(_) => "internal",
        }
    }

    fn status(&self) -> StatusCode {
        match self {
            ApiError::BadRequest { .. } => StatusCode::BAD_REQUEST,
            ApiError::Unauthorized => StatusCode::UNAUTHORIZED,
            ApiError::Rejected { .. } => StatusCode::UNPROCESSABLE_ENTITY,
            ApiError::Overloaded | ApiError::Timeout | ApiError::Unavailable { .. } => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            ApiError::NotFound => StatusCode::NOT_FOUND,
            ApiError::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::UriTooLong => StatusCode::URI_TOO_LONG,
            ApiError::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::VersionUnavailable(_) => StatusCode::CONFLICT,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn message(&self) -> String {
        match self {
            ApiError::BadRequest { message, .. }
            | ApiError::Rejected { message, .. }
            | ApiError::Unavailable { message, .. } => message.clone(),
            ApiError::Unauthorized => "a valid admin bearer token is required".into(),
            ApiError::Overloaded => "too many requests in flight; retry shortly".into(),
            ApiError::Timeout => "the request took too long".into(),
            ApiError::NotFound => "no such route".into(),
            ApiError::MethodNotAllowed => "this route does not take that method".into(),
            ApiError::UriTooLong => "the request URI is too long".into(),
            ApiError::PayloadTooLarge => "the request body is too large".into(),
            ApiError::VersionUnavailable(v) => format!("snapshot version {v} is not loaded here"),
            ApiError::Internal(_) => "internal error".into(),
        }
    }
}

/// The JSON error body, serialized: for answers written outside axum (see `server::listen`).
pub fn error_body(code: &str, message: &str) -> Vec<u8> {
    let body = ErrorResponse { error: ErrorDetail { code: code.into(), message: message.into() } };
    serde_json::to_vec(&body).unwrap_or_default()
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if let ApiError::Internal(detail) = &self {
            tracing::error!(error = %detail, "internal error");
        }
        let body = ErrorResponse {
            error: ErrorDetail { code: self.code().into(), message: self.message() },
        };
        let mut response = (self.status(), Json(body)).into_response();
        let headers = response.headers_mut();
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        match self {
            ApiError::Overloaded | ApiError::Timeout | ApiError::Unavailable { .. } => {
                headers.insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
            }
            ApiError::Unauthorized => {
                headers.insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            }
            _ => {}
        }
        response
    }
}

pub use typeahead_core::report::chain;
