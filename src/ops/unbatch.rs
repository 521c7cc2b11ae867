use std::pin::Pin;
use std::task::{Context, Poll, ready};

use futures::stream::Stream;
use pin_project::pin_project;

/// Stream for the [`unbatch`](crate::Dataset::unbatch) method.
#[pin_project]
#[must_use = "streams do nothing unless polled"]
pub(crate) struct Unbatch<St, I> {
    #[pin]
    input: St,
    current: Option<I>,
}

impl<St, I> Unbatch<St, I> {
    pub(crate) fn new(input: St) -> Self {
        Unbatch {
            input,
            current: None,
        }
    }
}

impl<St, C> Stream for Unbatch<St, C::IntoIter>
where
    St: Stream<Item = anyhow::Result<C>>,
    C: IntoIterator,
{
    type Item = anyhow::Result<C::Item>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let mut this = self.project();
        loop {
            if let Some(x) = this.current.as_mut().and_then(Iterator::next) {
                return Poll::Ready(Some(Ok(x)));
            }
            *this.current = None;
            match ready!(this.input.as_mut().poll_next(cx)) {
                Some(Ok(c)) => *this.current = Some(c.into_iter()),
                Some(Err(e)) => return Poll::Ready(Some(Err(e))),
                None => return Poll::Ready(None),
            }
        }
    }
}
