use std::pin::Pin;
use std::task::{Context, Poll, ready};

use futures::stream::Stream;
use pin_project::pin_project;

/// Stream for the [`ignore_errors`](crate::Dataset::ignore_errors) method.
#[pin_project]
#[must_use = "streams do nothing unless polled"]
pub(crate) struct IgnoreErrors<St> {
    #[pin]
    input: St,
}

impl<St> IgnoreErrors<St> {
    pub(crate) fn new(input: St) -> Self {
        IgnoreErrors { input }
    }
}

impl<St, T> Stream for IgnoreErrors<St>
where
    St: Stream<Item = anyhow::Result<T>>,
{
    type Item = anyhow::Result<T>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let mut this = self.project();
        loop {
            match ready!(this.input.as_mut().poll_next(cx)) {
                Some(Err(_)) => continue,
                other => return Poll::Ready(other),
            }
        }
    }
}
