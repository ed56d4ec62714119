//! The requests one agent socket is answering: futures polled inside the socket's
//! own task, finished in any order.
//!
//! A plain `FuturesUnordered` that has just polled every future it holds, and found
//! all of them pending, wakes its own task before it returns (futures-util's guard
//! against starving the executor). With one call in flight, the usual case for an
//! agent, that is every call: the socket's task is woken during its own poll, tokio
//! re-queues it as a yield and wakes an idle worker to run it, and the task then finds
//! nothing to do. `perf` counted about one futex wake and one context switch per
//! relayed call from exactly that (load-tests/notes.md). The set here holds one more
//! member that never completes and is never woken again after its first poll, so the
//! set never counts itself exhausted and parks like any other future.

use std::future::{Future, Pending, pending};
use std::pin::Pin;
use std::task::{Context, Poll};

use futures_util::Stream;
use futures_util::future::Either;
use futures_util::stream::FuturesUnordered;

/// Futures of one output type, finished in any order, that never wake their own
/// task for nothing.
pub struct Answers<F: Future> {
    set: FuturesUnordered<Either<F, Pending<F::Output>>>,
}

impl<F: Future> Default for Answers<F> {
    fn default() -> Self {
        let set = FuturesUnordered::new();
        set.push(Either::Right(pending()));
        Self { set }
    }
}

impl<F: Future> Answers<F> {
    pub fn push(&mut self, future: F) {
        self.set.push(Either::Left(future));
    }

    /// How many futures are still running.
    pub fn len(&self) -> usize {
        self.set.len() - 1
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<F: Future> Stream for Answers<F> {
    type Item = F::Output;

    /// The next finished future's output; never `None` (the set is never empty).
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<F::Output>> {
        Pin::new(&mut self.set).poll_next(cx)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::{Wake, Waker};

    use futures_util::StreamExt;
    use tokio::sync::oneshot;

    use super::*;

    #[derive(Default)]
    struct CountingWaker(AtomicUsize);
    impl Wake for CountingWaker {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn poll_once<S: Stream + Unpin>(stream: &mut S, waker: &Waker) -> Poll<Option<S::Item>> {
        stream.poll_next_unpin(&mut Context::from_waker(waker))
    }

    #[test]
    fn a_pending_call_does_not_wake_the_task_and_its_answer_does() {
        let counter = Arc::new(CountingWaker::default());
        let waker = Waker::from(counter.clone());
        let mut answers = Answers::default();
        // The first poll meets only the placeholder.
        assert!(poll_once(&mut answers, &waker).is_pending());
        let woken_before = counter.0.load(Ordering::SeqCst);

        let (tx, rx) = oneshot::channel::<u32>();
        answers.push(rx);
        assert_eq!(answers.len(), 1);
        assert!(poll_once(&mut answers, &waker).is_pending());
        assert_eq!(
            counter.0.load(Ordering::SeqCst),
            woken_before,
            "polling a pending call must not wake the task"
        );

        tx.send(7).expect("receiver alive");
        assert!(
            counter.0.load(Ordering::SeqCst) > woken_before,
            "the answer wakes the task"
        );
        match poll_once(&mut answers, &waker) {
            Poll::Ready(Some(Ok(7))) => {}
            other => panic!("expected the answer, got {other:?}"),
        }
        assert!(answers.is_empty());
    }

    /// What this type exists for: the plain set wakes its task in the same situation.
    #[test]
    fn a_plain_set_wakes_its_task_for_a_pending_call() {
        let counter = Arc::new(CountingWaker::default());
        let waker = Waker::from(counter.clone());
        let mut plain = FuturesUnordered::new();
        let (_tx, rx) = oneshot::channel::<u32>();
        plain.push(rx);
        assert!(poll_once(&mut plain, &waker).is_pending());
        assert_eq!(counter.0.load(Ordering::SeqCst), 1);
    }
}
