//! strata's spans exported by OTLP over HTTP (feature `otel`), off unless configured.
//!
//! The library crates open `tracing` spans where the work happens (`prepare_context`,
//! `compact`, one `execute_tool {name}` per tool call with a `search_memory` or
//! `upsert_memory` span inside it, `chat {model}` and `embeddings {model}` for each model call),
//! named and attributed as OpenTelemetry's GenAI semantic conventions say. Without a
//! subscriber that wants them a span is one disabled-callsite check, so they cost nothing when
//! tracing is off. This module is the edge that sends them somewhere: [`Telemetry::from_env`]
//! reads the standard `OTEL_*` variables and gives a [`tracing_subscriber::Layer`] to add to
//! the application's subscriber, and a guard that flushes on drop.
//!
//! ```no_run
//! use tracing_subscriber::layer::SubscriberExt;
//! use tracing_subscriber::util::SubscriberInitExt;
//!
//! # fn main() -> Result<(), strata::otel::OtelError> {
//! // None unless OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set.
//! let telemetry = strata::otel::Telemetry::from_env()?;
//! tracing_subscriber::registry().with(telemetry.as_ref().map(|t| t.layer())).init();
//! // ... use strata; dropping `telemetry` (or `shutdown`) sends the spans still buffered.
//! # Ok(()) }
//! ```
//!
//! Only spans are exported, never events: an event's message may quote stored text, and the
//! spans carry ids, names and counts only (no message text, no query, no memory's text).

use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_http::{Bytes, HttpClient, HttpError, Request, Response};
use opentelemetry_otlp::{Protocol, WithExportConfig as _, WithHttpConfig as _};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_subscriber::Layer;
use tracing_subscriber::registry::LookupSpan;

/// The variables that turn export on: the standard OTLP endpoint, or the one for traces alone.
const ENDPOINT_VARIABLES: [&str; 2] = ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"];

/// How long one export may take before it is given up (the collector is usually local; a
/// slow one must not hold the process's exit for long).
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

