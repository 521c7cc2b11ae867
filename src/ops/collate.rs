//! Saved state: `[index of the next batch]` (for error messages) and the input's state.

use std::pin::Pin;
use std::task::{Context, Poll, ready};

use anyhow::Context as _;
use futures::stream::Stream;
use pin_project::pin_project;

use crate::engine::{BoxStream, Cardinality, Ctx, Input, Operation, Resumable, Start};
use crate::runtime::catch_panic;

/// The [`collate`](crate::Dataset::collate) operation: each batch's elements stacked.
#[derive(Hash)]
pub(crate) struct Collate;

/// How [`Collate`] stacks a batch.
type Stack<T> = fn(Vec<T>) -> anyhow::Result<<T as crate::tensor::Collate>::Batch>;

impl<T> Operation<Vec<T>> for Collate
where
    T: crate::tensor::Collate + Send + 'static,
    T::Batch: Send + 'static,
{
    type Out = T::Batch;
    type Stream = CollateBatches<BoxStream<Vec<T>>, Stack<T>>;
    const NAME: &'static str = "collate";

    fn cardinality(&self, input: Cardinality) -> Cardinality {
        input
    }

    fn open(
        &self,
        ctx: &Ctx,
        input: Input<'_, Vec<T>>,
        _: Start<'_>,
    ) -> anyhow::Result<Self::Stream> {
        let stack: Stack<T> = |batch| T::collate(&batch);
        Ok(build(ctx, input.open(), "collate", stack))
    }
}

/// The collating stream of one epoch over `input` (built by the caller with
/// `ctx.for_input(0)`): fresh, restored (its batch index saved) or in replay (one batch per
/// input batch, so the positions pass through).
pub(crate) fn build<St, F>(
    ctx: &Ctx,
    input: St,
    stage: &'static str,
    f: F,
) -> CollateBatches<St, F> {
    let mut collate = CollateBatches::new(input, stage, f);
    if let Some(state) = ctx.restoring().filter(|_| ctx.replaying().is_none()) {
        match state.word(0) {
            Ok(index) => collate.index = index,
            Err(e) => collate.failed = Some(e),
        }
    }
    collate
}

/// Stream for the [`collate`](crate::Dataset::collate) method, and the last step of
/// [`padded_batch`](crate::Dataset::padded_batch) and
/// [`ragged_batch`](crate::Dataset::ragged_batch): turns each batch (a `Vec`) into tensors
/// with `f`, numbering the batches so an error names the one it is about.
#[pin_project]
#[must_use = "streams do nothing unless polled"]
pub(crate) struct CollateBatches<St, F> {
    #[pin]
    input: St,
    f: F,
    stage: &'static str,
    /// The index of the next batch (error elements are not batches and are not counted).
    index: u64,
    /// A restore that failed: yielded first, then the stream ends.
    failed: Option<anyhow::Error>,
    ended: bool,
}

impl<St, F> CollateBatches<St, F> {
    pub(crate) fn new(input: St, stage: &'static str, f: F) -> Self {
        CollateBatches {
            input,
            f,
            stage,
            index: 0,
            failed: None,
            ended: false,
        }
    }
}

impl<St, F, T, U> Stream for CollateBatches<St, F>
where
    St: Stream<Item = anyhow::Result<Vec<T>>>,
    F: Fn(Vec<T>) -> anyhow::Result<U>,
{
    type Item = anyhow::Result<U>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.project();
        if *this.ended {
            return Poll::Ready(None);
        }
        if let Some(e) = this.failed.take() {
            *this.ended = true;
            return Poll::Ready(Some(Err(e)));
        }
        let item = match ready!(this.input.poll_next(cx)) {
            Some(Ok(batch)) => {
                let index = *this.index;
                *this.index += 1;
                let (stage, f) = (*this.stage, &*this.f);
                catch_panic(stage, || f(batch)).with_context(|| format!("{stage}: batch {index}"))
            }
            Some(Err(e)) => Err(e),
            None => return Poll::Ready(None),
        };
        Poll::Ready(Some(item))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.input.size_hint()
    }
}

crate::engine::one_to_one!(impl[St: Resumable, F] CollateBatches<St, F>, |s| s.stage, [s.index]);
