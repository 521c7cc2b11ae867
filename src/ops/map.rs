use std::pin::Pin;
use std::task::{Context, Poll, ready};

use crate::checkpoint::{Resumable, State};
use futures::stream::Stream;
use pin_project::pin_project;

use std::sync::Arc;

use crate::runtime::catch_panic;
use crate::stats::StageCounters;

/// Stream for the [`map`](crate::Dataset::map) and [`try_map`](crate::Dataset::try_map) methods.
#[pin_project]
#[must_use = "streams do nothing unless polled"]
pub(crate) struct Map<St, F> {
    #[pin]
    input: St,
    f: F,
    /// Where the errors `f` makes are counted, when the stage is counted by its input (its
    /// elements are its input's, less those errors).
    counters: Option<Arc<StageCounters>>,
}

impl<St, F> Map<St, F> {
    pub(crate) fn new(input: St, f: F, counters: Option<Arc<StageCounters>>) -> Self {
        Map { input, f, counters }
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
        Poll::Ready(match item {
            Some(Ok(x)) => match catch_panic("map", || f(x)) {
                Ok(y) => Some(Ok(y)),
                Err(e) => {
                    if let Some(counters) = this.counters {
                        counters.add_own_error();
                    }
                    Some(Err(e))
                }
            },
            Some(Err(e)) => Some(Err(e)),
            None => None,
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.input.size_hint()
    }
}

impl<St: Resumable, F> Resumable for Map<St, F> {
    fn save(self: Pin<&mut Self>) -> anyhow::Result<State> {
        Ok(State::new("map").input(self.project().input.save()?))
    }

    crate::checkpoint::positions_of_input!();
}
