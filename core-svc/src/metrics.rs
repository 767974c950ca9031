//! The core's Prometheus metrics: invocations by transition and outcome,
//! capsule run durations and subprocess slots in use, rendered as text.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;
use std::time::Duration;

/// Upper bounds (seconds) of the capsule duration histogram.
const BUCKETS: [f64; 10] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0, 20.0];

#[derive(Default)]
pub struct Metrics {
    invocations: Mutex<BTreeMap<(String, String), u64>>,
    capsule: Mutex<Histogram>,
}

#[derive(Default)]
struct Histogram {
    counts: [u64; BUCKETS.len()],
    count: u64,
    sum: f64,
}

impl Metrics {
    pub fn invocation(&self, transition: &str, outcome: &str) {
        let mut map = self.invocations.lock().unwrap_or_else(|p| p.into_inner());
        *map.entry((transition.to_owned(), outcome.to_owned())).or_default() += 1;
    }

    pub fn capsule_run(&self, elapsed: Duration) {
        let seconds = elapsed.as_secs_f64();
        let mut histogram = self.capsule.lock().unwrap_or_else(|p| p.into_inner());
        for (count, bound) in histogram.counts.iter_mut().zip(BUCKETS) {
            if seconds <= bound {
                *count += 1;
            }
        }
        histogram.count += 1;
        histogram.sum += seconds;
    }

    /// The Prometheus text exposition, with the slot gauge read now.
    pub fn render(&self, slots_in_use: usize) -> String {
        let mut out = String::new();
        out.push_str("# HELP world_core_invocations_total Invocations by transition and outcome.\n");
        out.push_str("# TYPE world_core_invocations_total counter\n");
        for ((transition, outcome), n) in self.invocations.lock().unwrap_or_else(|p| p.into_inner()).iter() {
            let _ = writeln!(
                out,
                "world_core_invocations_total{{transition=\"{}\",outcome=\"{}\"}} {n}",
                escape(transition),
                escape(outcome)
            );
        }
        out.push_str("# HELP world_core_capsule_run_seconds Interpreter run durations.\n");
        out.push_str("# TYPE world_core_capsule_run_seconds histogram\n");
        let histogram = self.capsule.lock().unwrap_or_else(|p| p.into_inner());
        for (count, bound) in histogram.counts.iter().zip(BUCKETS) {
            let _ = writeln!(out, "world_core_capsule_run_seconds_bucket{{le=\"{bound}\"}} {count}");
        }
        let _ = writeln!(out, "world_core_capsule_run_seconds_bucket{{le=\"+Inf\"}} {}", histogram.count);
        let _ = writeln!(out, "world_core_capsule_run_seconds_sum {}", histogram.sum);
        let _ = writeln!(out, "world_core_capsule_run_seconds_count {}", histogram.count);
        out.push_str("# HELP world_core_subprocesses_in_use Interpreter subprocess slots in use.\n");
        out.push_str("# TYPE world_core_subprocesses_in_use gauge\n");
        let _ = writeln!(out, "world_core_subprocesses_in_use {slots_in_use}");
        out
    }
}

fn escape(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_and_histograms_render_as_prometheus_text() {
        let metrics = Metrics::default();
        metrics.invocation("tools.echo", "committed");
        metrics.invocation("tools.echo", "committed");
        metrics.invocation("tools.echo", "execution_failed");
        metrics.capsule_run(Duration::from_millis(30));
        let text = metrics.render(2);
        assert!(text.contains("world_core_invocations_total{transition=\"tools.echo\",outcome=\"committed\"} 2\n"));
        assert!(text.contains("outcome=\"execution_failed\"} 1\n"));
        assert!(text.contains("world_core_capsule_run_seconds_bucket{le=\"0.025\"} 0\n"));
        assert!(text.contains("world_core_capsule_run_seconds_bucket{le=\"0.05\"} 1\n"));
        assert!(text.contains("world_core_capsule_run_seconds_count 1\n"));
        assert!(text.contains("world_core_subprocesses_in_use 2\n"));
    }
}
