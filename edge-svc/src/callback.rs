//! MCP host callbacks: a fixed number of slots per edge, as the reference's runner has
//! (reference-edge §6.6). A callback (admission, one `tools/call`) runs on its own task that
//! owns its slot, so the slot stays taken until the callback really returns — even when the
//! request that started it timed out or its client went away — and a core that is slow cannot
//! be sent more concurrent work than the slots allow.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tracing::Instrument as _;

use tokio::sync::Semaphore;
use tokio::time::Instant;
use world_model::{Failure, FailureCode};

use crate::limits::Limits;

/// Why a callback produced no value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CallbackError {
    /// The callback ran and failed (the core's typed failure, or a transport one).
    Failed(Failure),
    /// The request deadline or the callback timeout ended first.
    TimedOut,
    /// The callback's task was cancelled before it answered (the runtime is stopping).
    Canceled,
    /// No slot became free within the slot wait.
    CapacityExceeded,
}

#[derive(Clone)]
pub struct Callbacks {
    slots: Arc<Semaphore>,
    capacity: usize,
    timeout: Duration,
    slot_wait: Duration,
}

impl Callbacks {
    pub fn new(limits: &Limits) -> Callbacks {
        Callbacks {
            slots: Arc::new(Semaphore::new(limits.callback_slots)),
            capacity: limits.callback_slots,
            timeout: limits.callback_timeout,
            slot_wait: limits.callback_slot_wait,
        }
    }

    pub fn in_use(&self) -> usize {
        self.capacity.saturating_sub(self.slots.available_permits())
    }

    /// Runs `callback` in a slot, waiting until `request_deadline` at most. `callback` is given
    /// the instant its caller stops waiting, to size its own deadlines.
    pub async fn run<T, F, Fut>(&self, request_deadline: Instant, callback: F) -> Result<T, CallbackError>
    where
        T: Send + 'static,
        F: FnOnce(Instant) -> Fut,
        Fut: Future<Output = Result<T, Failure>> + Send + 'static,
    {
        let now = Instant::now();
        let deadline = request_deadline.min(now + self.timeout);
        let wait_until = deadline.min(now + self.slot_wait);
        let permit = match tokio::time::timeout_at(wait_until, Arc::clone(&self.slots).acquire_owned()).await {
            Ok(Ok(permit)) => permit,
            // The semaphore is never closed; treat it as the edge stopping.
            Ok(Err(_)) => return Err(CallbackError::Canceled),
            // As the reference's runner: when the request itself ran out meanwhile its deadline
            // is the answer, otherwise the slots were the limit.
            Err(_) if Instant::now() >= request_deadline => return Err(CallbackError::TimedOut),
            Err(_) => return Err(CallbackError::CapacityExceeded),
        };
        // Boxed once here: a gRPC call's future is kilobytes, and the spawn below would
        // otherwise copy it whole at every layer it passes through.
        let future = Box::pin(callback(deadline));
        // The callback stays in the caller's trace although it runs on its own task.
        let task = tokio::spawn(
            async move {
                let result = future.await;
                drop(permit);
                result
            }
            .in_current_span(),
        );
        match tokio::time::timeout_at(deadline, task).await {
            Ok(Ok(Ok(value))) => Ok(value),
            Ok(Ok(Err(failure))) => Err(CallbackError::Failed(failure)),
            Ok(Err(error)) if error.is_panic() => {
                tracing::error!("a host callback panicked");
                Err(CallbackError::Failed(Failure::of(FailureCode::Internal)))
            }
            Ok(Err(_)) => Err(CallbackError::Canceled),
            // The task keeps its slot until the callback returns.
            Err(_) => Err(CallbackError::TimedOut),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn callbacks(slots: usize, slot_wait: Duration) -> Callbacks {
        Callbacks::new(&Limits { callback_slots: slots, callback_slot_wait: slot_wait, ..Limits::default() })
    }

    #[tokio::test(start_paused = true)]
    async fn a_slot_is_held_until_the_callback_returns_even_after_its_caller_gave_up() {
        let callbacks = callbacks(1, Duration::from_secs(1));
        let far = Instant::now() + Duration::from_secs(60);
        let slow = callbacks.run(Instant::now() + Duration::from_millis(100), |_| async {
            tokio::time::sleep(Duration::from_secs(5)).await;
            Ok(1)
        });
        assert_eq!(slow.await, Err(CallbackError::TimedOut));
        assert_eq!(callbacks.in_use(), 1, "the timed-out callback still runs");
        let refused = callbacks.run(far, |_| async { Ok(2) }).await;
        assert_eq!(refused, Err(CallbackError::CapacityExceeded));
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert_eq!(callbacks.run(far, |_| async { Ok(3) }).await, Ok(3));
        assert_eq!(callbacks.in_use(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_wait_that_outlives_the_request_is_a_timeout() {
        let callbacks = callbacks(1, Duration::from_secs(20));
        let far = Instant::now() + Duration::from_secs(60);
        let holder = tokio::spawn({
            let callbacks = callbacks.clone();
            async move {
                callbacks
                    .run(far, |_| async {
                        tokio::time::sleep(Duration::from_secs(10)).await;
                        Ok(())
                    })
                    .await
            }
        });
        tokio::task::yield_now().await;
        let waited = callbacks.run(Instant::now() + Duration::from_secs(2), |_| async { Ok(()) }).await;
        assert_eq!(waited, Err(CallbackError::TimedOut));
        assert_eq!(holder.await.unwrap(), Ok(()));
        let failed = callbacks.run(far, |_| async { Err::<(), _>(Failure::of(FailureCode::Unavailable)) }).await;
        assert_eq!(failed, Err(CallbackError::Failed(Failure::of(FailureCode::Unavailable))));
    }
}
