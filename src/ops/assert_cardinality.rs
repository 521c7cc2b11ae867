//! Saved state: `[elements passed on]`, then `[1]` once it has ended (at the input's end or
//! at its error: a resume passes on nothing more), and the input's state.

use std::pin::Pin;
use std::task::{Context, Poll, ready};

use futures::stream::Stream;
use pin_project::pin_project;

use crate::engine::{BoxStream, Cardinality, Ctx, Input, Operation, Resumable, Start};

/// Stream for the [`assert_cardinality`](crate::Dataset::assert_cardinality) method.
#[pin_project]
#[must_use = "streams do nothing unless polled"]
pub(crate) struct AssertCardinalityStream<St> {
    #[pin]
    input: St,
    expected: u64,
    /// Elements passed on so far.
    seen: u64,
    done: bool,
    /// Pass everything through (in replay: the elements are ones it passed on).
    unchecked: bool,
}

/// The [`assert_cardinality`](crate::Dataset::assert_cardinality) operation.
#[derive(Hash)]
pub(crate) struct AssertCardinality {
    pub(crate) expected: u64,
}

impl<T: Send + 'static> Operation<T> for AssertCardinality {
    type Out = T;
    type Stream = AssertCardinalityStream<BoxStream<T>>;
    const NAME: &'static str = "assert_cardinality";

    fn cardinality(&self, _: Cardinality) -> Cardinality {
        Cardinality::Finite(self.expected)
    }

    /// In replay the elements are ones it passed on: nothing to count.
    fn open(&self, _: &Ctx, input: Input<'_, T>, start: Start<'_>) -> anyhow::Result<Self::Stream> {
        let (expected, seen, done, unchecked) = match start {
            Start::Fresh => (self.expected, 0, false, false),
            Start::Restore(state) => {
                let done = state.words.get(1) == Some(&1);
                (self.expected, state.word(0)?, done, false)
            }
            Start::Replay(_) => (u64::MAX, 0, false, true),
        };
        Ok(AssertCardinalityStream {
            input: input.open(),
            expected,
            seen,
            done,
            unchecked,
        })
    }
}

impl<St, T> Stream for AssertCardinalityStream<St>
where
    St: Stream<Item = anyhow::Result<T>>,
{
    type Item = anyhow::Result<T>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.project();
        if *this.done {
            return Poll::Ready(None);
        }
        let item = ready!(this.input.poll_next(cx));
        if *this.unchecked {
            return Poll::Ready(item);
        }
        match item {
            Some(Ok(x)) => {
                *this.seen += 1;
                if *this.seen > *this.expected {
                    *this.done = true;
                    return Poll::Ready(Some(Err(mismatch(
                        *this.expected,
                        "at least",
                        *this.seen,
                    ))));
                }
                Poll::Ready(Some(Ok(x)))
            }
            Some(Err(e)) => Poll::Ready(Some(Err(e))),
            None => {
                *this.done = true;
                if *this.seen < *this.expected {
                    return Poll::Ready(Some(Err(mismatch(*this.expected, "only", *this.seen))));
                }
                Poll::Ready(None)
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.input.size_hint()
    }
}

/// tf.data's words: "Input dataset was expected to contain N elements but contained only M
/// elements." (or "at least M" when it has more).
fn mismatch(expected: u64, how: &str, seen: u64) -> anyhow::Error {
    crate::Error::InvalidArgument(format!(
        "assert_cardinality: input dataset was expected to contain {expected} elements but \
         contained {how} {seen} elements"
    ))
    .into()
}

crate::engine::one_to_one!(
    impl[St: Resumable] AssertCardinalityStream<St>,
    |s| "assert_cardinality",
    [s.seen].into_iter().chain(s.done.then_some(1))
);
