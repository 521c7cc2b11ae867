//! Saved state: the input's (errors are dropped as they come; nothing is held). A refused
//! resume ([`is_refusal`](crate::error::is_refusal)) is passed on, never dropped.

use std::pin::Pin;
use std::task::{Context, Poll, ready};

use futures::stream::Stream;
use pin_project::pin_project;

use crate::checkpoint::{Resumable, State};

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
                // A refused resume is not an error of the data: it is never dropped.
                Some(Err(e)) if !crate::error::is_refusal(&e) => continue,
                other => return Poll::Ready(other),
            }
        }
    }
}

impl<St: Resumable> Resumable for IgnoreErrors<St> {
    fn save(self: Pin<&mut Self>) -> anyhow::Result<State> {
        Ok(State::new("ignore_errors").input(self.project().input.save()?))
    }

    crate::checkpoint::positions_of_input!();
}
