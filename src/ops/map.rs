use std::pin::Pin;
use std::task::{Context, Poll, ready};

use futures::stream::Stream;
use pin_project::pin_project;

use crate::runtime::catch_panic;

/// Stream for the [`map`](crate::Dataset::map) and [`try_map`](crate::Dataset::try_map) methods.
#[pin_project]
#[must_use = "streams do nothing unless polled"]
pub(crate) struct Map<St, F> {
    #[pin]
    input: St,
    f: F,
}

impl<St, F> Map<St, F> {
    pub(crate) fn new(input: St, f: F) -> Self {
        Map { input, f }
    }
}

impl<St, F, T, U> Stream for Map<St, F>
where
    St: Stream<Item = anyhow::Result<T>>,
    F: Fn(T) -> anyhow::Result<U>,
{
    type Item = anyhow::Result<U>;

    #[inline]
    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.project();
        let item = ready!(this.input.poll_next(cx));
        let f = this.f;
        Poll::Ready(item.map(|r| r.and_then(|x| catch_panic("map", || f(x)))))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.input.size_hint()
    }
}
