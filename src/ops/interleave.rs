use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use futures::stream::{Fuse, FusedStream, Stream, StreamExt};

use crate::dataset::{BoxStream, Ctx, Dataset};
use crate::runtime::catch_panic;

/// An open inner dataset in a slot of the cycle: a stream, or a reader task's receiver.
pub(crate) trait Slot<U> {
    fn poll_slot(&mut self, cx: &mut Context<'_>) -> Poll<Option<anyhow::Result<U>>>;
}

impl<U> Slot<U> for BoxStream<U> {
    fn poll_slot(&mut self, cx: &mut Context<'_>) -> Poll<Option<anyhow::Result<U>>> {
        self.as_mut().poll_next(cx)
    }
}

/// tf.data's interleave cycle: `cycle_length` slots, and a cursor that says which slot is next
/// and how far into its block it is.
pub(crate) struct Cycle<S> {
    pub(crate) slots: Vec<Option<S>>,
    pub(crate) cycle_index: usize,
    block_index: usize,
    block_length: usize,
    pub(crate) num_open: usize,
    /// Whether an inner error element takes a place in its block (tf.data's parallel
    /// interleave) or not (its sequential interleave).
    errors_in_blocks: bool,
}

impl<S> Cycle<S> {
    pub(crate) fn new(cycle_length: usize, block_length: usize) -> Self {
        Cycle {
            slots: (0..cycle_length).map(|_| None).collect(),
            cycle_index: 0,
            block_index: 0,
            block_length,
            num_open: 0,
            errors_in_blocks: false,
        }
    }

    /// Counts inner error elements in their blocks, as tf.data's parallel interleave does
    /// (its sequential one does not).
    pub(crate) fn counting_errors_in_blocks(mut self) -> Self {
        self.errors_in_blocks = true;
        self
    }

    /// After an element was produced from slot `i`: count it in its block, and move on when
    /// the block is complete.
    pub(crate) fn advance_position(&mut self, i: usize) {
        if i != self.cycle_index {
            self.cycle_index = i;
            self.block_index = 0;
        }
        self.block_index += 1;
        if self.block_index == self.block_length {
            self.advance_to_next_in_cycle();
        }
    }

    /// Move on to the next slot, at the start of its block.
    pub(crate) fn advance_to_next_in_cycle(&mut self) {
        self.block_index = 0;
        self.cycle_index = (self.cycle_index + 1) % self.slots.len();
    }

    pub(crate) fn open(&mut self, i: usize, slot: S) {
        self.slots[i] = Some(slot);
        self.num_open += 1;
    }

    pub(crate) fn close(&mut self, i: usize) {
        self.slots[i] = None;
        self.num_open -= 1;
    }

    /// tf.data's `InterleaveDatasetOp::GetNext`: take from the slot under the cursor; an
    /// exhausted slot is freed and the cursor moves on at once; a free slot under the cursor
    /// is filled with the next input element (`next`, which yields `Ready(None)` once the input
    /// has ended). An error is yielded without moving the cursor, as tf.data's `GetNext`
    /// returning an error does, unless errors count in blocks
    /// ([`counting_errors_in_blocks`](Cycle::counting_errors_in_blocks)).
    pub(crate) fn poll_in_order<U>(
        &mut self,
        cx: &mut Context<'_>,
        mut next: impl FnMut(&mut Context<'_>) -> Poll<Option<anyhow::Result<S>>>,
    ) -> Poll<Option<anyhow::Result<U>>>
    where
        S: Slot<U>,
    {
        let mut input_ended = false;
        loop {
            let ci = self.cycle_index;
            if let Some(slot) = &mut self.slots[ci] {
                match ready!(slot.poll_slot(cx)) {
                    Some(Ok(x)) => {
                        self.advance_position(ci);
                        return Poll::Ready(Some(Ok(x)));
                    }
                    Some(Err(e)) => {
                        if self.errors_in_blocks {
                            self.advance_position(ci);
                        }
                        return Poll::Ready(Some(Err(e)));
                    }
                    None => {
                        self.close(ci);
                        self.advance_to_next_in_cycle();
                    }
                }
            } else if !input_ended {
                match ready!(next(cx)) {
                    Some(Ok(slot)) => self.open(ci, slot),
                    Some(Err(e)) => return Poll::Ready(Some(Err(e))),
                    None => input_ended = true,
                }
            } else if self.num_open == 0 {
                return Poll::Ready(None);
            } else {
                self.advance_to_next_in_cycle();
            }
        }
    }
}

/// Opens the inner dataset for one input element, turning a panic in `f` into an error.
pub(crate) fn open<T, U, F>(
    f: &F,
    x: T,
    ctx: &Ctx,
    stage: &'static str,
) -> anyhow::Result<BoxStream<U>>
where
    U: Send + 'static,
    F: Fn(T) -> Dataset<U>,
{
    catch_panic(stage, || Ok(f(x))).map(|ds| ds.build(ctx))
}

/// Stream for the [`interleave`](crate::Dataset::interleave) and
/// [`flat_map`](crate::Dataset::flat_map) methods: [`Cycle::poll_in_order`] over inner
/// streams polled in place.
#[must_use = "streams do nothing unless polled"]
pub(crate) struct Interleave<T, U, F> {
    input: Fuse<BoxStream<T>>,
    f: Arc<F>,
    ctx: Ctx,
    cycle: Cycle<BoxStream<U>>,
}

impl<T, U, F> Interleave<T, U, F> {
    pub(crate) fn new(
        input: BoxStream<T>,
        f: Arc<F>,
        ctx: Ctx,
        cycle_length: usize,
        block_length: usize,
    ) -> Self {
        Interleave {
            input: input.fuse(),
            f,
            ctx,
            cycle: Cycle::new(cycle_length, block_length),
        }
    }
}

impl<T, U, F> Stream for Interleave<T, U, F>
where
    T: Send + 'static,
    U: Send + 'static,
    F: Fn(T) -> Dataset<U>,
{
    type Item = anyhow::Result<U>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let Interleave {
            input,
            f,
            ctx,
            cycle,
        } = self.get_mut();
        cycle.poll_in_order(cx, |cx| {
            if input.is_terminated() {
                return Poll::Ready(None);
            }
            Poll::Ready(
                ready!(input.poll_next_unpin(cx))
                    .map(|x| x.and_then(|x| open(&**f, x, ctx, "interleave"))),
            )
        })
    }
}
