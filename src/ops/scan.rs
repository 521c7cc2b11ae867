use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use futures::stream::Stream;
use pin_project::pin_project;

/// Stream for the [`scan`](crate::Dataset::scan) method.
#[pin_project]
#[must_use = "streams do nothing unless polled"]
pub(crate) struct Scan<St, S, F> {
    #[pin]
    input: St,
    /// `None` only while `f` runs (or after it panicked, which ends the stream).
    state: Option<S>,
    f: Arc<F>,
}

impl<St, S, F> Scan<St, S, F> {
    pub(crate) fn new(input: St, state: S, f: Arc<F>) -> Self {
        Scan {
            input,
            state: Some(state),
            f,
        }
    }
}

impl<St, S, F, T, U> Stream for Scan<St, S, F>
where
    St: Stream<Item = anyhow::Result<T>>,
    F: Fn(S, T) -> (S, U),
{
    type Item = anyhow::Result<U>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.project();
        let Some(state) = this.state.take() else {
            return Poll::Ready(None);
        };
        match ready!(this.input.poll_next(cx)) {
            Some(Ok(x)) => {
                let f = &**this.f;
                match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(state, x))) {
                    Ok((next, out)) => {
                        *this.state = Some(next);
                        Poll::Ready(Some(Ok(out)))
                    }
                    // The state is lost with the panic: report it and end.
                    Err(payload) => {
                        let message = crate::error::panic_message(payload.as_ref());
                        Poll::Ready(Some(Err(crate::Error::WorkerPanicked {
                            stage: "scan",
                            message,
                        }
                        .into())))
                    }
                }
            }
            Some(Err(e)) => {
                *this.state = Some(state);
                Poll::Ready(Some(Err(e)))
            }
            None => Poll::Ready(None),
        }
    }
}
