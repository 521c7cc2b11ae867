//! burn (0.21): [`StreamLoader`], a `burn::data::dataloader::DataLoader` over a streamload
//! dataset, for burn's training loops and `Learner`.
//!
//! The `burn` feature needs Rust 1.92 (burn 0.21's own `rust-version`), above this crate's
//! 1.85: the rest of the crate does not.

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use burn::data::dataloader::batcher::Batcher;
use burn::data::dataloader::{DataLoader, DataLoaderIterator, Progress};
use burn::tensor::backend::Backend;

use crate::{Cardinality, Checkpoint, Dataset, Epoch, Stats};

/// A burn `DataLoader` over a streamload dataset of items: each epoch (each `iter()`) runs the
/// dataset once, in batches of `batch_size` items turned into burn's batch type by a burn
/// [`Batcher`], on the runtime streamload owns (the training loop stays synchronous; add
/// [`prefetch`](Dataset::prefetch) to the dataset to make batches while the model trains).
///
/// - `num_items` is the dataset's [cardinality](Dataset::cardinality), so it must be known
///   (a [`ShardPlan`](crate::distribute::ShardPlan)'s dataset's is; elsewhere
///   [`assert_cardinality`](Dataset::assert_cardinality)).
/// - `slice(start, end)` (burn's multi-device split) reads items `start..end` of each epoch
///   (`skip` then `take`: the items before `start` are read and dropped). To split between
///   processes, shard before reading with [`distribute`](crate::distribute) instead.
/// - [`checkpoint`](StreamLoader::checkpoint) saves the position of the epoch being iterated,
///   after the last batch handed out; [`resume_from`](StreamLoader::resume_from) makes the
///   next `iter()` go on from one.
///
/// ```
/// use burn::backend::NdArray;
/// use burn::data::dataloader::{DataLoader, batcher::Batcher};
/// use burn::tensor::{Tensor, TensorData};
/// use streamload::Dataset;
/// use streamload::adapters::burn::StreamLoader;
///
/// type B = NdArray;
/// struct Stack;
/// impl Batcher<B, f32, Tensor<B, 1>> for Stack {
///     fn batch(&self, items: Vec<f32>, device: &burn::tensor::Device<B>) -> Tensor<B, 1> {
///         let n = items.len();
///         Tensor::from_data(TensorData::new(items, [n]), device)
///     }
/// }
///
/// let items = Dataset::range(0, 10).map(|i| i as f32);
/// let loader = StreamLoader::<B, f32, Tensor<B, 1>>::new(items, 4, Stack, Default::default())?;
/// assert_eq!(loader.num_items(), 10);
/// let sizes: Vec<usize> = loader.iter().map(|t| t.dims()[0]).collect();
/// assert_eq!(sizes, [4, 4, 2]);
/// let half = loader.slice(5, 10);
/// assert_eq!(half.num_items(), 5);
/// let firsts: Vec<f32> = half.iter().map(|t| t.into_data().to_vec::<f32>().unwrap()[0]).collect();
/// assert_eq!(firsts, [5.0, 9.0]);
/// # anyhow::Ok(())
/// ```
///
/// # Errors
///
/// burn's iterator yields batches, not results: an error element (a damaged record) ends
/// the epoch's iteration, and [`take_error`](StreamLoader::take_error) returns it. Check it
/// after each epoch, or an epoch cut short by damage goes unnoticed.
pub struct StreamLoader<B: Backend, I, O> {
    items: Dataset<I>,
    batches: Dataset<Vec<I>>,
    batch_size: usize,
    batcher: Arc<dyn Batcher<B, I, O>>,
    device: B::Device,
    num_items: usize,
    shared: Arc<Shared<I>>,
}

/// What a loader's iterators and the loader share.
struct Shared<I> {
    /// The epoch being iterated (out of it while a batch is being made).
    running: Mutex<Option<Epoch<Vec<I>>>>,
    resume: Mutex<Option<Checkpoint>>,
    error: Mutex<Option<anyhow::Error>>,
    stats: Mutex<Option<Stats>>,
}

