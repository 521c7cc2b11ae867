use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use futures::stream::Stream;
use pin_project::pin_project;

/// Stream for the [`take_while`](crate::Dataset::take_while) method.
#[pin_project]
#[must_use = "streams do nothing unless polled"]
pub(crate) struct TakeWhile<St, P> {
    #[pin]
    input: St,
    predicate: Arc<P>,
    done: bool,
}

impl<St, P> TakeWhile<St, P> {
    pub(crate) fn new(input: St, predicate: Arc<P>) -> Self {
        TakeWhile {
            input,
            predicate,
            done: false,
        }
    }
}

impl<St, P, T> Stream for TakeWhile<St, P>
where
    St: Stream<Item = anyhow::Result<T>>,
    P: Fn(&T) -> bool,
{
    type Item = anyhow::Result<T>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.project();
        if *this.done {
            return Poll::Ready(None);
        }
        match ready!(this.input.poll_next(cx)) {
            Some(Ok(x)) if (this.predicate)(&x) => Poll::Ready(Some(Ok(x))),
            Some(Ok(_)) => {
                *this.done = true;
                Poll::Ready(None)
            }
            Some(Err(e)) => Poll::Ready(Some(Err(e))),
            None => {
                *this.done = true;
                Poll::Ready(None)
            }
        }
    }
}
