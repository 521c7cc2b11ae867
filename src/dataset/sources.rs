//! Sources: datasets that read no other dataset.

use futures::stream::Stream;

use crate::engine::{Cardinality, Dataset, Unkeyed};
use crate::source;

impl Dataset<i64> {
    /// The integers `start, start + 1, ..., stop - 1` (tf.data's `range(start, stop)`).
    ///
    /// ```
    /// use streamload::Dataset;
    /// # tokio_test::block_on(async {
    /// assert_eq!(Dataset::range(2, 6).collect().await?, [2, 3, 4, 5]);
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    pub fn range(start: i64, stop: i64) -> Self {
        Self::range_step(start, stop, 1)
    }

    /// `start, start + step, ...` while before `stop` (tf.data's `range(start, stop, step)`);
    /// `step` may be negative.
    ///
    /// ```
    /// use streamload::Dataset;
    /// # tokio_test::block_on(async {
    /// assert_eq!(Dataset::range_step(3, -4, -2).collect().await?, [3, 1, -1, -3]);
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    ///
    /// # Panics
    ///
    /// If `step` is 0 (tf.data: "step must be a non-zero integer").
    pub fn range_step(start: i64, stop: i64, step: i64) -> Self {
        assert!(step != 0, "range: step must be a non-zero integer");
        Dataset::from_source(source::range::Range { start, stop, step })
    }

    /// `start, start + step, ...` forever (tf.data's `Dataset.counter`); `step` may be negative,
    /// or 0 (`start` forever).
    pub fn counter(start: i64, step: i64) -> Self {
        Dataset::from_source(source::range::Counter { start, step })
    }

    /// Pseudorandom integers, uniformly distributed over all of `i64`, forever (tf.data's
    /// `Dataset.random(seed, rerandomize_each_iteration)`).
    ///
    /// As in tf.data, every epoch yields the same sequence unless `rerandomize_each_iteration`,
    /// in which case each epoch yields another (the same ones again in another run with the
    /// same seed). Without a seed, the pipeline's [`Options::seed`](crate::Options) decides,
    /// else one drawn when the recipe is built. The generator is ChaCha8 (the values are not
    /// TensorFlow's, whose generator is Philox): value `i` of an epoch is word `i` of its
    /// stream, so a resume seeks straight to it and a checkpoint saves one number.
    ///
    /// ```
    /// use streamload::Dataset;
    /// # tokio_test::block_on(async {
    /// let ds = Dataset::random(Some(42), false).take(4);
    /// let first = ds.collect().await?;
    /// assert_eq!(ds.collect().await?, first); // the same sequence each epoch
    ///
    /// let ds = Dataset::random(Some(42), true).take(4);
    /// assert_ne!(ds.collect().await?, ds.collect().await?); // another each epoch
    ///
    /// // A coin per element: keep about half of them, reproducibly.
    /// let coins = Dataset::random(Some(7), false).map(|r| r & 1 == 1);
    /// let kept = Dataset::zip(Dataset::range(0, 1_000), coins).filter(|(_, heads)| *heads);
    /// assert!((400..600).contains(&kept.count().await?));
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    pub fn random(seed: Option<u64>, rerandomize_each_iteration: bool) -> Self {
        Dataset::from_source(source::random::Random {
            seed,
            rerandomize_each_iteration,
            fallback: Unkeyed(rand::random()),
        })
    }
}

impl<T: Clone + Send + Sync + 'static> Dataset<T> {
    /// The elements of a vector, one per element (tf.data's `from_tensor_slices` on a list).
    /// Each epoch clones them out of a shared copy.
    ///
    /// ```
    /// use streamload::Dataset;
    /// # tokio_test::block_on(async {
    /// assert_eq!(Dataset::from_vec(vec!["a", "b"]).collect().await?, ["a", "b"]);
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    pub fn from_vec(items: Vec<T>) -> Self {
        source::from_iter::from_vec(items)
    }
}

