//! An answer serialized once, with its caching headers, ready to be sent any number of times:
//! what the server keeps in its answer cache ([`crate::cache`]), so a hit costs a map lookup
//! and two reference-count increments instead of a lookup, a serialization and header parsing.

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::Response;

/// The body and headers of a cacheable suggestion answer.
#[derive(Debug, Clone)]
pub struct Prepared {
    body: Bytes,
    content_type: HeaderValue,
    etag: HeaderValue,
    version: HeaderValue,
}

impl Prepared {
    /// `body` (of `content_type`), identified by `etag`, answered by snapshot `version`.
    /// `None` when the ETag or version cannot be a header value (they are made of hex digits,
    /// dashes and quotes; anything else is a bug the caller answers with an error).
    pub fn new(
        body: Vec<u8>,
        content_type: &'static str,
        etag: &str,
        version: &str,
    ) -> Option<Self> {
        Some(Prepared {
            body: Bytes::from(body),
            content_type: HeaderValue::from_static(content_type),
            etag: HeaderValue::from_str(etag).ok()?,
            version: HeaderValue::from_str(version).ok()?,
        })
    }

    /// The body's length in bytes.
    pub fn body_len(&self) -> usize {
        self.body.len()
    }

    /// The answer, or 304 Not Modified when the request's `If-None-Match` names its ETag.
    pub fn respond(&self, request: &HeaderMap) -> Response {
        let fresh = self.etag.to_str().is_ok_and(|tag| super::not_modified(request, tag));
        let mut response = if fresh {
            let mut response = Response::new(Body::empty());
            *response.status_mut() = StatusCode::NOT_MODIFIED;
            response
        } else {
            let mut response = Response::new(Body::from(self.body.clone()));
            response.headers_mut().insert(header::CONTENT_TYPE, self.content_type.clone());
            response
        };
        let (version, etag) = (Some(self.version.clone()), Some(self.etag.clone()));
        super::set_cache_headers(response.headers_mut(), version, etag, true);
        response
    }
}
