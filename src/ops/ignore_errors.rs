//! Saved state: the input's (errors are dropped as they come; nothing is held). A refused
//! resume ([`is_refusal`](crate::error::is_refusal)) is passed on, never dropped.

use std::pin::Pin;
use std::task::{Context, Poll, ready};

use futures::stream::Stream;
use pin_project::pin_project;

use crate::engine::{BoxStream, Cardinality, Ctx, Input, Operation, Resumable, Start};

/// The [`ignore_errors`](crate::Dataset::ignore_errors) operation: the elements, without the
/// errors.
#[derive(Hash)]
pub(crate) struct IgnoreErrors;

impl<T: Send + 'static> Operation<T> for IgnoreErrors {
    type Out = T;
    type Stream = IgnoreErrorsStream<BoxStream<T>>;
    const NAME: &'static str = "ignore_errors";

    /// tf.data reports unknown whatever the input (even an infinite one).
    fn cardinality(&self, _: Cardinality) -> Cardinality {
        Cardinality::Unknown
    }

    fn open(&self, _: &Ctx, input: Input<'_, T>, _: Start<'_>) -> anyhow::Result<Self::Stream> {
        Ok(IgnoreErrorsStream {
            input: input.open(),
        })
    }
}

/// Stream for the [`ignore_errors`](crate::Dataset::ignore_errors) method.
#[pin_project]
#[must_use = "streams do nothing unless polled"]
pub(crate) struct IgnoreErrorsStream<St> {
    #[pin]
    input: St,
}

impl<St, T> Stream for IgnoreErrorsStream<St>
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

crate::engine::one_to_one!(impl[St: Resumable] IgnoreErrorsStream<St>, |_| "ignore_errors", []);
