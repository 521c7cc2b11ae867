use std::pin::Pin;
use std::task::{Context, Poll, ready};

use crate::engine::{BoxStream, Cardinality, Ctx, Input, Operation, Resumable, Start};
use futures::stream::Stream;
use pin_project::pin_project;

/// Stream for the [`skip`](crate::Dataset::skip) method.
#[pin_project]
#[must_use = "streams do nothing unless polled"]
pub(crate) struct SkipStream<St> {
    #[pin]
    input: St,
    count: u64,
    remaining: u64,
}

/// The [`skip`](crate::Dataset::skip) operation: all but the first `count` elements (none for
/// `u64::MAX`).
#[derive(Hash)]
pub(crate) struct Skip {
    pub(crate) count: u64,
}

impl<T: Send + 'static> Operation<T> for Skip {
    type Out = T;
    type Stream = SkipStream<BoxStream<T>>;
    const NAME: &'static str = "skip";

    /// As tf.data: an infinite or unknown input keeps its cardinality.
    fn cardinality(&self, input: Cardinality) -> Cardinality {
        input.map_finite(|n| n.saturating_sub(self.count))
    }

    /// Saved state: `[how many it must still skip]` and the input's.
    fn open(&self, _: &Ctx, input: Input<'_, T>, start: Start<'_>) -> anyhow::Result<Self::Stream> {
        let remaining = match start {
            Start::Fresh => self.count,
            Start::Restore(state) => state.word(0)?,
            // The elements replayed are ones it passed on: none is skipped.
            Start::Replay(_) => 0,
        };
        Ok(SkipStream {
            input: input.open(),
            count: self.count,
            remaining,
        })
    }
}

impl<St, T> Stream for SkipStream<St>
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

crate::engine::one_to_one!(impl[St: Resumable] SkipStream<St>, |s| "skip", [s.remaining]);
