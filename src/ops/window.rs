use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use futures::stream::{Fuse, Stream, StreamExt};
use pin_project::pin_project;

use crate::dataset::Cardinality;

pub(crate) fn cardinality(
    input: Cardinality,
    size: u64,
    shift: u64,
    stride: u64,
    drop_remainder: bool,
) -> Cardinality {
    input.map_finite(|n| {
        if drop_remainder {
            let first = (size - 1).saturating_mul(stride).saturating_add(1);
            if n < first {
                0
            } else {
                (n - first) / shift + 1
            }
        } else {
            n.div_ceil(shift)
        }
    })
}

/// Stream for the [`window`](crate::Dataset::window) method.
#[pin_project]
#[must_use = "streams do nothing unless polled"]
pub(crate) struct Window<St, T> {
    #[pin]
    input: Fuse<St>,
    size: usize,
    shift: u64,
    stride: u64,
    drop_remainder: bool,
    /// Index of the next input element.
    index: u64,
    /// Windows still filling, oldest first: (start index, elements).
    open: VecDeque<(u64, Vec<T>)>,
    /// Finished windows waiting to be yielded.
    done: VecDeque<Vec<T>>,
    ended: bool,
}

impl<St: Stream, T> Window<St, T> {
    pub(crate) fn new(
        input: St,
        size: usize,
        shift: usize,
        stride: usize,
        drop_remainder: bool,
    ) -> Self {
        Window {
            input: input.fuse(),
            size,
            shift: shift as u64,
            stride: stride as u64,
            drop_remainder,
            index: 0,
            open: VecDeque::new(),
            done: VecDeque::new(),
            ended: false,
        }
    }
}

impl<St, T> Stream for Window<St, T>
where
    St: Stream<Item = anyhow::Result<T>>,
    T: Clone,
{
    type Item = anyhow::Result<Vec<T>>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let mut this = self.project();
        loop {
            if let Some(w) = this.done.pop_front() {
                return Poll::Ready(Some(Ok(w)));
            }
            if *this.ended {
                return Poll::Ready(None);
            }
            match ready!(this.input.as_mut().poll_next(cx)) {
                Some(Ok(x)) => {
                    let j = *this.index;
                    *this.index += 1;
                    if j % *this.shift == 0 {
                        this.open
                            .push_back((j, Vec::with_capacity((*this.size).min(4096))));
                    }
                    let (size, stride) = (*this.size, *this.stride);
                    let wants =
                        |(start, w): &(u64, Vec<T>)| (j - start) % stride == 0 && w.len() < size;
                    let takers = this.open.iter().filter(|w| wants(w)).count();
                    let mut x = Some(x);
                    let mut given = 0;
                    for w in this.open.iter_mut().filter(|w| wants(w)) {
                        given += 1;
                        // Clone for all windows but the last, which takes the element itself.
                        let item = if given == takers { x.take() } else { x.clone() };
                        w.1.extend(item);
                    }
                    while this.open.front().is_some_and(|(_, w)| w.len() == size) {
                        if let Some((_, w)) = this.open.pop_front() {
                            this.done.push_back(w);
                        }
                    }
                }
                Some(Err(e)) => return Poll::Ready(Some(Err(e))),
                None => {
                    *this.ended = true;
                    let open = std::mem::take(this.open);
                    if !*this.drop_remainder {
                        this.done
                            .extend(open.into_iter().map(|(_, w)| w).filter(|w| !w.is_empty()));
                    }
                }
            }
        }
    }
}