impl<I> Default for Shared<I> {
    fn default() -> Self {
        Shared {
            running: Mutex::new(None),
            resume: Mutex::new(None),
            error: Mutex::new(None),
            stats: Mutex::new(None),
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl<B, I, O> StreamLoader<B, I, O>
where
    B: Backend,
    I: Send + 'static,
    O: 'static,
{
    /// A loader of `items` in batches of `batch_size` (the last one may be smaller: batch
    /// after [`distribute`](crate::distribute) for equal batch counts on every rank), made
    /// into `O` by `batcher` on `device`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) when the dataset's
    /// cardinality is not known (burn asks for `num_items` before the epoch) or
    /// `batch_size` is 0.
    pub fn new(
        items: Dataset<I>,
        batch_size: usize,
        batcher: impl Batcher<B, I, O> + 'static,
        device: B::Device,
    ) -> anyhow::Result<Self> {
        let Cardinality::Finite(n) = items.cardinality() else {
            return Err(crate::Error::InvalidArgument(format!(
                "StreamLoader: the cardinality of `{}` is not known ({:?}), and burn needs \
                 num_items: add .assert_cardinality(n)",
                items.name(),
                items.cardinality()
            ))
            .into());
        };
        if batch_size == 0 {
            return Err(
                crate::Error::InvalidArgument("StreamLoader: batch_size is 0".into()).into(),
            );
        }
        Ok(StreamLoader {
            batches: items.batch(batch_size),
            items,
            batch_size,
            batcher: Arc::new(batcher),
            device,
            num_items: usize::try_from(n).unwrap_or(usize::MAX),
            shared: Arc::default(),
        })
    }

    /// The position of the epoch being iterated, after the last batch handed out (for
    /// [`resume_from`](StreamLoader::resume_from), in this process or another).
    ///
    /// # Errors
    ///
    /// When no epoch has started, or a stage of the dataset cannot save its position
    /// ([`Epoch::checkpoint`]).
    pub fn checkpoint(&self) -> anyhow::Result<Checkpoint> {
        match lock(&self.shared.running).as_mut() {
            Some(epoch) => epoch.checkpoint(),
            None => Err(crate::Error::InvalidArgument(
                "StreamLoader::checkpoint: no epoch is being iterated".into(),
            )
            .into()),
        }
    }

    /// Makes the next `iter()` go on from `checkpoint` (taken by
    /// [`checkpoint`](StreamLoader::checkpoint) from a loader over the same dataset); the
    /// ones after it start new epochs.
    pub fn resume_from(&self, checkpoint: Checkpoint) {
        *lock(&self.shared.resume) = Some(checkpoint);
    }

    /// The error that ended the last epoch's iteration early, if one did (see
    /// [`StreamLoader`]'s "Errors").
    pub fn take_error(&self) -> Option<anyhow::Error> {
        lock(&self.shared.error).take()
    }

    /// The per-stage statistics of the last epoch started; `Display` prints the report.
    pub fn stats(&self) -> Option<Stats> {
        lock(&self.shared.stats).clone()
    }

    fn with(&self, items: Dataset<I>, num_items: usize, device: B::Device) -> Self {
        StreamLoader {
            batches: items.batch(self.batch_size),
            items,
            batch_size: self.batch_size,
            batcher: Arc::clone(&self.batcher),
            device,
            num_items,
            shared: Arc::default(),
        }
    }
}

impl<B: Backend, I: Send + 'static, O> fmt::Debug for StreamLoader<B, I, O> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StreamLoader")
            .field("dataset", &self.items.name())
            .field("batch_size", &self.batch_size)
            .field("num_items", &self.num_items)
            .finish_non_exhaustive()
    }
}

impl<B, I, O> DataLoader<B, O> for StreamLoader<B, I, O>
where
    B: Backend,
    I: Send + 'static,
    O: 'static,
{
    fn iter<'a>(&'a self) -> Box<dyn DataLoaderIterator<O> + 'a> {
        let resume = lock(&self.shared.resume).take();
        let epoch = match resume {
            Some(checkpoint) => self.batches.iter_from(&checkpoint),
            None => Ok(self.batches.iter()),
        };
        let done = match epoch {
            Ok(epoch) => {
                *lock(&self.shared.stats) = Some(epoch.stats());
                *lock(&self.shared.running) = Some(epoch);
                false
            }
            Err(e) => {
                *lock(&self.shared.error) = Some(e);
                true
            }
        };
        Box::new(Batches {
            loader: self,
            processed: 0,
            done,
        })
    }

    fn num_items(&self) -> usize {
        self.num_items
    }

    fn to_device(&self, device: &B::Device) -> Arc<dyn DataLoader<B, O>> {
        Arc::new(self.with(self.items.clone(), self.num_items, device.clone()))
    }

    fn slice(&self, start: usize, end: usize) -> Arc<dyn DataLoader<B, O>> {
        let end = end.min(self.num_items);
        let start = start.min(end);
        let items = self.items.skip(start as i64).take((end - start) as i64);
        Arc::new(self.with(items, end - start, self.device.clone()))
    }
}

/// The iterator of one epoch of a [`StreamLoader`].
struct Batches<'a, B: Backend, I, O> {
    loader: &'a StreamLoader<B, I, O>,
    processed: usize,
    done: bool,
}

impl<B, I, O> Iterator for Batches<'_, B, I, O>
where
    B: Backend,
    I: Send + 'static,
    O: 'static,
{
    type Item = O;

    fn next(&mut self) -> Option<O> {
        if self.done {
            return None;
        }
        let shared = &self.loader.shared;
        let mut epoch = lock(&shared.running).take()?;
        let step = crate::runtime::wait_shared(async move {
            use futures::StreamExt;
            let item = epoch.next().await;
            (epoch, item)
        });
        let failed = match step {
            Ok((epoch, item)) => {
                *lock(&shared.running) = Some(epoch);
                match item {
                    Some(Ok(items)) => {
                        self.processed += items.len();
                        return Some(self.loader.batcher.batch(items, &self.loader.device));
                    }
                    Some(Err(e)) => Some(e),
                    None => None,
                }
            }
            Err(e) => Some(e),
        };
        self.done = true;
        if let Some(e) = failed {
            *lock(&shared.error) = Some(e);
        }
        None
    }
}

impl<B, I, O> DataLoaderIterator<O> for Batches<'_, B, I, O>
where
    B: Backend,
    I: Send + 'static,
    O: 'static,
{
    fn progress(&self) -> Progress {
        Progress::new(self.processed, self.loader.num_items)
    }
}
