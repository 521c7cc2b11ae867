use std::collections::HashSet;
use std::hash::Hash;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use futures::stream::Stream;
use pin_project::pin_project;

/// Stream for the [`unique`](crate::Dataset::unique) method.
#[pin_project]
#[must_use = "streams do nothing unless polled"]
pub(crate) struct Unique<St, T> {
    #[pin]
    input: St,
    seen: HashSet<T>,
}

impl<St, T> Unique<St, T> {
    pub(crate) fn new(input: St) -> Self {
        Unique {
            input,
            seen: HashSet::new(),
        }
    }
}

impl<St, T> Stream for Unique<St, T>
where
    St: Stream<Item = anyhow::Result<T>>,
    T: Clone + Eq + Hash,
{
    type Item = anyhow::Result<T>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let mut this = self.project();
        loop {
            match ready!(this.input.as_mut().poll_next(cx)) {
                Some(Ok(x)) => {
                    if !this.seen.contains(&x) {
                        this.seen.insert(x.clone());
                        return Poll::Ready(Some(Ok(x)));
                    }
                }
                other => return Poll::Ready(other),
            }
        }
    }
}
