use std::collections::BTreeMap;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use futures::stream::{Fuse, Stream, StreamExt};

use crate::Error;
use crate::dataset::{BoxStream, Ctx, Dataset};
use crate::runtime::catch_panic;

/// The user functions of a [`group_by_window`](crate::Dataset::group_by_window_with) stage.
pub(crate) struct Funcs<KF, RF, WF> {
    pub(crate) key: KF,
    pub(crate) reduce: RF,
    pub(crate) window_size: WF,
}

/// Stream for the [`group_by_window`](crate::Dataset::group_by_window) and
/// [`group_by_window_with`](crate::Dataset::group_by_window_with) methods.
#[must_use = "streams do nothing unless polled"]
pub(crate) struct GroupByWindow<T, K, U, F> {
    input: Fuse<BoxStream<T>>,
    funcs: Arc<F>,
    ctx: Ctx,
    windows: BTreeMap<K, Vec<T>>,
    /// The reduced dataset being drained.
    current: Option<BoxStream<U>>,
    input_done: bool,
}

impl<T, K, U, KF, RF, WF> GroupByWindow<T, K, U, Funcs<KF, RF, WF>>
where
    T: Clone + Send + Sync + 'static,
    K: Ord + Clone,
    U: Send + 'static,
    KF: Fn(&T) -> K,
    RF: Fn(K, Dataset<T>) -> Dataset<U>,
    WF: Fn(&K) -> usize,
{
    pub(crate) fn new(input: BoxStream<T>, funcs: Arc<Funcs<KF, RF, WF>>, ctx: Ctx) -> Self {
        GroupByWindow {
            input: input.fuse(),
            funcs,
            ctx,
            windows: BTreeMap::new(),
            current: None,
            input_done: false,
        }
    }

    fn reduce(&mut self, key: K, window: Vec<T>) -> anyhow::Result<()> {
        let reduce = &self.funcs.reduce;
        let ds = catch_panic("group_by_window", || {
            Ok(reduce(key, Dataset::from_vec(window)))
        })?;
        self.current = Some(ds.build(&self.ctx));
        Ok(())
    }

    /// Puts `x` in its key's window, and reduces the window once it is full.
    fn add(&mut self, x: T) -> anyhow::Result<()> {
        let funcs = &*self.funcs;
        let key = catch_panic("group_by_window", || Ok((funcs.key)(&x)))?;
        let size = catch_panic("group_by_window", || Ok((funcs.window_size)(&key)))?;
        if size == 0 {
            return Err(Error::InvalidArgument(
                "group_by_window: Window size must be greater than zero, but got 0.".into(),
            )
            .into());
        }
        let window = self.windows.entry(key.clone()).or_default();
        window.push(x);
        // `>=`: a window size function may answer less for a key than it did before.
        if window.len() >= size {
            let window = self.windows.remove(&key).unwrap_or_default();
            self.reduce(key, window)?;
        }
        Ok(())
    }
}

impl<T, K, U, KF, RF, WF> Stream for GroupByWindow<T, K, U, Funcs<KF, RF, WF>>
where
    T: Clone + Send + Sync + 'static,
    K: Ord + Clone,
    U: Send + 'static,
    KF: Fn(&T) -> K,
    RF: Fn(K, Dataset<T>) -> Dataset<U>,
    WF: Fn(&K) -> usize,
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
                    if let Err(e) = this.add(x) {
                        return Poll::Ready(Some(Err(e)));
                    }
                }
                Some(Err(e)) => return Poll::Ready(Some(Err(e))),
                None => this.input_done = true,
            }
        }
    }
}
