use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::stream::{Fuse, Stream, StreamExt};

use crate::dataset::{BoxStream, Ctx, Dataset};
use crate::runtime::catch_panic;

/// tf.data's interleave cursor: which slot of the cycle is next, and how far into its block.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Cursor {
    pub(crate) cycle_index: usize,
    block_index: usize,
    cycle_length: usize,
    block_length: usize,
}

impl Cursor {
    pub(crate) fn new(cycle_length: usize, block_length: usize) -> Self {
        Cursor {
            cycle_index: 0,
            block_index: 0,
            cycle_length,
            block_length,
        }
    }

    /// After an element was produced from the current slot.
    pub(crate) fn advance_position(&mut self) {
        self.block_index += 1;
        if self.block_index == self.block_length {
            self.advance_to_next_in_cycle();
        }
    }

    /// Continue from slot `i`, at the start of its block.
    pub(crate) fn jump_to(&mut self, i: usize) {
        self.cycle_index = i;
        self.block_index = 0;
    }

    /// Move on to the next slot, at the start of its block.
    pub(crate) fn advance_to_next_in_cycle(&mut self) {
        self.block_index = 0;
        self.cycle_index = (self.cycle_index + 1) % self.cycle_length;
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
/// [`flat_map`](crate::Dataset::flat_map) methods.
///
/// The algorithm is tf.data's `InterleaveDatasetOp`: an error from an inner dataset is
/// yielded without moving the cursor, like tf.data's `GetNext` returning an error.
#[must_use = "streams do nothing unless polled"]
pub(crate) struct Interleave<T, U, F> {
    input: Fuse<BoxStream<T>>,
    f: Arc<F>,
    ctx: Ctx,
    slots: Vec<Option<BoxStream<U>>>,
    cursor: Cursor,
    num_open: usize,
    end_of_input: bool,
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
            slots: (0..cycle_length).map(|_| None).collect(),
            cursor: Cursor::new(cycle_length, block_length),
            num_open: 0,
            end_of_input: false,
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
        let this = self.get_mut();
        while !this.end_of_input || this.num_open > 0 {
            let slot = &mut this.slots[this.cursor.cycle_index];
            if let Some(inner) = slot {
                match inner.as_mut().poll_next(cx) {
                    Poll::Ready(Some(Ok(x))) => {
                        this.cursor.advance_position();
                        return Poll::Ready(Some(Ok(x)));
                    }
                    Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(e))),
                    Poll::Ready(None) => {
                        *slot = None;
                        this.num_open -= 1;
                        this.cursor.advance_to_next_in_cycle();
                    }
                    Poll::Pending => return Poll::Pending,
                }
            } else if !this.end_of_input {
                match this.input.poll_next_unpin(cx) {
                    Poll::Ready(Some(Ok(x))) => match open(&*this.f, x, &this.ctx, "interleave") {
                        Ok(inner) => {
                            *slot = Some(inner);
                            this.num_open += 1;
                        }
                        Err(e) => return Poll::Ready(Some(Err(e))),
                    },
                    Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(e))),
                    Poll::Ready(None) => this.end_of_input = true,
                    Poll::Pending => return Poll::Pending,
                }
            } else {
                this.cursor.advance_to_next_in_cycle();
            }
        }
        Poll::Ready(None)
    }
}
