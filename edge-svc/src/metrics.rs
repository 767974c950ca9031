//! Prometheus text metrics for `/metrics` on the edge's own listener: requests by route and
//! status, and a latency histogram by route. Hand-rolled because the label set is small and
//! fixed (route labels are the static pattern texts), which keeps the edge free of a metrics
//! framework.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

/// Upper bounds in seconds; the edge's own work is sub-millisecond, so the spread covers the
/// core's reads (≤ 10 s) and its invocations (≤ 20 s).
const BUCKETS: [f64; 12] = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0, 20.0];

#[derive(Default)]
struct Histogram {
    /// Non-cumulative counts per bucket; rendering accumulates.
    buckets: [u64; BUCKETS.len()],
    sum: f64,
    count: u64,
}

#[derive(Default)]
struct Registry {
    requests: BTreeMap<(&'static str, u16), u64>,
    latency: BTreeMap<&'static str, Histogram>,
    /// A2A answers by JSON-RPC method and error code (`None`: a result).
    a2a: BTreeMap<(&'static str, Option<i64>), u64>,
}

/// Calls sent to the cores, by RPC: what answering costs in round trips.
#[derive(Default)]
pub struct CoreCalls(Mutex<BTreeMap<&'static str, u64>>);

impl CoreCalls {
    pub fn count(&self, rpc: &'static str) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()).entry(rpc).or_default() += 1;
    }
}

#[derive(Default)]
pub struct Metrics {
    registry: Mutex<Registry>,
    open_connections: AtomicUsize,
    closed_for_header_timeout: AtomicU64,
    closed_for_idle: AtomicU64,
}

/// Why the edge closed a connection itself.
#[derive(Clone, Copy, Debug)]
pub enum ConnectionClose {
    /// No request headers within the header timeout.
    HeaderTimeout,
    /// No request in flight for the idle timeout.
    Idle,
}

/// Counts one open connection until dropped.
pub struct OpenConnection<'a>(&'a Metrics);

impl Drop for OpenConnection<'_> {
    fn drop(&mut self) {
        self.0.open_connections.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        Metrics::default()
    }

    fn registry(&self) -> std::sync::MutexGuard<'_, Registry> {
        // A panic while holding the lock leaves only counters behind; keep counting.
        self.registry.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub fn observe(&self, route: &'static str, status: u16, elapsed: Duration) {
        let seconds = elapsed.as_secs_f64();
        let mut registry = self.registry();
        *registry.requests.entry((route, status)).or_default() += 1;
        let histogram = registry.latency.entry(route).or_default();
        if let Some(bucket) = BUCKETS.iter().position(|bound| seconds <= *bound) {
            histogram.buckets[bucket] += 1;
        }
        histogram.sum += seconds;
        histogram.count += 1;
    }

    pub fn connection_opened(&self) -> OpenConnection<'_> {
        self.open_connections.fetch_add(1, Ordering::Relaxed);
        OpenConnection(self)
    }