/// What setting up the export can fail with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OtelError {
    /// The HTTP client could not be built (the TLS backend did not initialize).
    #[error("cannot build the OTLP exporter's HTTP client")]
    Client(#[source] reqwest::Error),
    /// The exporter refused its configuration (an endpoint that is not a URL, say).
    #[error("cannot build the OTLP exporter")]
    Exporter(#[source] opentelemetry_otlp::ExporterBuildError),
    /// Flushing or shutting down the exporter failed (the collector did not answer).
    #[error("cannot flush the OTLP exporter")]
    Flush(#[source] opentelemetry_sdk::error::OTelSdkError),
    /// The thread building the HTTP client panicked.
    #[error("the thread building the OTLP exporter's HTTP client panicked")]
    ClientThread,
}

/// The export of strata's spans to an OTLP/HTTP collector. Dropping it flushes and shuts the
/// exporter down; [`Telemetry::shutdown`] does the same and says whether it worked.
#[derive(Debug)]
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
}

impl Telemetry {
    /// The export the environment asks for: `None` (off) unless `OTEL_EXPORTER_OTLP_ENDPOINT`
    /// (spans go to its `/v1/traces`) or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (spans go to it
    /// as it is) is set and `OTEL_SDK_DISABLED` is not `true`. `OTEL_EXPORTER_OTLP_HEADERS` and
    /// `OTEL_SERVICE_NAME` (default `strata`) apply as the specification says.
    pub fn from_env() -> Result<Option<Telemetry>, OtelError> {
        let disabled =
            std::env::var("OTEL_SDK_DISABLED").is_ok_and(|value| value.trim().eq_ignore_ascii_case("true"));
        let configured = ENDPOINT_VARIABLES
            .iter()
            .any(|name| std::env::var(name).is_ok_and(|value| !value.trim().is_empty()));
        if disabled || !configured {
            return Ok(None);
        }
        // The exporter reads the endpoint, headers and timeout from the same variables.
        Telemetry::start(None).map(Some)
    }

    /// The export to `endpoint`, the full URL of a collector's traces (e.g.
    /// `http://127.0.0.1:4318/v1/traces`), whatever the environment says of the endpoint.
    pub fn to_endpoint(endpoint: &str) -> Result<Telemetry, OtelError> {
        Telemetry::start(Some(endpoint))
    }

    fn start(endpoint: Option<&str>) -> Result<Telemetry, OtelError> {
        let mut exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_http_client(BlockingHttp::new()?)
            .with_protocol(Protocol::HttpBinary)
            .with_timeout(EXPORT_TIMEOUT);
        if let Some(endpoint) = endpoint {
            exporter = exporter.with_endpoint(endpoint);
        }
        let exporter = exporter.build().map_err(OtelError::Exporter)?;
        let service = std::env::var("OTEL_SERVICE_NAME").unwrap_or_else(|_| "strata".to_owned());
        let provider = SdkTracerProvider::builder()
            .with_resource(Resource::builder().with_service_name(service).build())
            .with_batch_exporter(exporter)
            .build();
        Ok(Telemetry { provider: Some(provider) })
    }

    /// The layer that turns strata's spans (level `INFO` and above) into OpenTelemetry spans
    /// for this export. Events are left out (see the module's documentation).
    pub fn layer<S>(&self) -> impl Layer<S> + use<S>
    where
        S: tracing::Subscriber + for<'span> LookupSpan<'span>,
    {
        let tracer = self.provider.as_ref().map(|provider| provider.tracer("strata"));
        let spans_only = tracing_subscriber::filter::filter_fn(|meta| {
            meta.is_span() && *meta.level() <= tracing::Level::INFO
        });
        tracer.map(|tracer| {
            tracing_opentelemetry::layer()
                .with_tracer(tracer)
                .with_error_records_to_exceptions(false)
                .with_filter(spans_only)
        })
    }

    /// Sends every span ended so far and waits for the collector's answer.
    pub fn flush(&self) -> Result<(), OtelError> {
        match &self.provider {
            Some(provider) => provider.force_flush().map_err(OtelError::Flush),
            None => Ok(()),
        }
    }

    /// Sends what is buffered and stops the export.
    pub fn shutdown(mut self) -> Result<(), OtelError> {
        match self.provider.take() {
            Some(provider) => provider.shutdown().map_err(OtelError::Flush),
            None => Ok(()),
        }
    }
}

impl Drop for Telemetry {
    fn drop(&mut self) {
        if let Some(provider) = self.provider.take() {
            // Nowhere to report it: the collector not answering must not fail the program.
            let _ = provider.shutdown();
        }
    }
}

/// The exporter's HTTP client: the workspace's reqwest, blocking. The SDK's batch processor
/// exports from a thread of its own with a minimal executor, where an async client finds no
/// tokio runtime; a blocking one needs none.
#[derive(Debug)]
struct BlockingHttp(reqwest::blocking::Client);

impl BlockingHttp {
    /// Built on a thread of its own: a blocking client made (or dropped) on a tokio worker
    /// panics, and a host may call [`Telemetry::from_env`] from one.
    fn new() -> Result<BlockingHttp, OtelError> {
        let built =
            std::thread::spawn(|| reqwest::blocking::Client::builder().timeout(EXPORT_TIMEOUT).build())
                .join()
                .map_err(|_| OtelError::ClientThread)?;
        built.map(BlockingHttp).map_err(OtelError::Client)
    }
}

#[async_trait::async_trait]
impl HttpClient for BlockingHttp {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let request = reqwest::blocking::Request::try_from(request.map(|body| body.to_vec()))?;
        let response = self.0.execute(request)?;
        let status = response.status();
        let headers = response.headers().clone();
        let body = response.bytes()?;
        let mut answer = Response::builder().status(status).body(body)?;
        *answer.headers_mut() = headers;
        Ok(answer)
    }
}
