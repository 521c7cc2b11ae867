use std::collections::BTreeMap;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use futures::stream::{Fuse, Stream, StreamExt};

use crate::dataset::{BoxStream, Ctx, Dataset};
use crate::runtime::catch_panic;

/// Stream for the [`group_by_window`](crate::Dataset::group_by_window) method.
#[must_use = "streams do nothing unless polled"]
pub(crate) struct GroupByWindow<T, K, U, KF, RF> {
    input: Fuse<BoxStream<T>>,
    key_func: Arc<KF>,
    reduce_func: Arc<RF>,
    window_size: usize,
    ctx: Ctx,
    windows: BTreeMap<K, Vec<T>>,
    /// The reduced dataset being drained.
    current: Option<BoxStream<U>>,
    input_done: bool,
}

impl<T, K, U, KF, RF> GroupByWindow<T, K, U, KF, RF>
where
    T: Clone + Send + Sync + 'static,
    K: Ord + Clone,
    U: Send + 'static,
    RF: Fn(K, Dataset<T>) -> Dataset<U>,
{
    pub(crate) fn new(
        input: BoxStream<T>,
        key_func: Arc<KF>,
        reduce_func: Arc<RF>,
        window_size: usize,
        ctx: Ctx,
    ) -> Self {
        GroupByWindow {
            input: input.fuse(),
            key_func,
            reduce_func,
            window_size,
            ctx,
            windows: BTreeMap::new(),
            current: None,
            input_done: false,
        }
    }

    fn reduce(&mut self, key: K, window: Vec<T>) -> anyhow::Result<()> {
        let reduce_func = &*self.reduce_func;
        let ds = catch_panic("group_by_window", || {
            Ok(reduce_func(key, Dataset::from_vec(window)))
        })?;
        self.current = Some(ds.build(&self.ctx));
        Ok(())
    }
}

impl<T, K, U, KF, RF> Stream for GroupByWindow<T, K, U, KF, RF>
where
    T: Clone + Send + Sync + 'static,
    K: Ord + Clone,
    U: Send + 'static,
    KF: Fn(&T) -> K,
    RF: Fn(K, Dataset<T>) -> Dataset<U>,
{
    type Item = anyhow::Result<U>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            if let Some(current) = &mut this.current {
                match ready!(current.as_mut().poll_next(cx)) {
                    Some(item) => return Poll::Ready(Some(item)),
                    None => this.current = None,
                }
            }
            if this.input_done {
                // Flush unfinished windows in ascending key order, as tf.data does.
                let Some((key, window)) = this.windows.pop_first() else {
                    return Poll::Ready(None);
                };
                if let Err(e) = this.reduce(key, window) {
                    return Poll::Ready(Some(Err(e)));
                }
                continue;
            }
            match ready!(this.input.poll_next_unpin(cx)) {
                Some(Ok(x)) => {
                    let key_func = &*this.key_func;
                    let key = match catch_panic("group_by_window", || Ok(key_func(&x))) {
                        Ok(k) => k,
                        Err(e) => return Poll::Ready(Some(Err(e))),
                    };
                    let window = this.windows.entry(key.clone()).or_default();
                    window.push(x);
                    if window.len() == this.window_size {
                        let window = this.windows.remove(&key).unwrap_or_default();
                        if let Err(e) = this.reduce(key, window) {
                            return Poll::Ready(Some(Err(e)));
                        }
                    }
                }
                Some(Err(e)) => return Poll::Ready(Some(Err(e))),
                None => this.input_done = true,
            }
        }
    }
}
