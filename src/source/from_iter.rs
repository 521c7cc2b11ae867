//! `from_vec` and `from_iter`: elements from memory.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::stream::Stream;

use crate::engine::{BoxStream, Cardinality, Ctx, Dataset, Source, Start, Unkeyed};
use crate::engine::{ReplaySource, unsupported};
use crate::runtime::Coop;

pub(crate) fn from_vec<T: Clone + Send + Sync + 'static>(items: Vec<T>) -> Dataset<T> {
    let items: Arc<[T]> = items.into();
    Dataset::from_source(Slices {
        len: items.len(),
        items: Unkeyed(items),
    })
}

/// [`Dataset::from_vec`] (tf.data's `from_tensor_slices`): keyed by its length (the
/// elements themselves cannot be hashed).
struct Slices<T> {
    len: usize,
    items: Unkeyed<Arc<[T]>>,
}

crate::engine::keyed_fields!(impl[T] Slices<T> { keyed: [len], unkeyed: [items] });

impl<T: Clone + Send + Sync + 'static> Source for Slices<T> {
    type Out = T;
    type Stream = BoxStream<T>;
    const NAME: &'static str = STAGE;

    fn cardinality(&self) -> Cardinality {
        Cardinality::Finite(self.len as u64)
    }

    /// See [`list`]: the start is the context's.
    fn open(&self, ctx: &Ctx, _: Start<'_>) -> anyhow::Result<BoxStream<T>> {
        Ok(list(ctx, Arc::clone(&self.items), STAGE))
    }
}

/// The elements of `items` for one epoch as stage `stage`: fresh, restored at the saved index,
/// or replaying saved indices (shared by `from_vec` and the lists other stages keep).
pub(crate) fn list<T: Clone + Send + Sync + 'static>(
    ctx: &Ctx,
    items: Arc<[T]>,
    stage: &'static str,
) -> BoxStream<T> {
    if let Some(provs) = ctx.replaying() {
        return Box::pin(ReplaySource::new(Arc::clone(provs), stage, move |i| {
            usize::try_from(i)
                .ok()
                .and_then(|i| items.get(i).cloned())
                .ok_or_else(|| unsupported(stage, "a saved position is past its end"))
        }));
    }
    let next = match ctx.restoring().map(|s| s.word(0)).transpose() {
        Ok(next) => next.unwrap_or(0),
        Err(e) => return crate::engine::error_stream(e),
    };
    Box::pin(FromVec {
        items,
        next: usize::try_from(next).unwrap_or(usize::MAX),
        coop: Coop::default(),
        stage,
    })
}

/// tf.data's name for a dataset of a vector's elements.
const STAGE: &str = "from_tensor_slices";

/// Stream for [`Dataset::from_vec`]: clones each element out of the shared copy.
#[must_use = "streams do nothing unless polled"]
struct FromVec<T> {
    items: Arc<[T]>,
    next: usize,
    coop: Coop,
    /// The stage it stands for (its saved state's name).
    stage: &'static str,
}

impl<T> Unpin for FromVec<T> {}

impl<T: Clone> Stream for FromVec<T> {
    type Item = anyhow::Result<T>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        std::task::ready!(this.coop.poll_proceed(cx));
        let item = this.items.get(this.next).cloned();
        if item.is_some() {
            this.next += 1;
        }
        Poll::Ready(item.map(Ok))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.items.len().saturating_sub(self.next);
        (n, Some(n))
    }
}

crate::engine::numbered_source!(impl[T] FromVec<T>, |s| s.stage, s.next as u64);

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
