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
    /// Store operation latency by operation.
    store: Mutex<BTreeMap<&'static str, Histogram>>,
    /// Intents found without an outcome when the core started, by kind (commit, effect).
    pending_at_start: Mutex<BTreeMap<&'static str, u64>>,
}

/// Cumulative buckets, as the exposition format wants them.
#[derive(Default)]
struct Histogram {
    counts: [u64; BUCKETS.len()],
    count: u64,
    sum: f64,
}

impl Histogram {
    fn observe(&mut self, elapsed: Duration) {
        let seconds = elapsed.as_secs_f64();
        for (count, bound) in self.counts.iter_mut().zip(BUCKETS) {
            if seconds <= bound {
                *count += 1;
            }
        }
        self.count += 1;
        self.sum += seconds;
    }

    fn render(&self, name: &str, labels: &str, out: &mut String) {
        let sep = if labels.is_empty() { "" } else { "," };
        for (count, bound) in self.counts.iter().zip(BUCKETS) {
            let _ = writeln!(out, "{name}_bucket{{{labels}{sep}le=\"{bound}\"}} {count}");
        }
        let _ = writeln!(out, "{name}_bucket{{{labels}{sep}le=\"+Inf\"}} {}", self.count);
        let braces = if labels.is_empty() { String::new() } else { format!("{{{labels}}}") };
        let _ = writeln!(out, "{name}_sum{braces} {}", self.sum);
        let _ = writeln!(out, "{name}_count{braces} {}", self.count);
    }
}

impl Metrics {
    pub fn invocation(&self, transition: &str, outcome: &str) {
        let mut map = self.invocations.lock().unwrap_or_else(|p| p.into_inner());
        *map.entry((transition.to_owned(), outcome.to_owned())).or_default() += 1;
    }

    pub fn capsule_run(&self, elapsed: Duration) {
        self.capsule.lock().unwrap_or_else(|p| p.into_inner()).observe(elapsed);
    }

    pub fn store_operation(&self, operation: &'static str, elapsed: Duration) {
        self.store.lock().unwrap_or_else(|p| p.into_inner()).entry(operation).or_default().observe(elapsed);
    }

    pub fn pending_at_start(&self, kind: &'static str, count: u64) {
        self.pending_at_start.lock().unwrap_or_else(|p| p.into_inner()).insert(kind, count);
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
        self.capsule.lock().unwrap_or_else(|p| p.into_inner()).render("world_core_capsule_run_seconds", "", &mut out);
        out.push_str("# HELP world_core_store_operation_seconds Store operation latency by operation.\n");
        out.push_str("# TYPE world_core_store_operation_seconds histogram\n");
        for (operation, histogram) in self.store.lock().unwrap_or_else(|p| p.into_inner()).iter() {
            histogram.render("world_core_store_operation_seconds", &format!("operation=\"{operation}\""), &mut out);
        }
        out.push_str("# HELP world_core_subprocesses_in_use Interpreter subprocess slots in use.\n");
        out.push_str("# TYPE world_core_subprocesses_in_use gauge\n");
        let _ = writeln!(out, "world_core_subprocesses_in_use {slots_in_use}");
        out.push_str(
            "# HELP world_core_pending_intents_at_start Journal intents without an outcome that dead cores left, when \
             the core started.\n",
        );
        out.push_str("# TYPE world_core_pending_intents_at_start gauge\n");
        for (kind, n) in self.pending_at_start.lock().unwrap_or_else(|p| p.into_inner()).iter() {
            let _ = writeln!(out, "world_core_pending_intents_at_start{{kind=\"{kind}\"}} {n}");
        }
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
        metrics.store_operation("commit", Duration::from_millis(2));
        let text = metrics.render(2);
        assert!(text.contains("world_core_store_operation_seconds_bucket{operation=\"commit\",le=\"0.005\"} 1\n"));
        assert!(text.contains("world_core_store_operation_seconds_count{operation=\"commit\"} 1\n"));
        assert!(text.contains("world_core_invocations_total{transition=\"tools.echo\",outcome=\"committed\"} 2\n"));
        assert!(text.contains("outcome=\"execution_failed\"} 1\n"));
        assert!(text.contains("world_core_capsule_run_seconds_bucket{le=\"0.025\"} 0\n"));
        assert!(text.contains("world_core_capsule_run_seconds_bucket{le=\"0.05\"} 1\n"));
        assert!(text.contains("world_core_capsule_run_seconds_count 1\n"));
        assert!(text.contains("world_core_subprocesses_in_use 2\n"));
    }
}
