use std::pin::Pin;
use std::task::{Context, Poll, ready};

use crate::engine::{BoxStream, Cardinality, Ctx, Input, Operation, Resumable, Start};
use futures::stream::Stream;
use pin_project::pin_project;

/// Stream for the [`take`](crate::Dataset::take) method.
#[pin_project]
#[must_use = "streams do nothing unless polled"]
pub(crate) struct TakeStream<St> {
    #[pin]
    input: St,
    remaining: u64,
}

/// The [`take`](crate::Dataset::take) operation: the first `count` elements (all of them for
/// `u64::MAX`).
#[derive(Hash)]
pub(crate) struct Take {
    pub(crate) count: u64,
}

impl<T: Send + 'static> Operation<T> for Take {
    type Out = T;
    type Stream = TakeStream<BoxStream<T>>;
    const NAME: &'static str = "take";

    fn cardinality(&self, input: Cardinality) -> Cardinality {
        match input {
            _ if self.count == u64::MAX => input,
            Cardinality::Finite(n) => Cardinality::Finite(n.min(self.count)),
            Cardinality::Infinite => Cardinality::Finite(self.count),
            Cardinality::Unknown => Cardinality::Unknown,
        }
    }

    /// Saved state: `[how many it may still take]` and the input's.
    fn open(&self, _: &Ctx, input: Input<'_, T>, start: Start<'_>) -> anyhow::Result<Self::Stream> {
        let remaining = match start {
            Start::Fresh => self.count,
            Start::Restore(state) => state.word(0)?,
            // The elements replayed are ones it passed on: none is held back.
            Start::Replay(_) => u64::MAX,
        };
        Ok(TakeStream {
            input: input.open(),
            remaining,
        })
    }
}

impl<St, T> Stream for TakeStream<St>
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

crate::engine::one_to_one!(impl[St: Resumable] TakeStream<St>, |s| "take", [s.remaining]);
