//! The server's own counters, in the Prometheus text format beside the engine's
//! ([`strata::Engine::metrics`]): requests by route, method and status, each route's latency as
//! a histogram, and the requests in flight. Routes are counted by pattern, never by path, so a
//! client cannot grow the label set.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

/// The histogram's upper bounds, in seconds.
const BUCKETS: [f64; 12] = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0];

/// What the server counts.
#[derive(Debug, Default)]
pub struct HttpMetrics {
    requests: Mutex<BTreeMap<(&'static str, &'static str, u16), u64>>,
    latencies: Mutex<BTreeMap<&'static str, Histogram>>,
    in_flight: AtomicI64,
}

#[derive(Debug, Default)]
struct Histogram {
    counts: [u64; BUCKETS.len()],
    count: u64,
    sum: f64,
}

impl HttpMetrics {
    /// A request has started; the guard counts it until dropped.
    pub fn start(&self) -> InFlight<'_> {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        InFlight(self)
    }

    /// One request of `route` (its pattern; `unmatched` for none) answered with `status`.
    pub fn record(&self, route: &'static str, method: &'static str, status: u16, took: Duration) {
        *self
            .requests
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry((route, method, status))
            .or_default() += 1;
        let seconds = took.as_secs_f64();
        let mut latencies = self.latencies.lock().unwrap_or_else(|e| e.into_inner());
        let histogram = latencies.entry(route).or_default();
        for (bound, count) in BUCKETS.iter().zip(&mut histogram.counts) {
            if seconds <= *bound {
                *count += 1;
            }
        }
        histogram.count += 1;
        histogram.sum += seconds;
    }

    /// The Prometheus text.
    pub fn render(&self) -> String {
        let mut out = String::new();
        out.push_str(
            "# HELP strata_http_requests_total HTTP requests answered, by route, method and status.\n",
        );
        out.push_str("# TYPE strata_http_requests_total counter\n");
        for ((route, method, status), count) in self.requests.lock().unwrap_or_else(|e| e.into_inner()).iter()
        {
            let _ = writeln!(
                out,
                "strata_http_requests_total{{route=\"{route}\",method=\"{method}\",status=\"{status}\"}} {count}"
            );
        }
        out.push_str("# HELP strata_http_request_duration_seconds Time to answer a request, by route.\n");
        out.push_str("# TYPE strata_http_request_duration_seconds histogram\n");
        for (route, histogram) in self.latencies.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            for (bound, count) in BUCKETS.iter().zip(histogram.counts) {
                let _ = writeln!(
                    out,
                    "strata_http_request_duration_seconds_bucket{{route=\"{route}\",le=\"{bound}\"}} {count}"
                );
            }
            let _ = writeln!(
                out,
                "strata_http_request_duration_seconds_bucket{{route=\"{route}\",le=\"+Inf\"}} {}",
                histogram.count
            );
            let _ = writeln!(
                out,
                "strata_http_request_duration_seconds_sum{{route=\"{route}\"}} {}",
                histogram.sum
            );
            let _ = writeln!(
                out,
                "strata_http_request_duration_seconds_count{{route=\"{route}\"}} {}",
                histogram.count
            );
        }
        out.push_str("# HELP strata_http_requests_in_flight Requests being answered now.\n");
        out.push_str("# TYPE strata_http_requests_in_flight gauge\n");
        let _ = writeln!(out, "strata_http_requests_in_flight {}", self.in_flight.load(Ordering::Relaxed));
        out
    }
}

/// Counts a request in flight until dropped.
#[derive(Debug)]
pub struct InFlight<'a>(&'a HttpMetrics);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_is_counted_under_its_route_and_in_its_buckets() {
        let metrics = HttpMetrics::default();
        {
            let _flight = metrics.start();
            assert!(metrics.render().contains("strata_http_requests_in_flight 1\n"));
        }
        metrics.record("/healthz", "GET", 200, Duration::from_millis(3));
        let text = metrics.render();
        assert!(
            text.contains("strata_http_requests_total{route=\"/healthz\",method=\"GET\",status=\"200\"} 1\n")
        );
        assert!(
            text.contains(
                "strata_http_request_duration_seconds_bucket{route=\"/healthz\",le=\"0.0025\"} 0\n"
            )
        );
        assert!(
            text.contains("strata_http_request_duration_seconds_bucket{route=\"/healthz\",le=\"0.005\"} 1\n")
        );
        assert!(text.contains("strata_http_requests_in_flight 0\n"));
    }
}
