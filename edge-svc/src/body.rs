//! Request bodies under the reference's limits. The caps are applied by the handlers, through
//! these two readers, rather than by a blanket layer, because each endpoint must check the
//! session first and answers an oversized body in its own envelope: 413 on `/v1/commit`, a
//! JSON-RPC error on `/a2a/`, the 200 envelope on `/mcp/` (reference-edge §3.10, §5.2, §6.3).

use std::time::Duration;

use axum::body::{Body, Bytes};
use http_body_util::{BodyExt, LengthLimitError, Limited};

/// `POST /v1/commit`.
pub const COMMIT_LIMIT: usize = 8_388_608;
/// `POST /a2a/`: the decoder reads at most this much (1 MiB).
pub const A2A_LIMIT: usize = 1_048_576;
/// `POST /mcp/`: a body of exactly this size (4 MiB) is accepted.
pub const MCP_LIMIT: usize = 4_194_304;

#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    #[error("body exceeds {limit} bytes")]
    TooLarge { limit: usize },
    #[error("the request body did not arrive within {within:?}")]
    TooSlow { within: Duration },
    #[error("{0}")]
    Read(String),
}

/// The whole body, refused when it holds more than `limit` bytes or has not arrived `within`.
pub async fn read_capped(body: Body, limit: usize, within: Duration) -> Result<Bytes, BodyError> {
    match tokio::time::timeout(within, Limited::new(body, limit).collect()).await {
        Ok(Ok(collected)) => Ok(collected.to_bytes()),
        Ok(Err(error)) if error.downcast_ref::<LengthLimitError>().is_some() => Err(BodyError::TooLarge { limit }),
        Ok(Err(error)) => Err(BodyError::Read(error.to_string())),
        Err(_) => Err(too_slow(within)),
    }
}

/// At most the first `limit` bytes; the rest is never read. This is Go's
/// `io.LimitReader` under a JSON decoder: a first value that fits is decoded whatever follows.
/// Refused when those bytes have not arrived `within`.
pub async fn read_prefix(body: Body, limit: usize, within: Duration) -> Result<Bytes, BodyError> {
    tokio::time::timeout(within, prefix(body, limit)).await.unwrap_or_else(|_| Err(too_slow(within)))
}

fn too_slow(within: Duration) -> BodyError {
    BodyError::TooSlow { within }
}

async fn prefix(mut body: Body, limit: usize) -> Result<Bytes, BodyError> {
    let mut prefix: Vec<u8> = Vec::new();
    while prefix.len() < limit {
        let Some(frame) = body.frame().await else {
            break;
        };
        let frame = frame.map_err(|error| BodyError::Read(error.to_string()))?;
        if let Ok(data) = frame.into_data() {
            let room = limit - prefix.len();
            prefix.extend_from_slice(&data[..data.len().min(room)]);
        }
    }
    Ok(Bytes::from(prefix))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: Duration = Duration::from_secs(1);

    fn run<F: std::future::Future>(future: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(future)
    }

    #[test]
    fn capped_reads_accept_exactly_the_limit() {
        let exact = run(read_capped(Body::from(vec![b'a'; 16]), 16, SECOND)).unwrap();
        assert_eq!(exact.len(), 16);
        assert!(matches!(
            run(read_capped(Body::from(vec![b'a'; 17]), 16, SECOND)),
            Err(BodyError::TooLarge { limit: 16 })
        ));
        assert!(run(read_capped(Body::empty(), 16, SECOND)).unwrap().is_empty());
    }

    #[test]
    fn prefix_reads_stop_at_the_limit() {
        let prefix = run(read_prefix(Body::from(vec![b'a'; 40]), 16, SECOND)).unwrap();
        assert_eq!(prefix.len(), 16);
        let short = run(read_prefix(Body::from("abc"), 16, SECOND)).unwrap();
        assert_eq!(&short[..], b"abc");
    }

    #[test]
    fn a_body_that_stalls_is_refused_once_its_time_is_up() {
        let stalled = || Body::from_stream(futures::stream::pending::<Result<Bytes, std::io::Error>>());
        let within = Duration::from_millis(50);
        let expected = "the request body did not arrive within 50ms";
        for refused in [run(read_capped(stalled(), 16, within)), run(read_prefix(stalled(), 16, within))] {
            let error = refused.unwrap_err();
            assert_eq!(error.to_string(), expected);
            assert!(matches!(error, BodyError::TooSlow { within: w } if w == within));
        }
    }
}
