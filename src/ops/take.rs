use std::pin::Pin;
use std::task::{Context, Poll, ready};

use crate::checkpoint::{Resumable, State};
use futures::stream::Stream;
use pin_project::pin_project;

/// Stream for the [`take`](crate::Dataset::take) method.
#[pin_project]
#[must_use = "streams do nothing unless polled"]
pub(crate) struct Take<St> {
    #[pin]
    input: St,
    remaining: u64,
}

impl<St> Take<St> {
    pub(crate) fn new(input: St, remaining: u64) -> Self {
        Take { input, remaining }
    }
}

impl<St, T> Stream for Take<St>
where
    St: Stream<Item = anyhow::Result<T>>,
{
    type Item = anyhow::Result<T>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.project();
        if *this.remaining == 0 {
            return Poll::Ready(None);
        }
        let item = ready!(this.input.poll_next(cx));
        if let Some(Ok(_)) = item {
            *this.remaining -= 1;
        }
        Poll::Ready(item)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        if self.remaining == 0 {
            return (0, Some(0));
        }
        let cap = usize::try_from(self.remaining).unwrap_or(usize::MAX);
        let (lo, hi) = self.input.size_hint();
        (lo.min(cap), Some(hi.map_or(cap, |h| h.min(cap))))
    }
}

impl<St: Resumable> Resumable for Take<St> {
    fn save(self: Pin<&mut Self>) -> anyhow::Result<State> {
        let remaining = self.remaining;
        Ok(State::new("take")
            .words([remaining])
            .input(self.project().input.save()?))
    }

    crate::checkpoint::positions_of_input!();
}
