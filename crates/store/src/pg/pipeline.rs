//! Sending several statements in one round trip, in a known order.
//!
//! tokio-postgres pipelines the requests of futures polled together: each request is sent
//! when its future is first polled, and PostgreSQL runs them one after the other in that
//! order, each seeing the effects of those before it in the same transaction. The writer
//! depends on that order (a group's writes must run before the checks that follow them), so
//! it does not leave it to a general-purpose join: [`in_order`] polls its futures by index,
//! and so sends their requests in the order given.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// A statement's future, borrowing what it sends.
pub(super) type Step<'a, T, E> = Pin<Box<dyn Future<Output = Result<T, E>> + Send + 'a>>;

/// Runs `steps` together, their requests sent in the order given; their results in that
/// order, or the first error met (the others' answers are then read and dropped by the
/// connection).
pub(super) async fn in_order<'a, T, E>(steps: Vec<Step<'a, T, E>>) -> Result<Vec<T>, E> {
    InOrder {
        pending: steps.into_iter().map(Some).collect(),
        done: Vec::new(),
    }
    .await
}

struct InOrder<'a, T, E> {
    pending: Vec<Option<Step<'a, T, E>>>,
    done: Vec<Option<T>>,
}

impl<T, E> Unpin for InOrder<'_, T, E> {}

impl<T, E> Future for InOrder<'_, T, E> {
    type Output = Result<Vec<T>, E>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        if this.done.len() < this.pending.len() {
            this.done.resize_with(this.pending.len(), || None);
        }
        let mut all = true;
        for (slot, result) in this.pending.iter_mut().zip(this.done.iter_mut()) {
            let Some(step) = slot else { continue };
            match step.as_mut().poll(cx) {
                Poll::Ready(Ok(value)) => {
                    *result = Some(value);
                    *slot = None;
                }
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => all = false,
            }
        }
        if !all {
            return Poll::Pending;
        }
        Poll::Ready(Ok(std::mem::take(&mut this.done)
            .into_iter()
            .flatten()
            .collect()))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    /// A step that records when it was first polled, then yields once before answering.
    fn step(order: Arc<Mutex<Vec<usize>>>, i: usize) -> Step<'static, usize, String> {
        Box::pin(async move {
            order.lock().map_err(|e| e.to_string())?.push(i);
            tokio::task::yield_now().await;
            if i == 99 {
                Err("failed".into())
            } else {
                Ok(i * 10)
            }
        })
    }

    #[tokio::test]
    async fn steps_start_in_the_order_given_and_answer_in_it() {
        let order = Arc::new(Mutex::new(Vec::new()));
        let steps = (0..40).map(|i| step(order.clone(), i)).collect();
        let results = in_order(steps).await.expect("no step fails");
        assert_eq!(results, (0..40).map(|i| i * 10).collect::<Vec<_>>());
        assert_eq!(*order.lock().expect("lock"), (0..40).collect::<Vec<_>>());
    }

    #[tokio::test]
    async fn the_first_error_is_the_answer() {
        let order = Arc::new(Mutex::new(Vec::new()));
        let steps = vec![
            step(order.clone(), 1),
            step(order.clone(), 99),
            step(order, 2),
        ];
        assert_eq!(in_order(steps).await, Err("failed".to_owned()));
    }
}
