use std::pin::Pin;
use std::task::{Context, Poll, ready};

use futures::stream::Stream;
use pin_project::pin_project;

/// Stream for the [`enumerate`](crate::Dataset::enumerate) method.
#[pin_project]
#[must_use = "streams do nothing unless polled"]
pub(crate) struct Enumerate<St> {
    #[pin]
    input: St,
    next: i64,
}

impl<St> Enumerate<St> {
    pub(crate) fn new(input: St, start: i64) -> Self {
        Enumerate { input, next: start }
    }
}

impl<St, T> Stream for Enumerate<St>
where
    St: Stream<Item = anyhow::Result<T>>,
{
    type Item = anyhow::Result<(i64, T)>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.project();
        // tf.data's enumerate is a zip with a counter, which advances for error elements too.
        Poll::Ready(ready!(this.input.poll_next(cx)).map(|r| {
            let i = *this.next;
            *this.next = i.wrapping_add(1);
            r.map(|x| (i, x))
        }))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.input.size_hint()
    }
}
