use std::pin::Pin;
use std::task::{Context, Poll, ready};

use futures::stream::Stream;
use pin_project::pin_project;

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
