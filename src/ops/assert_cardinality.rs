//! Saved state: `[elements passed on]` and the input's state.

use std::pin::Pin;
use std::task::{Context, Poll, ready};

use futures::stream::Stream;
use pin_project::pin_project;

use crate::checkpoint::{Resumable, State};

/// Stream for the [`assert_cardinality`](crate::Dataset::assert_cardinality) method.
#[pin_project]
#[must_use = "streams do nothing unless polled"]
pub(crate) struct AssertCardinality<St> {
    #[pin]
    input: St,
    expected: u64,
    /// Elements passed on so far.
    seen: u64,
    done: bool,
    /// Pass everything through (in replay: the elements are ones it passed on).
    unchecked: bool,
}

impl<St> AssertCardinality<St> {
    pub(crate) fn new(input: St, expected: u64, seen: u64) -> Self {
        AssertCardinality {
            input,
            expected,
            seen,
            done: false,
            unchecked: false,
        }
    }

    fn unchecked(mut self) -> Self {
        self.unchecked = true;
        self
    }
}

impl<St, T> Stream for AssertCardinality<St>
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

impl<St: Resumable> Resumable for AssertCardinality<St> {
    fn save(self: Pin<&mut Self>) -> anyhow::Result<State> {
        let seen = self.seen;
        Ok(State::new("assert_cardinality")
            .words([seen])
            .input(self.project().input.save()?))
    }

    crate::checkpoint::positions_of_input!();
}

impl<T: Send + 'static> crate::Dataset<T> {
    /// The same elements, with a known [`cardinality`](crate::Dataset::cardinality) of
    /// `expected`, checked as the epoch runs (tf.data's
    /// `tf.data.experimental.assert_cardinality`): stages downstream (`batch`) and callers
    /// (a progress bar, a learning-rate schedule) can count on the number before the epoch.
    ///
    /// ```
    /// use streamload::{Cardinality, Dataset};
    /// # tokio_test::block_on(async {
    /// let ds = Dataset::range(0, 10).filter(|x| x % 2 == 0); // unknown cardinality
    /// let ds = ds.assert_cardinality(5).batch(2);
    /// assert_eq!(ds.cardinality(), Cardinality::Finite(3));
    /// assert_eq!(ds.count().await?, 3);
    ///
    /// let wrong = Dataset::range(0, 4).filter(|x| x % 2 == 0).assert_cardinality(3);
    /// let err = wrong.collect().await.unwrap_err();
    /// assert!(err.to_string().contains("expected to contain 3 elements but contained only 2"));
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    ///
    /// # Errors
    ///
    /// An [`Error::InvalidArgument`](crate::Error::InvalidArgument) element, after which the
    /// epoch ends, when the input has more elements than `expected` (in place of the first
    /// one too many) or fewer (at its end). Error elements pass through and are not counted.
    pub fn assert_cardinality(&self, expected: u64) -> crate::Dataset<T> {
        self.unary_resumable(
            "assert_cardinality",
            crate::Cardinality::Finite(expected),
            crate::dataset::Counting::Wrapped,
            move |ctx, input| {
                // In replay the elements are ones it passed on: nothing to count.
                let (expected, seen) = match (ctx.replaying(), ctx.restoring()) {
                    (Some(_), _) => return AssertCardinality::new(input, u64::MAX, 0).unchecked(),
                    (None, Some(state)) => (expected, state.word(0).unwrap_or(0)),
                    (None, None) => (expected, 0),
                };
                AssertCardinality::new(input, expected, seen)
            },
        )
        .keyed(expected)
    }
}
