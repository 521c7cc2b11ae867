//! Saved state: `[position of the next element within its group of num_shards]` and the
//! input's state.

use std::pin::Pin;
use std::task::{Context, Poll, ready};

use futures::stream::Stream;
use pin_project::pin_project;

use crate::checkpoint::{Resumable, State};
use crate::dataset::{BoxStream, Ctx, Dataset, error_stream};

/// The shard of one epoch: fresh, restored, or in replay (the elements replayed are ones it
/// kept: it keeps them all).
pub(crate) fn build<T: Send + 'static>(
    ctx: &Ctx,
    input: &Dataset<T>,
    num_shards: u64,
    index: u64,
) -> Shard<BoxStream<T>> {
    if ctx.replaying().is_some() {
        return Shard::new(input.build(&ctx.for_input(0)), 1, 0);
    }
    let position = match ctx.restoring().map(|s| s.word(0)).transpose() {
        Ok(position) => position.unwrap_or(0) % num_shards,
        Err(e) => return Shard::new(error_stream(e), 1, 0),
    };
    let mut shard = Shard::new(input.build(&ctx.for_input(0)), num_shards, index);
    shard.position = position;
    shard
}

/// Stream for the [`shard`](crate::Dataset::shard) method.
#[pin_project]
#[must_use = "streams do nothing unless polled"]
pub(crate) struct Shard<St> {
    #[pin]
    input: St,
    num_shards: u64,
    index: u64,
    /// Position of the next element within its group of `num_shards`.
    position: u64,
}

impl<St> Shard<St> {
    pub(crate) fn new(input: St, num_shards: u64, index: u64) -> Self {
        Shard {
            input,
            num_shards,
            index,
            position: 0,
        }
    }
}

impl<St, T> Stream for Shard<St>
where
    St: Stream<Item = anyhow::Result<T>>,
{
    type Item = anyhow::Result<T>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let mut this = self.project();
        loop {
            match ready!(this.input.as_mut().poll_next(cx)) {
                Some(Ok(x)) => {
                    let mine = *this.position == *this.index;
                    *this.position += 1;
                    if *this.position == *this.num_shards {
                        *this.position = 0;
                    }
                    if mine {
                        return Poll::Ready(Some(Ok(x)));
                    }
                }
                other => return Poll::Ready(other),
            }
        }
    }
}

impl<St: Resumable> Resumable for Shard<St> {
    fn save(self: Pin<&mut Self>) -> anyhow::Result<State> {
        let position = self.position;
        Ok(State::new("shard")
            .words([position])
            .input(self.project().input.save()?))
    }

    crate::checkpoint::positions_of_input!();
}
