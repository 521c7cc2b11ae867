//! `from_vec` and `from_iter`: elements from memory.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::stream::Stream;

use crate::dataset::{Cardinality, Dataset};
use crate::runtime::Coop;

pub(crate) fn from_vec<T: Clone + Send + Sync + 'static>(items: Vec<T>) -> Dataset<T> {
    let items: Arc<[T]> = items.into();
    let card = Cardinality::Finite(items.len() as u64);
    Dataset::source("from_tensor_slices", card, move |_| {
        let items = Arc::clone(&items);
        let len = items.len();
        FromIter::new((0..len).map(move |i| items[i].clone()))
    })
}

pub(crate) fn from_iter<T, I>(items: I) -> Dataset<T>
where
    T: Send + 'static,
    I: IntoIterator<Item = T> + Clone + Send + Sync + 'static,
    I::IntoIter: Send + 'static,
{
    let card = match items.clone().into_iter().size_hint() {
        (lo, Some(hi)) if lo == hi => Cardinality::Finite(lo as u64),
        _ => Cardinality::Unknown,
    };
    Dataset::source("from_iter", card, move |_| {
        FromIter::new(items.clone().into_iter())
    })
}

/// Stream for [`Dataset::from_vec`] and [`Dataset::from_iter`].
#[derive(Debug)]
#[must_use = "streams do nothing unless polled"]
pub(crate) struct FromIter<I> {
    iter: I,
    coop: Coop,
}

impl<I> FromIter<I> {
    pub(crate) fn new(iter: I) -> Self {
        FromIter {
            iter,
            coop: Coop::default(),
        }
    }
}

// The iterator is never pinned.
impl<I> Unpin for FromIter<I> {}

impl<I: Iterator> Stream for FromIter<I> {
    type Item = anyhow::Result<I::Item>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        std::task::ready!(this.coop.poll_proceed(cx));
        Poll::Ready(this.iter.next().map(Ok))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.iter.size_hint()
    }
}
