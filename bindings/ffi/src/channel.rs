//! A small channel whose receiving end is a future, and `run_blocking` on top of it.
//!
//! Work runs on threads of its own and wakes the foreign executor through the future's waker,
//! so no async runtime is needed and no foreign thread ever waits for inference.

use std::collections::VecDeque;
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

use crate::error::TernError;

struct State<T> {
    queue: VecDeque<T>,
    /// The sender is done: after the queue drains, `recv` yields `None`.
    closed: bool,
    /// The receiver is gone: pushes are refused.
    receiver_gone: bool,
    waker: Option<Waker>,
}

pub(crate) struct Chan<T> {
    state: Mutex<State<T>>,
}

impl<T> Chan<T> {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Chan {
            state: Mutex::new(State { queue: VecDeque::new(), closed: false, receiver_gone: false, waker: None }),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State<T>> {
        // The state stays consistent even if a holder panicked: every update is one assignment.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues an item; false when the receiver is gone (the item is dropped).
    pub(crate) fn push(&self, item: T) -> bool {
        let waker = {
            let mut s = self.lock();
            if s.receiver_gone {
                return false;
            }
            s.queue.push_back(item);
            s.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
        true
    }

    pub(crate) fn close(&self) {
        let waker = {
            let mut s = self.lock();
            s.closed = true;
            s.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.lock().closed
    }

    pub(crate) fn drop_receiver(&self) {
        let mut s = self.lock();
        s.receiver_gone = true;
        s.queue.clear();
    }

    /// The next item, or `None` once the channel is closed and drained.
    pub(crate) fn recv(self: &Arc<Self>) -> Recv<T> {
        Recv { chan: Arc::clone(self) }
    }
}

pub(crate) struct Recv<T> {
    chan: Arc<Chan<T>>,
}

impl<T> Future for Recv<T> {
    type Output = Option<T>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
        let mut s = self.chan.lock();
        match s.queue.pop_front() {
            Some(item) => Poll::Ready(Some(item)),
            None if s.closed => Poll::Ready(None),
            None => {
                s.waker = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}

/// Runs `f` on a new thread and awaits its result without blocking the caller's executor.
/// A panic in `f` becomes `TernError::Internal`.
pub(crate) async fn run_blocking<T: Send + 'static>(
    what: &'static str,
    f: impl FnOnce() -> Result<T, TernError> + Send + 'static,
) -> Result<T, TernError> {
    let chan = Chan::new();
    let tx = Arc::clone(&chan);
    std::thread::Builder::new()
        .name(format!("tern-{what}"))
        .spawn(move || {
            let result = catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|_| Err(TernError::panicked(what)));
            tx.push(result);
            tx.close();
        })
        .map_err(TernError::no_thread)?;
    chan.recv().await.unwrap_or_else(|| Err(TernError::panicked(what)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::task::Wake;

    struct Flag(std::sync::atomic::AtomicBool);
    impl Wake for Flag {
        fn wake(self: Arc<Self>) {
            self.0.store(true, std::sync::atomic::Ordering::SeqCst);
        }
    }

    fn poll<F: Future + Unpin>(f: &mut F, flag: &Arc<Flag>) -> Poll<F::Output> {
        let waker = Waker::from(Arc::clone(flag));
        Pin::new(f).poll(&mut Context::from_waker(&waker))
    }

    #[test]
    fn wakes_the_receiver_and_drains_before_closing() {
        let chan = Chan::new();
        let flag = Arc::new(Flag(Default::default()));
        let mut rx = chan.recv();
        assert!(poll(&mut rx, &flag).is_pending());
        chan.push(1);
        assert!(flag.0.load(std::sync::atomic::Ordering::SeqCst), "push wakes the waiting receiver");
        assert_eq!(poll(&mut rx, &flag), Poll::Ready(Some(1)));
        chan.push(2);
        chan.close();
        assert_eq!(poll(&mut chan.recv(), &flag), Poll::Ready(Some(2)));
        assert_eq!(poll(&mut chan.recv(), &flag), Poll::Ready(None));
    }

    #[test]
    fn refuses_items_once_the_receiver_is_gone() {
        let chan = Chan::new();
        chan.push(1);
        chan.drop_receiver();
        assert!(!chan.push(2));
    }

    #[test]
    fn run_blocking_turns_a_panic_into_an_error() {
        let fut = run_blocking("test", || -> Result<(), TernError> { panic!("secret prompt text") });
        let err = pollster::block_on(fut).unwrap_err();
        assert_eq!(err.to_string(), "internal error in test");
    }
}