    pub fn connection_closed(&self, why: ConnectionClose) {
        let counter = match why {
            ConnectionClose::HeaderTimeout => &self.closed_for_header_timeout,
            ConnectionClose::Idle => &self.closed_for_idle,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// One `/a2a/` answer: every one is HTTP 200, so the route's status series cannot tell a
    /// task from a refusal. `method` is one the endpoint knows, or `-` (never the caller's text).
    pub fn a2a(&self, method: &'static str, error: Option<i64>) {
        *self.registry().a2a.entry((method, error)).or_default() += 1;
    }

    /// The exposition plus the gauge of MCP host-callback slots in use now and the calls sent
    /// to the cores.
    pub fn render_with(&self, callbacks_in_use: usize, core_calls: &CoreCalls) -> String {
        let mut out = self.render();
        out.push_str("# HELP world_edge_host_callbacks_in_use MCP host-callback slots in use.\n");
        out.push_str("# TYPE world_edge_host_callbacks_in_use gauge\n");
        let _ = writeln!(out, "world_edge_host_callbacks_in_use {callbacks_in_use}");
        out.push_str("# HELP world_edge_core_calls_total Calls sent to the cores, by RPC.\n");
        out.push_str("# TYPE world_edge_core_calls_total counter\n");
        for (rpc, count) in core_calls.0.lock().unwrap_or_else(|p| p.into_inner()).iter() {
            let _ = writeln!(out, "world_edge_core_calls_total{{rpc=\"{rpc}\"}} {count}");
        }
        out
    }

    /// The text exposition format, version 0.0.4.
    pub fn render(&self) -> String {
        let registry = self.registry();
        let mut out = String::new();
        out.push_str("# HELP world_edge_http_requests_total HTTP requests answered, by route and status.\n");
        out.push_str("# TYPE world_edge_http_requests_total counter\n");
        for ((route, status), count) in &registry.requests {
            let _ = writeln!(out, "world_edge_http_requests_total{{route=\"{route}\",status=\"{status}\"}} {count}");
        }
        out.push_str("# HELP world_edge_http_request_duration_seconds Time to answer a request, by route.\n");
        out.push_str("# TYPE world_edge_http_request_duration_seconds histogram\n");
        for (route, histogram) in &registry.latency {
            let mut cumulative = 0;
            for (bound, count) in BUCKETS.iter().zip(histogram.buckets) {
                cumulative += count;
                let _ = writeln!(
                    out,
                    "world_edge_http_request_duration_seconds_bucket{{route=\"{route}\",le=\"{bound}\"}} {cumulative}"
                );
            }
            let _ = writeln!(
                out,
                "world_edge_http_request_duration_seconds_bucket{{route=\"{route}\",le=\"+Inf\"}} {}",
                histogram.count
            );
            let _ =
                writeln!(out, "world_edge_http_request_duration_seconds_sum{{route=\"{route}\"}} {}", histogram.sum);
            let _ = writeln!(
                out,
                "world_edge_http_request_duration_seconds_count{{route=\"{route}\"}} {}",
                histogram.count
            );
        }
        out.push_str(
            "# HELP world_edge_a2a_requests_total A2A JSON-RPC answers, by method and error code (ok for a result).\n",
        );
        out.push_str("# TYPE world_edge_a2a_requests_total counter\n");
        for ((method, error), count) in &registry.a2a {
            let code = error.map_or_else(|| "ok".to_owned(), |code| code.to_string());
            let _ = writeln!(out, "world_edge_a2a_requests_total{{method=\"{method}\",code=\"{code}\"}} {count}");
        }
        out.push_str("# HELP world_edge_open_connections Client connections open now.\n");
        out.push_str("# TYPE world_edge_open_connections gauge\n");
        let _ = writeln!(out, "world_edge_open_connections {}", self.open_connections.load(Ordering::Relaxed));
        out.push_str("# HELP world_edge_connections_closed_total Connections the edge closed itself, by reason.\n");
        out.push_str("# TYPE world_edge_connections_closed_total counter\n");
        for (reason, counter) in [("header_timeout", &self.closed_for_header_timeout), ("idle", &self.closed_for_idle)]
        {
            let closed = counter.load(Ordering::Relaxed);
            let _ = writeln!(out, "world_edge_connections_closed_total{{reason=\"{reason}\"}} {closed}");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_histograms_render() {
        let metrics = Metrics::new();
        metrics.observe("GET /v1/head", 200, Duration::from_millis(3));
        metrics.observe("GET /v1/head", 200, Duration::from_secs(30));
        metrics.observe("GET /v1/head", 401, Duration::from_micros(10));
        let text = metrics.render();
        assert!(text.contains("world_edge_http_requests_total{route=\"GET /v1/head\",status=\"200\"} 2\n"));
        assert!(text.contains("world_edge_http_requests_total{route=\"GET /v1/head\",status=\"401\"} 1\n"));
        assert!(
            text.contains("world_edge_http_request_duration_seconds_bucket{route=\"GET /v1/head\",le=\"0.001\"} 1\n")
        );
        assert!(
            text.contains("world_edge_http_request_duration_seconds_bucket{route=\"GET /v1/head\",le=\"0.005\"} 2\n")
        );
        assert!(text.contains("world_edge_http_request_duration_seconds_bucket{route=\"GET /v1/head\",le=\"20\"} 2\n"));
        assert!(
            text.contains("world_edge_http_request_duration_seconds_bucket{route=\"GET /v1/head\",le=\"+Inf\"} 3\n")
        );
        assert!(text.contains("world_edge_http_request_duration_seconds_count{route=\"GET /v1/head\"} 3\n"));
    }

    #[test]
    fn a2a_answers_count_by_method_and_code() {
        let metrics = Metrics::new();
        metrics.a2a("SendMessage", None);
        metrics.a2a("SendMessage", None);
        metrics.a2a("GetTask", Some(-32001));
        metrics.a2a("-", Some(-32601));
        let text = metrics.render();
        assert!(text.contains("world_edge_a2a_requests_total{method=\"SendMessage\",code=\"ok\"} 2\n"), "{text}");
        assert!(text.contains("world_edge_a2a_requests_total{method=\"GetTask\",code=\"-32001\"} 1\n"), "{text}");
        assert!(text.contains("world_edge_a2a_requests_total{method=\"-\",code=\"-32601\"} 1\n"), "{text}");
    }

    #[test]
    fn open_connections_are_a_gauge_and_closes_count_by_reason() {
        let metrics = Metrics::new();
        let first = metrics.connection_opened();
        let second = metrics.connection_opened();
        assert!(metrics.render().contains("world_edge_open_connections 2\n"));
        drop(first);
        metrics.connection_closed(ConnectionClose::HeaderTimeout);
        drop(second);
        let text = metrics.render();
        assert!(text.contains("world_edge_open_connections 0\n"), "{text}");
        assert!(text.contains("world_edge_connections_closed_total{reason=\"header_timeout\"} 1\n"), "{text}");
        assert!(text.contains("world_edge_connections_closed_total{reason=\"idle\"} 0\n"), "{text}");
    }
}
