use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use futures::stream::{Fuse, Stream, StreamExt};
use pin_project::pin_project;

use crate::dataset::Cardinality;

pub(crate) fn cardinality(input: Cardinality, size: u64, drop_remainder: bool) -> Cardinality {
    input.map_finite(|n| {
        if drop_remainder {
            n / size
        } else {
            n.div_ceil(size)
        }
    })
}

/// Stream for the [`batch`](crate::Dataset::batch) method, and the last step of
/// [`rebatch`](crate::Dataset::rebatch) and [`rebatch_sizes`](crate::Dataset::rebatch_sizes).
#[pin_project]
#[must_use = "streams do nothing unless polled"]
pub(crate) struct Batch<St, T> {
    #[pin]
    input: Fuse<St>,
    buf: Vec<T>,
    /// The size of the batch being filled.
    size: usize,
    /// The sizes taken in turn (`rebatch_sizes`), and the index of the current one; `None`
    /// for one size.
    sizes: Option<(Arc<[usize]>, usize)>,
    drop_remainder: bool,
}

impl<St: Stream, T> Batch<St, T> {
    pub(crate) fn new(input: St, size: usize, drop_remainder: bool) -> Self {
        Batch {
            input: input.fuse(),
            buf: Vec::with_capacity(size.min(4096)),
            size,
            sizes: None,
            drop_remainder,
        }
    }

    /// Batches of `sizes[0]`, `sizes[1]`, ..., then `sizes[0]` again (none of them 0).
    pub(crate) fn cycling(input: St, sizes: Arc<[usize]>, drop_remainder: bool) -> Self {
        let mut batch = Self::new(input, sizes[0], drop_remainder);
        batch.sizes = Some((sizes, 0));
        batch
    }

    /// The smallest and largest batch sizes.
    fn size_range(&self) -> (usize, usize) {
        match &self.sizes {
            Some((sizes, _)) => sizes
                .iter()
                .fold((usize::MAX, 0), |(lo, hi), &n| (lo.min(n), hi.max(n))),
            None => (self.size, self.size),
        }
    }
}

impl<St, T> Stream for Batch<St, T>
where
    St: Stream<Item = anyhow::Result<T>>,
{
    type Item = anyhow::Result<Vec<T>>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let mut this = self.project();
        loop {
            match ready!(this.input.as_mut().poll_next(cx)) {
                Some(Ok(x)) => {
                    this.buf.push(x);
                    if this.buf.len() == *this.size {
                        if let Some((sizes, i)) = this.sizes {
                            *i = (*i + 1) % sizes.len();
                            *this.size = sizes[*i];
                        }
                        let full =
                            std::mem::replace(this.buf, Vec::with_capacity((*this.size).min(4096)));
                        return Poll::Ready(Some(Ok(full)));
                    }
                }
                Some(Err(e)) => {
                    // As tf.data's batch: an error element fails the batch being filled, and
                    // the elements gathered into it are lost with it.
                    this.buf.clear();
                    return Poll::Ready(Some(Err(e)));
                }
                None => {
                    if this.buf.is_empty() || *this.drop_remainder {
                        this.buf.clear();
                        return Poll::Ready(None);
                    }
                    return Poll::Ready(Some(Ok(std::mem::take(this.buf))));
                }
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let (lo, hi) = self.input.size_hint();
        let pending = self.buf.len();
        // Each batch takes between the smallest and the largest size.
        let (smallest, largest) = self.size_range();
        let lo = if self.drop_remainder {
            (lo + pending) / largest
        } else {
            (lo + pending).div_ceil(largest)
        };
        let hi = hi.map(|h| (h + pending).div_ceil(smallest));
        (lo, hi)
    }
}
