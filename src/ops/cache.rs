use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll, ready};

use futures::stream::Stream;
use pin_project::pin_project;

use crate::checkpoint::Opaque;
use crate::dataset::Dataset;
use crate::source::from_iter::FromIter;

type Store<T> = Arc<OnceLock<Arc<[T]>>>;

pub(crate) fn dataset<T: Clone + Send + Sync + 'static>(input: &Dataset<T>) -> Dataset<T> {
    let store: Store<T> = Arc::new(OnceLock::new());
    let upstream = input.clone();
    Dataset::stage(
        "cache",
        input.cardinality(),
        input.options().clone(),
        input.depth() + 1,
        move |ctx| -> crate::dataset::BoxStream<T> {
            match store.get() {
                Some(items) => {
                    let items = Arc::clone(items);
                    Box::pin(Opaque::new(
                        FromIter::new((0..items.len()).map(move |i| items[i].clone())),
                        "cache",
                    ))
                }
                None => Box::pin(Opaque::new(
                    Fill {
                        input: upstream.build(ctx),
                        store: Arc::clone(&store),
                        items: Vec::new(),
                        clean: true,
                    },
                    "cache",
                )),
            }
        },
    )
}

/// Stream for the first complete epoch of the [`cache`](crate::Dataset::cache) method: passes
/// elements through and keeps a copy, published only when the upstream ends without an error.
#[pin_project]
#[must_use = "streams do nothing unless polled"]
pub(crate) struct Fill<St, T> {
    #[pin]
    input: St,
    store: Store<T>,
    items: Vec<T>,
    clean: bool,
}

impl<St, T> Stream for Fill<St, T>
where
    St: Stream<Item = anyhow::Result<T>>,
    T: Clone,
{
    type Item = anyhow::Result<T>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.project();
        let item = ready!(this.input.poll_next(cx));
        match &item {
            Some(Ok(x)) if *this.clean => this.items.push(x.clone()),
            Some(Ok(_)) => {}
            Some(Err(_)) => {
                *this.clean = false;
                this.items.clear();
            }
            None if *this.clean => {
                // Another epoch may have filled it first; both copies are complete.
                let _ = this.store.set(std::mem::take(this.items).into());
            }
            None => {}
        }
        Poll::Ready(item)
    }
}
