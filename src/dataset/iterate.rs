//! Running a recipe: `iter`, `iter_from`, `iter_blocking`, `collect`, `count`, `reduce`,
//! `for_each`.

use futures::stream::StreamExt;

use crate::checkpoint::Checkpoint;
use crate::engine::{Dataset, Epoch};

impl<T: Send + 'static> Dataset<T> {
    /// Starts one epoch: builds a fresh stream of this recipe (tf.data's `iter(ds)`).
    ///
    /// Nothing runs until the stream is polled. Stages that spawn work (`prefetch`,
    /// `map_parallel`, `map_async`, `parallel_interleave`, `from_generator`) need the stream to
    /// be polled inside a tokio runtime; outside one they yield [`Error::NoRuntime`](crate::Error).
    ///
    /// # Cancellation
    ///
    /// Dropping the [`Epoch`] stops every task it spawned: async tasks are aborted, queued
    /// blocking jobs are cancelled, and a running blocking job stops at its next element.
    pub fn iter(&self) -> Epoch<T> {
        self.start(self.next_epoch(), None)
    }

    /// Goes on with an epoch from where [`Epoch::checkpoint`] saved it: the first element is
    /// the one after the last the checkpointed epoch's consumer received. The recipe must be
    /// the same (built by the same code, with the same parameters); the process may be
    /// another one.
    ///
    /// The buffers that were full at the checkpoint (a shuffle's) are refilled first by
    /// reading the records at their saved positions again; what was read or computed ahead of
    /// the consumer is made again. Later [`iter`](Dataset::iter) calls go on with the next
    /// epochs (so a reshuffle each epoch continues as it would have).
    ///
    /// ```
    /// use futures::StreamExt;
    /// use streamload::{Checkpoint, Dataset};
    /// # tokio_test::block_on(async {
    /// let ds = Dataset::range(0, 100).shuffle(10, Some(1)).batch(8);
    /// let all = ds.collect().await?; // the uninterrupted epoch
    ///
    /// let ds = Dataset::range(0, 100).shuffle(10, Some(1)).batch(8); // the same recipe
    /// let mut epoch = ds.iter();
    /// let mut seen = vec![epoch.next().await.unwrap()?, epoch.next().await.unwrap()?];
    /// let bytes = epoch.checkpoint()?.to_bytes();
    /// drop(epoch);
    ///
    /// // Later, maybe in another process:
    /// let mut resumed = ds.iter_from(&Checkpoint::from_bytes(&bytes)?)?;
    /// while let Some(batch) = resumed.next().await {
    ///     seen.push(batch?);
    /// }
    /// assert_eq!(seen, all);
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::Checkpoint`](crate::Error) when the checkpoint belongs to another recipe.
    /// Errors met while restoring (a file that changed or vanished) are the epoch's first
    /// element.
    pub fn iter_from(&self, checkpoint: &Checkpoint) -> anyhow::Result<Epoch<T>> {
        self.resume(checkpoint)
    }

    /// Starts one epoch as a blocking `Iterator` of `anyhow::Result<T>`, for synchronous
    /// training loops (burn's `DataLoader`, a `tch` loop, a plain `for batch in ...`): no
    /// async code, no runtime of your own.
    ///
    /// The epoch runs on a multi-thread tokio runtime streamload owns: one for the whole
    /// process, made at the first call, with a worker thread per core (its blocking threads run
    /// `map_parallel`'s calls). `next` blocks the calling thread until the next element is
    /// ready. The epoch makes at most one element ahead of the caller: the next one while the
    /// caller works on this one (add [`prefetch`](Dataset::prefetch) for more).
    /// [`BlockingEpoch::stats`](crate::BlockingEpoch::stats) shows the per-stage report, as
    /// for [`iter`](Dataset::iter).
    ///
    /// ```
    /// use streamload::{AUTOTUNE, Dataset};
    ///
    /// // A plain function: no runtime, no `.await`.
    /// fn train() -> anyhow::Result<i64> {
    ///     let ds = Dataset::range(0, 100).map_parallel(AUTOTUNE, |x| x * 2).batch(10).prefetch(2);
    ///     let mut total = 0;
    ///     for batch in ds.iter_blocking() {
    ///         total += batch?.iter().sum::<i64>(); // one training step
    ///     }
    ///     Ok(total)
    /// }
    /// assert_eq!(train()?, 2 * (0..100).sum::<i64>());
    /// # anyhow::Ok(())
    /// ```
    ///
    /// # Inside an async context
    ///
    /// Calling it from code that runs on a tokio runtime neither panics nor deadlocks: the
    /// epoch runs on streamload's runtime, not the caller's, and the calling thread waits on a
    /// channel. But waiting blocks that thread, and on an async worker thread that stalls the
    /// other tasks it would run: that is the caller's concern, as for any blocking call there
    /// (use [`iter`](Dataset::iter), or call this from `tokio::task::spawn_blocking`).
    ///
    /// # Errors
    ///
    /// Error elements come as `Err` items, in their place, and the iteration goes on, as for
    /// [`iter`](Dataset::iter). If streamload's runtime cannot be started (the OS refuses
    /// threads), the first item is that error and the iteration ends.
    ///
    /// # Cancellation
    ///
    /// Dropping the [`BlockingEpoch`](crate::BlockingEpoch) aborts the task that runs the
    /// epoch, which drops the epoch and so stops every task it spawned, as dropping an
    /// [`Epoch`] does. The tasks stop on streamload's runtime, right after the drop (the drop
    /// does not wait for them).
    pub fn iter_blocking(&self) -> crate::BlockingEpoch<T> {
        crate::BlockingEpoch::new(self.iter())
    }

    /// Runs one epoch and collects its elements; the first error ends it and is returned.
    pub async fn collect(&self) -> anyhow::Result<Vec<T>> {
        let mut out = Vec::with_capacity(
            self.cardinality()
                .finite()
                .map_or(0, |n| n.min(1 << 16) as usize),
        );
        let mut epoch = self.iter();
        while let Some(item) = epoch.next().await {
            out.push(item?);
        }
        Ok(out)
    }

    /// Runs one epoch and counts its elements; the first error ends it and is returned.
    pub async fn count(&self) -> anyhow::Result<u64> {
        let mut n = 0u64;
        let mut epoch = self.iter();
        while let Some(item) = epoch.next().await {
            item?;
            n += 1;
        }
        Ok(n)
    }

    /// Folds one epoch into a single value (tf.data's `reduce(initial_state, reduce_func)`).
    ///
    /// ```
    /// use streamload::Dataset;
    /// # tokio_test::block_on(async {
    /// assert_eq!(Dataset::range(0, 5).reduce(0, |s, x| s + x).await?, 10);
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    pub async fn reduce<S>(&self, init: S, mut f: impl FnMut(S, T) -> S) -> anyhow::Result<S> {
        let mut state = init;
        let mut epoch = self.iter();
        while let Some(item) = epoch.next().await {
            state = f(state, item?);
        }
        Ok(state)
    }

    /// Calls `f` on every element of one epoch; the first error ends it and is returned.
    pub async fn for_each(&self, mut f: impl FnMut(T)) -> anyhow::Result<()> {
        let mut epoch = self.iter();
        while let Some(item) = epoch.next().await {
            f(item?);
        }
        Ok(())
    }
}
