use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use futures::stream::Stream;
use pin_project::pin_project;

/// Stream for the [`filter`](crate::Dataset::filter) method.
#[pin_project]
#[must_use = "streams do nothing unless polled"]
pub(crate) struct Filter<St, P> {
    #[pin]
    input: St,
    predicate: Arc<P>,
}

impl<St, P> Filter<St, P> {
    pub(crate) fn new(input: St, predicate: Arc<P>) -> Self {
        Filter { input, predicate }
    }
}

impl<St, P, T> Stream for Filter<St, P>
where
    St: Stream<Item = anyhow::Result<T>>,
    P: Fn(&T) -> bool,
{
    type Item = anyhow::Result<T>;

    #[inline]
    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let mut this = self.project();
        loop {
            match ready!(this.input.as_mut().poll_next(cx)) {
                Some(Ok(x)) => {
                    let p = &**this.predicate;
                    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| p(&x))) {
                        Ok(true) => return Poll::Ready(Some(Ok(x))),
                        Ok(false) => continue,
                        Err(payload) => {
                            let message = crate::error::panic_message(payload.as_ref());
                            return Poll::Ready(Some(Err(crate::Error::WorkerPanicked {
                                stage: "filter",
                                message,
                            }
                            .into())));
                        }
                    }
                }
                other => return Poll::Ready(other),
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, self.input.size_hint().1)
    }
}
