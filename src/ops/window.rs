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

/// A window still filling.
struct Open<T> {
    /// Index of its first input element.
    start: u64,
    items: Vec<T>,
    /// Positions taken so far, error elements included.
    taken: usize,
    /// The first error element among them: the window is then that error.
    error: Option<anyhow::Error>,
}

impl<T> Open<T> {
    fn finish(self) -> anyhow::Result<Vec<T>> {
        match self.error {
            Some(e) => Err(e),
            None => Ok(self.items),
        }
    }
}

/// Stream for the [`window`](crate::Dataset::window) method.
///
/// As in tf.data, an error element takes its position in every window that would hold it, and
/// each such window is yielded as that error, in its place (the first window gets the error
/// itself, later ones an error with its message).
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
    /// Windows still filling, oldest first.
    open: VecDeque<Open<T>>,
    /// Finished windows waiting to be yielded.
    done: VecDeque<anyhow::Result<Vec<T>>>,
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
                return Poll::Ready(Some(w));
            }
            if *this.ended {
                return Poll::Ready(None);
            }
            match ready!(this.input.as_mut().poll_next(cx)) {
                Some(item) => {
                    let j = *this.index;
                    *this.index += 1;
                    if j % *this.shift == 0 {
                        this.open.push_back(Open {
                            start: j,
                            items: Vec::with_capacity((*this.size).min(4096)),
                            taken: 0,
                            error: None,
                        });
                    }
                    let (size, stride) = (*this.size, *this.stride);
                    let wants = |w: &Open<T>| (j - w.start) % stride == 0 && w.taken < size;
                    let takers = this.open.iter().filter(|w| wants(w)).count();
                    match item {
                        Ok(x) => {
                            let mut x = Some(x);
                            let mut given = 0;
                            for w in this.open.iter_mut().filter(|w| wants(w)) {
                                given += 1;
                                w.taken += 1;
                                // Clone for all windows but the last, which takes the element.
                                let item = if given == takers { x.take() } else { x.clone() };
                                w.items.extend(item);
                            }
                        }
                        Err(e) => {
                            let message = format!("{e:#}");
                            let mut e = Some(e);
                            for w in this.open.iter_mut().filter(|w| wants(w)) {
                                w.taken += 1;
                                if w.error.is_none() {
                                    w.error = Some(
                                        e.take()
                                            .unwrap_or_else(|| anyhow::anyhow!(message.clone())),
                                    );
                                }
                            }
                        }
                    }
                    while this.open.front().is_some_and(|w| w.taken == size) {
                        if let Some(w) = this.open.pop_front() {
                            this.done.push_back(w.finish());
                        }
                    }
                }
                None => {
                    *this.ended = true;
                    let open = std::mem::take(this.open);
                    if !*this.drop_remainder {
                        this.done
                            .extend(open.into_iter().filter(|w| w.taken > 0).map(Open::finish));
                    }
                }
            }
        }
    }
}
