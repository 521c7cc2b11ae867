use std::pin::Pin;
use std::task::{Context, Poll, ready};

use crate::checkpoint::{Resumable, State};
use futures::stream::Stream;
use pin_project::pin_project;

/// Stream for the [`skip`](crate::Dataset::skip) method.
#[pin_project]
#[must_use = "streams do nothing unless polled"]
pub(crate) struct Skip<St> {
    #[pin]
    input: St,
    count: u64,
    remaining: u64,
}

impl<St> Skip<St> {
    pub(crate) fn new(input: St, count: u64) -> Self {
        Skip {
            input,
            count,
            remaining: count,
        }
    }

    /// Starts with `remaining` elements left to skip (restored).
    pub(crate) fn remaining(mut self, remaining: u64) -> Self {
        self.remaining = remaining;
        self
    }
}

impl<St, T> Stream for Skip<St>
where
    St: Stream<Item = anyhow::Result<T>>,
{
    type Item = anyhow::Result<T>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let mut this = self.project();
        loop {
            let item = ready!(this.input.as_mut().poll_next(cx));
            match item {
                Some(Ok(_)) if *this.remaining > 0 => *this.remaining -= 1,
                Some(Err(e)) => {
                    // tf.data skips in one step that an error aborts, forgetting the elements
                    // it skipped: the next element starts the count again.
                    if *this.remaining > 0 {
                        *this.remaining = *this.count;
                    }
                    return Poll::Ready(Some(Err(e)));
                }
                other => return Poll::Ready(other),
            }
        }
    }
}

impl<St: Resumable> Resumable for Skip<St> {
    fn save(self: Pin<&mut Self>) -> anyhow::Result<State> {
        let remaining = self.remaining;
        Ok(State::new("skip")
            .words([remaining])
            .input(self.project().input.save()?))
    }

    crate::checkpoint::positions_of_input!();
}
