//! One run of a transition's `main` and the output law every run's stdout must pass
//! (R9, R10, R12).

use std::time::Duration;

use world_model::FailureCode;

use super::refusal::Refusal;
use crate::capsule::Runner;

/// Runs `source` with `input` and returns its output: stdout less one trailing newline, at
/// most `max_output` bytes, a JSON object.
pub async fn run(
    runner: &dyn Runner,
    source: &[u8],
    input: &[u8],
    timeout: Duration,
    max_output: usize,
) -> Result<Vec<u8>, Refusal> {
    let input = std::str::from_utf8(input).map_err(|e| Refusal::because(FailureCode::InvalidParams, e))?;
    let finished = runner.run(source, input, timeout).await?;
    if !finished.success() {
        let stderr = String::from_utf8_lossy(&finished.stderr);
        // R9: the interpreter's own words for a transition without the calling convention.
        let code = if stderr.contains("ARG_DECODE_MISMATCH") || stderr.contains("entrypoint 'main' not found") {
            FailureCode::Incompatible
        } else {
            FailureCode::ExecutionFailed
        };
        return Err(Refusal::because(code, format!("interpreter exit {}: {}", finished.status, stderr.trim())));
    }
    // R12: one trailing newline stripped, capped, a JSON object.
    let mut output = finished.stdout;
    if output.last() == Some(&b'\n') {
        output.pop();
    }
    if output.len() > max_output {
        return Err(Refusal::because(FailureCode::OutputNotObject, "the output exceeds the output cap"));
    }
    match serde_json::from_slice::<serde_json::Value>(&output) {
        Ok(serde_json::Value::Object(_)) => Ok(output),
        _ => Err(Refusal::because(FailureCode::OutputNotObject, "the output is not a JSON object")),
    }
}
