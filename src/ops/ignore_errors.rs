//! Saved state: the input's (errors are dropped as they come; nothing is held).

use std::pin::Pin;
use std::task::{Context, Poll, ready};

use futures::stream::Stream;
use pin_project::pin_project;

use crate::checkpoint::{Prov, Resumable, State};

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

impl<St: Resumable> Resumable for IgnoreErrors<St> {
    fn save(self: Pin<&mut Self>) -> anyhow::Result<State> {
        Ok(State::new("ignore_errors").input(self.project().input.save()?))
    }

    fn last_prov(&self) -> anyhow::Result<Prov> {
        self.input.last_prov()
    }

    fn is_small(&self) -> bool {
        self.input.is_small()
    }

    fn resumable(&self) -> bool {
        self.input.resumable()
    }
}