impl<T: Send + 'static> Dataset<T> {
    /// The items of an iterable that can be cloned: each epoch iterates a fresh clone.
    /// Cardinality is known when the iterator's size hint is exact.
    #[allow(clippy::should_implement_trait)] // a tf.data-style constructor of a recipe, not a collection
    pub fn from_iter<I>(items: I) -> Self
    where
        I: IntoIterator<Item = T> + Clone + Send + Sync + 'static,
        I::IntoIter: Send + 'static,
    {
        source::from_iter::from_iter(items)
    }

    /// Elements from an async stream made afresh for each epoch by `make`.
    ///
    /// ```
    /// use streamload::Dataset;
    /// # tokio_test::block_on(async {
    /// let ds = Dataset::from_stream(|| futures::stream::iter((0..3).map(anyhow::Ok)));
    /// assert_eq!(ds.collect().await?, [0, 1, 2]);
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    pub fn from_stream<S>(make: impl Fn() -> S + Send + Sync + 'static) -> Self
    where
        S: Stream<Item = anyhow::Result<T>> + Send + 'static,
    {
        Dataset::source("from_stream", Cardinality::Unknown, move |_| {
            Box::pin(make())
        })
    }

    /// Elements from a blocking iterator made afresh for each epoch by `make` (tf.data's
    /// `from_generator`).
    ///
    /// The generator runs on a thread of its own (one of streamload's, not tokio's blocking
    /// pool, so it holds none of the readers' threads), at most `buffer` elements ahead of
    /// the consumer (a bounded channel; when the consumer falls behind, elements are handed
    /// over in chunks of up to `buffer / 2`, so the thread wakes once per chunk), so a slow
    /// Python-style generator never blocks the async workers. To make its work parallel, generate cheap indices or file names and do the work
    /// in [`map_parallel`](Dataset::map_parallel).
    ///
    /// # Cancellation
    ///
    /// Dropping the epoch stops the generator after the element it is producing.
    ///
    /// # Errors
    ///
    /// A panic in `make` or in the iterator ends the epoch with [`Error::WorkerPanicked`](crate::Error).
    /// An iterator cannot be restarted in the middle: a [checkpoint](crate::Epoch::checkpoint)
    /// through this stage is an [`Error::NotResumable`](crate::Error) naming it (use
    /// [`from_generator_at`](Dataset::from_generator_at), whose generator starts at a
    /// position).
    ///
    /// ```
    /// use streamload::Dataset;
    /// # tokio_test::block_on(async {
    /// let ds = Dataset::from_generator(4, || vec![3, 1, 2].into_iter());
    /// assert_eq!(ds.collect().await?, [3, 1, 2]);
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    ///
    /// # Panics
    ///
    /// If `buffer` is 0.
    pub fn from_generator<I>(buffer: usize, make: impl Fn() -> I + Send + Sync + 'static) -> Self
    where
        I: IntoIterator<Item = T>,
    {
        Self::try_from_generator(buffer, move || make().into_iter().map(anyhow::Ok))
    }

    /// Like [`from_generator`](Dataset::from_generator), for a generator whose items may be errors.
    pub fn try_from_generator<I>(
        buffer: usize,
        make: impl Fn() -> I + Send + Sync + 'static,
    ) -> Self
    where
        I: IntoIterator<Item = anyhow::Result<T>>,
    {
        source::from_generator::dataset(buffer, make)
    }

    /// A generator that can be [checkpointed](crate::Epoch::checkpoint): like
    /// [`from_generator`](Dataset::from_generator), but `make(start)` makes the iterator of
    /// the elements from element `start` on (0-based; `make(0)` is the whole epoch).
    ///
    /// A plain generator cannot be restarted in the middle, so a checkpoint through it is an
    /// error; this one saves its position (the elements it yielded), and an epoch resumed
    /// with [`iter_from`](Dataset::iter_from) calls `make(position)`. Where a stage
    /// downstream holds elements by position (a [`shuffle`](Dataset::shuffle)'s buffer),
    /// the resume makes them again: the positions are sorted and made in runs, one `make`
    /// per run of positions at most 16 apart (the elements between them made and dropped).
    /// `make(n)` must yield what `make(0)` yields from its `n`-th element on, every time: a
    /// generator that reads records by index, pages of an API by offset, or a seeded
    /// simulation that can skip ahead.
    ///
    /// ```
    /// use futures::StreamExt;
    /// use streamload::{Checkpoint, Dataset};
    /// # tokio_test::block_on(async {
    /// // Squares from `start` on: a generator that can begin anywhere.
    /// let recipe = || {
    ///     Dataset::from_generator_at(4, |start| (start..10).map(|i| i * i)).shuffle(3, Some(1))
    /// };
    /// let all = recipe().collect().await?; // the uninterrupted epoch
    ///
    /// let mut epoch = recipe().iter();
    /// let mut seen = vec![epoch.next().await.unwrap()?, epoch.next().await.unwrap()?];
    /// let checkpoint = Checkpoint::from_bytes(&epoch.checkpoint()?.to_bytes())?;
    /// drop(epoch);
    /// // Later, maybe in another process, with the same recipe:
    /// let mut resumed = recipe().iter_from(&checkpoint)?;
    /// while let Some(x) = resumed.next().await {
    ///     seen.push(x?);
    /// }
    /// assert_eq!(seen, all);
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    ///
    /// # Cancellation
    ///
    /// As [`from_generator`](Dataset::from_generator): dropping the epoch stops the generator
    /// after the element it is producing.
    ///
    /// # Errors
    ///
    /// A panic in `make` or in the iterator ends the epoch with
    /// [`Error::WorkerPanicked`](crate::Error). After a resume, a position saved in the
    /// checkpoint that the generator no longer reaches is an
    /// [`Error::Checkpoint`](crate::Error).
    ///
    /// # Panics
    ///
    /// If `buffer` is 0.
    pub fn from_generator_at<I>(
        buffer: usize,
        make: impl Fn(u64) -> I + Send + Sync + 'static,
    ) -> Self
    where
        I: IntoIterator<Item = T>,
    {
        Self::try_from_generator_at(buffer, move |start| make(start).into_iter().map(anyhow::Ok))
    }

    /// Like [`from_generator_at`](Dataset::from_generator_at), for a generator whose items
    /// may be errors (an error counts as an element: it has a position).
    pub fn try_from_generator_at<I>(
        buffer: usize,
        make: impl Fn(u64) -> I + Send + Sync + 'static,
    ) -> Self
    where
        I: IntoIterator<Item = anyhow::Result<T>>,
    {
        source::from_generator::dataset_at(buffer, make)
    }
}
