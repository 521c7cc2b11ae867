//! Saved state: `[position of the next element within its group of num_shards]` and the
//! input's state.

use std::pin::Pin;
use std::task::{Context, Poll, ready};

use futures::stream::Stream;
use pin_project::pin_project;

use crate::engine::{BoxStream, Cardinality, Ctx, Input, Operation, Resumable, Start};

/// The [`shard`](crate::Dataset::shard) operation: every `num_shards`-th element from `index`.
#[derive(Hash)]
pub(crate) struct Shard {
    pub(crate) num_shards: u64,
    pub(crate) index: u64,
}

impl<T: Send + 'static> Operation<T> for Shard {
    type Out = T;
    type Stream = ShardStream<BoxStream<T>>;
    const NAME: &'static str = "shard";

    fn cardinality(&self, input: Cardinality) -> Cardinality {
        let (shards, index) = (self.num_shards, self.index);
        input.map_finite(|n| n / shards + u64::from(index < n % shards))
    }

    /// In replay it keeps every element (the elements replayed are ones it kept).
    fn open(&self, _: &Ctx, input: Input<'_, T>, start: Start<'_>) -> anyhow::Result<Self::Stream> {
        let (num_shards, index, position) = match start {
            Start::Fresh => (self.num_shards, self.index, 0),
            Start::Restore(state) => (
                self.num_shards,
                self.index,
                state.word(0)? % self.num_shards,
            ),
            Start::Replay(_) => (1, 0, 0),
        };
        Ok(ShardStream {
            input: input.open(),
            num_shards,
            index,
            position,
        })
    }
}

/// Stream for the [`shard`](crate::Dataset::shard) method.
#[pin_project]
#[must_use = "streams do nothing unless polled"]
pub(crate) struct ShardStream<St> {
    #[pin]
    input: St,
    num_shards: u64,
    index: u64,
    /// Position of the next element within its group of `num_shards`.
    position: u64,
}

impl<St, T> Stream for ShardStream<St>
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

crate::engine::one_to_one!(impl[St: Resumable] ShardStream<St>, |s| "shard", [s.position]);
