//! The server's one error answer: `{"error": {"kind", "message"}}` with the status its kind
//! implies. The kinds are the library's ([`strata::ErrorKind`]), so a bot over HTTP acts on the
//! same classes as one linking strata.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Response, StatusCode};
use strata::ErrorKind;

use super::Body;

/// A refusal or failure, as the client gets it.
#[derive(Debug)]
pub struct ApiError {
    pub kind: ErrorKind,
    pub message: String,
}

impl ApiError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> ApiError {
        ApiError { kind, message: message.into() }
    }

    pub fn invalid(message: impl Into<String>) -> ApiError {
        ApiError::new(ErrorKind::InvalidInput, message)
    }

    /// The status a kind is answered with.
    pub fn status(&self) -> StatusCode {
        match self.kind {
            ErrorKind::InvalidInput => StatusCode::BAD_REQUEST,
            ErrorKind::NotFound => StatusCode::NOT_FOUND,
            ErrorKind::Conflict => StatusCode::CONFLICT,
            ErrorKind::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            ErrorKind::Forbidden => StatusCode::FORBIDDEN,
            ErrorKind::Unauthorized => StatusCode::UNAUTHORIZED,
            ErrorKind::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            ErrorKind::Unsupported => StatusCode::NOT_IMPLEMENTED,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The JSON answer.
    pub fn response(&self) -> Response<Body> {
        let body = serde_json::json!({"error": {"kind": self.kind.as_str(), "message": self.message}});
        let mut response = Response::new(Full::new(Bytes::from(body.to_string())).boxed());
        *response.status_mut() = self.status();
        let headers = response.headers_mut();
        headers
            .insert(hyper::header::CONTENT_TYPE, hyper::header::HeaderValue::from_static("application/json"));
        if self.kind == ErrorKind::Unauthorized {
            headers
                .insert(hyper::header::WWW_AUTHENTICATE, hyper::header::HeaderValue::from_static("Bearer"));
        }
        response
    }
}

impl From<strata::Error> for ApiError {
    fn from(error: strata::Error) -> ApiError {
        let kind = error.kind();
        if kind == ErrorKind::Internal {
            // A database's or a task's own words stay in the log.
            tracing::error!(error = %strata_seam::error_chain(&error), "request failed");
            return ApiError::new(kind, "the server failed; its log has the details");
        }
        ApiError::new(kind, strata_seam::error_chain(&error))
    }
}

impl From<strata_seam::Error> for ApiError {
    fn from(error: strata_seam::Error) -> ApiError {
        ApiError::from(strata::Error::Store(error))
    }
}
