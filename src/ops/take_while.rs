//! Saved state: `[1 once the predicate has failed, else 0]` and the input's state.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use futures::stream::Stream;
use pin_project::pin_project;

use crate::engine::{BoxStream, Cardinality, Ctx, Input, Operation, Resumable, Start, Unkeyed};

/// The [`take_while`](crate::Dataset::take_while) operation: the elements before the first
/// that fails `predicate`.
pub(crate) struct TakeWhile<P> {
    pub(crate) predicate: Unkeyed<Arc<P>>,
}

crate::engine::keyed_fields!(impl[P] TakeWhile<P> { keyed: [], unkeyed: [predicate] });

impl<T, P> Operation<T> for TakeWhile<P>
where
    T: Send + 'static,
    P: Fn(&T) -> bool + Send + Sync + 'static,
{
    type Out = T;
    type Stream = TakeWhileStream<BoxStream<T>, P>;
    const NAME: &'static str = "take_while";

    fn cardinality(&self, _: Cardinality) -> Cardinality {
        Cardinality::Unknown
    }

    /// Restored ended or not; in replay every element passes (they are ones that passed).
    fn open(&self, _: &Ctx, input: Input<'_, T>, start: Start<'_>) -> anyhow::Result<Self::Stream> {
        let done = match start {
            Start::Restore(state) => state.word(0)? == 1,
            Start::Fresh | Start::Replay(_) => false,
        };
        Ok(TakeWhileStream {
            input: input.open(),
            predicate: Arc::clone(&self.predicate),
            done,
        })
    }
}

/// Stream for the [`take_while`](crate::Dataset::take_while) method.
#[pin_project]
#[must_use = "streams do nothing unless polled"]
pub(crate) struct TakeWhileStream<St, P> {
    #[pin]
    input: St,
    predicate: Arc<P>,
    done: bool,
}

impl<St, P, T> Stream for TakeWhileStream<St, P>
where
    St: Stream<Item = anyhow::Result<T>>,
    P: Fn(&T) -> bool,
{
    type Item = anyhow::Result<T>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.project();
        if *this.done {
            return Poll::Ready(None);
        }
        match ready!(this.input.poll_next(cx)) {
            Some(Ok(x)) if (this.predicate)(&x) => Poll::Ready(Some(Ok(x))),
            Some(Ok(_)) => {
                *this.done = true;
                Poll::Ready(None)
            }
            Some(Err(e)) => Poll::Ready(Some(Err(e))),
            None => {
                *this.done = true;
                Poll::Ready(None)
            }
        }
    }
}

crate::engine::one_to_one!(
    impl[St: Resumable, P] TakeWhileStream<St, P>,
    |s| "take_while",
    [u64::from(s.done)]
);
