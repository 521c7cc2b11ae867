//! Which elements, in what order, when: `shuffle`, `repeat`, `take`, `skip`, `shard`, `cache`,
//! `prefetch`.

use crate::engine::{Dataset, Unkeyed};
use crate::ops;
use crate::options::Parallelism;

impl<T: Send + 'static> Dataset<T> {
    /// Randomly shuffles the elements with a buffer of `buffer_size` (tf.data's `shuffle`),
    /// with a fresh order every iteration.
    ///
    /// Fills the buffer, then repeatedly yields a uniformly chosen buffered element and puts
    /// the next input in its place, so output `i` comes from the first `i + buffer_size`
    /// inputs. The RNG is ChaCha8 seeded by `seed` (else the global seed of the options, else
    /// OS entropy drawn when the recipe is made) mixed with the iteration number, so a seeded
    /// pipeline gives the same orders on every run.
    ///
    /// ```
    /// use streamload::Dataset;
    /// # tokio_test::block_on(async {
    /// let ds = Dataset::range(0, 10).shuffle(10, Some(42));
    /// let (a, b) = (ds.collect().await?, ds.collect().await?);
    /// assert_ne!(a, b); // reshuffled each iteration
    /// let mut sorted = a.clone();
    /// sorted.sort();
    /// assert_eq!(sorted, (0..10).collect::<Vec<_>>());
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    ///
    /// # Panics
    ///
    /// If `buffer_size` is 0.
    pub fn shuffle(&self, buffer_size: usize, seed: Option<u64>) -> Dataset<T> {
        self.shuffle_with(buffer_size, seed, true)
    }

    /// [`shuffle`](Dataset::shuffle) with tf.data's `reshuffle_each_iteration` flag: with
    /// `false`, every iteration of this dataset yields the same order.
    pub fn shuffle_with(
        &self,
        buffer_size: usize,
        seed: Option<u64>,
        reshuffle_each_iteration: bool,
    ) -> Dataset<T> {
        assert!(
            buffer_size > 0,
            "shuffle: buffer_size must be greater than zero or UNKNOWN_CARDINALITY (tf.data's \
             -2, for the whole dataset, which streamload does not take)."
        );
        self.then(ops::shuffle::Shuffle {
            buffer_size,
            seed,
            reshuffle_each_iteration,
            fallback: Unkeyed(rand::random()),
        })
    }

    /// Repeats the dataset forever (tf.data's `repeat()`). Each repetition builds the upstream
    /// anew, so shuffles reshuffle. It stops if a repetition yields nothing, rather than
    /// spinning. Cardinality: infinite, unless the input is known to be empty (then 0). For a
    /// given number of repetitions, see [`repeat_n`](Dataset::repeat_n).
    ///
    /// ```
    /// use streamload::{Cardinality, Dataset};
    /// # tokio_test::block_on(async {
    /// let ds = Dataset::range(0, 2).repeat();
    /// assert_eq!(ds.cardinality(), Cardinality::Infinite);
    /// assert_eq!(ds.take(5).collect().await?, [0, 1, 0, 1, 0]);
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    pub fn repeat(&self) -> Dataset<T> {
        self.then(ops::repeat::Repeat { times: None })
    }

    /// Repeats the dataset `count` times (tf.data's `repeat(count)`; `0` gives an empty
    /// dataset). Each repetition builds the upstream anew, so shuffles reshuffle. Cardinality:
    /// `count` times the input's when that is known. To repeat forever, see
    /// [`repeat`](Dataset::repeat).
    ///
    /// ```
    /// use streamload::{Cardinality, Dataset};
    /// # tokio_test::block_on(async {
    /// let ds = Dataset::range(0, 2).repeat_n(3);
    /// assert_eq!(ds.cardinality(), Cardinality::Finite(6));
    /// assert_eq!(ds.collect().await?, [0, 1, 0, 1, 0, 1]);
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    pub fn repeat_n(&self, count: u64) -> Dataset<T> {
        self.then(ops::repeat::Repeat { times: Some(count) })
    }

    /// The first `count` elements; a negative `count` takes everything (tf.data's `take`).
    /// Error elements are passed on and not counted.
    pub fn take(&self, count: i64) -> Dataset<T> {
        self.then(ops::take::Take {
            count: u64::try_from(count).unwrap_or(u64::MAX),
        })
    }

    /// Everything after the first `count` elements; a negative `count` skips everything
    /// (tf.data's `skip`). Error elements are passed on and not counted; as in tf.data, an
    /// error met while skipping starts the count again after it.
    pub fn skip(&self, count: i64) -> Dataset<T> {
        self.then(ops::skip::Skip {
            count: u64::try_from(count).unwrap_or(u64::MAX),
        })
    }

    /// Every `num_shards`-th element starting at `index` (tf.data's `shard`), for splitting a
    /// dataset between workers. Error elements reach every shard.
    ///
    /// ```
    /// use streamload::Dataset;
    /// # tokio_test::block_on(async {
    /// assert_eq!(Dataset::range(0, 10).shard(3, 2).collect().await?, [2, 5, 8]);
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    ///
    /// # Panics
    ///
    /// If `num_shards` is 0 or `index >= num_shards`.
    pub fn shard(&self, num_shards: u64, index: u64) -> Dataset<T> {
        assert!(
            num_shards > 0,
            "shard: Number of shards must be greater than zero (currently num_shards = 0)."
        );
        assert!(
            index < num_shards,
            "shard: Index must be between 0 and {} (currently index = {index})",
            num_shards - 1
        );
        self.then(ops::shard::Shard { num_shards, index })
    }

    /// Runs the upstream in a spawned task that keeps up to `buffer_size` elements ready
    /// (tf.data's `prefetch`), so producing and consuming overlap. `0` adds no stage.
    ///
    /// ```
    /// use streamload::Dataset;
    /// # tokio_test::block_on(async {
    /// let ds = Dataset::range(0, 1000).batch(64).prefetch(1);
    /// let batches = ds.collect().await?;
    /// assert_eq!(batches.len(), 16);
    /// assert_eq!(batches[15], (960..1000).collect::<Vec<_>>());
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    ///
    /// With `AUTOTUNE` the buffer starts at 2 elements and the epoch's tuner doubles it while
    /// the consumer waits on it and the producer finds it full, up to 1,024 elements and within
    /// [`Options::ram_budget`](crate::Options); it halves it when the pipeline's buffers hold
    /// more than the budget. The report shows the size it chose.
    ///
    /// At most `buffer_size` elements wait. The producer runs ahead only while overlapping
    /// pays: while both the consumer's time away between elements and the time the upstream
    /// takes per element exceed 50 us (moving averages), since handing an element to another
    /// thread and waking it costs tens of microseconds. Otherwise, when nothing is ready, the
    /// consumer polls the upstream itself, in order, with no hand-over (a fast consumer of
    /// cheap batches gets them at the speed of the pipeline without prefetch). The same holds
    /// for an autotuned buffer, whose size the tuner sets while the producer runs ahead. A
    /// waiting consumer is woken once per half buffer of elements ready at once. As in tf.data,
    /// prefetch after `batch`.
    ///
    /// # Errors
    ///
    /// A panic in the producer task reaches the consumer as an error element, never as a quiet,
    /// short epoch.
    ///
    /// # Cancellation
    ///
    /// Dropping the epoch aborts the producer task, and with it everything upstream.
    pub fn prefetch(&self, buffer_size: impl Into<Parallelism>) -> Dataset<T> {
        let buffer_size = buffer_size.into();
        if buffer_size == Parallelism::Fixed(0) {
            return self.clone();
        }
        self.then(ops::prefetch::Prefetch {
            buffer_size: Unkeyed(buffer_size),
        })
    }

    /// Caches the elements in memory (tf.data's `cache()`): the first epoch that runs to its
    /// end fills the cache, and later epochs read from it without running the upstream. An
    /// epoch that is dropped early or meets an error leaves no cache behind, never a truncated
    /// one. The cache holds the whole dataset: use it for data that fits in memory.
    ///
    /// ```
    /// use streamload::Dataset;
    /// # tokio_test::block_on(async {
    /// let ds = Dataset::range(0, 5).shuffle(5, None).cache();
    /// assert_eq!(ds.collect().await?, ds.collect().await?); // the order is frozen
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    pub fn cache(&self) -> Dataset<T>
    where
        T: Clone + Sync,
    {
        self.then(ops::cache::Cache::new())
    }
}
