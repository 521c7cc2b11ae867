//! One element to one (or none): the maps, `filter`, `flat_map`, `scan`, `enumerate`, `unique`,
//! `take_while`, `apply`.

use std::hash::Hash;
use std::sync::Arc;

use super::nonzero;
use crate::engine::{Dataset, Unkeyed};
use crate::ops;
use crate::options::Parallelism;

impl<T: Send + 'static> Dataset<T> {
    /// Applies `f` to every element with a random generator of that element's own, on
    /// `parallelism` blocking threads (Grain's `RandomMapTransform`; in tf.data, a map whose
    /// function uses stateless random ops seeded per element): the way to write random
    /// augmentations that give the same output whatever the parallelism.
    ///
    /// The generator is ChaCha8, keyed by (seed, epoch) and set to stream `index`, where
    /// `index` is the element's position in this stage's input (counting error elements too)
    /// and `epoch` counts the iterations of this recipe (0 for the first `iter()`, then 1, ...).
    /// So an element's randomness depends only on (seed, epoch, index): never on which worker
    /// runs the call, in what order, or how many workers there are. The seed is `seed`, else
    /// one derived from the global [`Options::seed`](crate::Options) and the stage's position,
    /// else one drawn from OS entropy when the recipe is made (so unseeded pipelines differ
    /// between runs, as for [`shuffle`](Dataset::shuffle)).
    ///
    /// Calls run on [`map_parallel`](Dataset::map_parallel)'s machinery: groups of
    /// consecutive elements on `parallelism` blocking threads.
    ///
    /// `f` cannot fail; for a function returning `anyhow::Result<U>` use
    /// [`try_random_map`](Dataset::try_random_map). The generator is [`ChaCha8Rng`](crate::ChaCha8Rng)
    /// of the `rand` version this crate re-exports as [`streamload::rand`](crate::rand): bring
    /// its traits into scope from there (`use streamload::rand::Rng;`), so a different major
    /// version of `rand` in your own dependencies cannot get in the way.
    ///
    /// # Examples
    ///
    /// ```
    /// use streamload::rand::Rng;
    /// use streamload::Dataset;
    /// # tokio_test::block_on(async {
    /// let noisy = |p: usize| {
    ///     Dataset::range(0, 100).random_map(p, Some(7), |x, rng| x * 1000 + rng.random_range(0..1000))
    /// };
    /// let one = noisy(1).collect().await?;
    /// assert_eq!(one, noisy(4).collect().await?); // the same whatever the parallelism
    /// let ds = noisy(2);
    /// let (a, b) = (ds.collect().await?, ds.collect().await?);
    /// assert_eq!(a, one);
    /// assert_ne!(a, b); // fresh randomness in the next epoch
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    ///
    /// # Ordering
    ///
    /// Input order, unless the pipeline's [`Options::deterministic`](crate::Options) is
    /// `false`: then elements come as their calls finish, each still with its own randomness.
    /// The results are reproducible as long as this stage's input order is.
    ///
    /// # Errors
    ///
    /// A panic in `f` becomes an error element in that element's place
    /// ([`Error::WorkerPanicked`](crate::Error)); the epoch goes on.
    ///
    /// # Cancellation
    ///
    /// Dropping the epoch cancels queued calls; a running group stops at its next element.
    ///
    /// # Panics
    ///
    /// If `parallelism` is `Fixed(0)`.
    pub fn random_map<U: Send + 'static>(
        &self,
        parallelism: impl Into<Parallelism>,
        seed: Option<u64>,
        f: impl Fn(T, &mut rand_chacha::ChaCha8Rng) -> U + Send + Sync + 'static,
    ) -> Dataset<U> {
        self.try_random_map(parallelism, seed, move |x, rng| Ok(f(x, rng)))
    }

    /// Like [`random_map`](Dataset::random_map), for a function that can fail: an `Err`
    /// becomes an error element in the element's place (drop those with
    /// [`ignore_errors`](Dataset::ignore_errors)); the epoch goes on.
    ///
    /// ```
    /// use streamload::Dataset;
    /// use streamload::rand::Rng;
    /// # tokio_test::block_on(async {
    /// let ds = Dataset::range(0, 4).try_random_map(2, Some(1), |x, rng| {
    ///     anyhow::ensure!(x != 2, "element {x} is bad");
    ///     Ok(x + 10 * rng.random_range(0..10))
    /// });
    /// let out = ds.ignore_errors().collect().await?;
    /// assert_eq!(out.iter().map(|y| y % 10).collect::<Vec<_>>(), [0, 1, 3]);
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    ///
    /// # Panics
    ///
    /// If `parallelism` is `Fixed(0)`.
    pub fn try_random_map<U: Send + 'static>(
        &self,
        parallelism: impl Into<Parallelism>,
        seed: Option<u64>,
        f: impl Fn(T, &mut rand_chacha::ChaCha8Rng) -> anyhow::Result<U> + Send + Sync + 'static,
    ) -> Dataset<U> {
        let parallelism = nonzero(parallelism.into(), "random_map");
        self.then(ops::random_map::RandomMap {
            seed,
            parallelism: Unkeyed(parallelism),
            f: Unkeyed(Arc::new(f)),
            fallback: Unkeyed(rand::random()),
        })
    }

    /// Applies `f` to every element, in order, on the consumer's task (tf.data's `map` without
    /// `num_parallel_calls`). For CPU-heavy functions use [`map_parallel`](Dataset::map_parallel).
    ///
    /// `f` cannot fail. A function that returns `anyhow::Result<U>` belongs in
    /// [`try_map`](Dataset::try_map): given to `map`, it would make a `Dataset<Result<U>>`
    /// whose errors are ordinary elements, never error elements. Every mapping operation comes
    /// in these two forms: `map` / `try_map`, [`map_parallel`](Dataset::map_parallel) /
    /// [`try_map_parallel`](Dataset::try_map_parallel), [`map_async`](Dataset::map_async) /
    /// [`try_map_async`](Dataset::try_map_async), [`random_map`](Dataset::random_map) /
    /// [`try_random_map`](Dataset::try_random_map).
    ///
    /// # Errors
    ///
    /// A panic in `f` becomes an error element ([`Error::WorkerPanicked`](crate::Error)); the
    /// epoch goes on.
    ///
    /// ```
    /// use streamload::Dataset;
    /// # tokio_test::block_on(async {
    /// assert_eq!(Dataset::range(0, 5).map(|x| x * x).collect().await?, [0, 1, 4, 9, 16]);
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    pub fn map<U: Send + 'static>(&self, f: impl Fn(T) -> U + Send + Sync + 'static) -> Dataset<U> {
        self.then(ops::map::Map {
            f: Unkeyed(Arc::new(move |x: T| -> anyhow::Result<U> { Ok(f(x)) })),
        })
    }

    /// Like [`map`](Dataset::map), for a function that can fail: an `Err` becomes an error
    /// element in the element's place (drop those with [`ignore_errors`](Dataset::ignore_errors)).
    ///
    /// ```
    /// use streamload::Dataset;
    /// # tokio_test::block_on(async {
    /// let ds = Dataset::from_vec(vec![1.0f32, 0.0, 2.0])
    ///     .try_map(|x| if x == 0.0 { anyhow::bail!("division by zero") } else { Ok(1.0 / x) });
    /// assert_eq!(ds.ignore_errors().collect().await?, [1.0, 0.5]);
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    pub fn try_map<U: Send + 'static>(
        &self,
        f: impl Fn(T) -> anyhow::Result<U> + Send + Sync + 'static,
    ) -> Dataset<U> {
        self.then(ops::map::Map {
            f: Unkeyed(Arc::new(f)),
        })
    }

    /// Applies a CPU-bound function on `parallelism` blocking threads at once (tf.data's
    /// `map(f, num_parallel_calls=...)`).
    ///
    /// `f` cannot fail; for a function returning `anyhow::Result<U>` use
    /// [`try_map_parallel`](Dataset::try_map_parallel).
    ///
    /// Calls run on `parallelism` threads of streamload's own (started at the first poll;
    /// never the async workers, nor tokio's blocking pool, which the workers would hold for the
    /// whole epoch and so could starve the readers of pipelines running at once), which take
    /// groups of consecutive elements from a queue the stream keeps
    /// topped up, so no worker waits for the consumer. A group is sized from the measured cost
    /// of `f` to take about 1 ms (one element for slow functions, up to 256 for cheap ones),
    /// so the hand-over costs little whatever `f` costs. At most `2 × parallelism` groups are
    /// in flight (queued, running, or finished and waiting for their turn). When elements are
    /// byte strings (`Bytes`, `Vec<u8>`: records to parse), a worker asks the cache for the
    /// first and last lines of the element two calls ahead while `f` runs, so records that
    /// come out of a large shuffle buffer cold do not stall `f` one read at a time.
    ///
    /// # Autotune
    ///
    /// With `AUTOTUNE`, the stage starts [`Options::cpu_budget`](crate::Options) workers (the
    /// cores) and the epoch's tuner sets workers aside while they are busy less than 45% of
    /// the time (the stage is not the bottleneck) and brings them back while the consumer
    /// waits on a stage whose workers are busy; all autotuned stages together stay within
    /// the CPU budget. The report shows the number in use.
    ///
    /// # Ordering
    ///
    /// Input order, unless the pipeline's [`Options::deterministic`](crate::Options) is
    /// `false`, in which case elements come in the order their calls finish.
    ///
    /// # Errors
    ///
    /// A panic in `f` becomes an error element in that element's place
    /// ([`Error::WorkerPanicked`](crate::Error)); the epoch goes on.
    ///
    /// # Cancellation
    ///
    /// Dropping the epoch cancels queued calls; a running group stops at its next element.
    ///
    /// # Panics
    ///
    /// If `parallelism` is `Fixed(0)`.
    ///
    /// ```
    /// use streamload::{AUTOTUNE, Dataset};
    /// # tokio_test::block_on(async {
    /// let ds = Dataset::range(0, 100).map_parallel(AUTOTUNE, |x| x * 2);
    /// assert_eq!(ds.collect().await?, (0..100).map(|x| x * 2).collect::<Vec<_>>());
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    pub fn map_parallel<U: Send + 'static>(
        &self,
        parallelism: impl Into<Parallelism>,
        f: impl Fn(T) -> U + Send + Sync + 'static,
    ) -> Dataset<U> {
        self.try_map_parallel(parallelism, move |x| Ok(f(x)))
    }

    /// Like [`map_parallel`](Dataset::map_parallel), for a function that can fail: an `Err`
    /// becomes an error element in the element's place (drop those with
    /// [`ignore_errors`](Dataset::ignore_errors)); the epoch goes on.
    ///
    /// ```
    /// use streamload::{AUTOTUNE, Dataset};
    /// # tokio_test::block_on(async {
    /// let ds = Dataset::from_vec(vec!["1", "x", "3"]).try_map_parallel(AUTOTUNE, |s| Ok(s.parse::<i64>()?));
    /// let mut epoch = ds.iter();
    /// # use futures::StreamExt;
    /// assert_eq!(epoch.next().await.unwrap()?, 1);
    /// assert!(epoch.next().await.unwrap().is_err()); // "x" is an error element
    /// assert_eq!(epoch.next().await.unwrap()?, 3);
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    ///
    /// # Panics
    ///
    /// If `parallelism` is `Fixed(0)`.
    pub fn try_map_parallel<U: Send + 'static>(
        &self,
        parallelism: impl Into<Parallelism>,
        f: impl Fn(T) -> anyhow::Result<U> + Send + Sync + 'static,
    ) -> Dataset<U> {
        let parallelism = nonzero(parallelism.into(), "map_parallel");
        self.then(ops::parallel_map::MapParallel {
            f: Unkeyed(Arc::new(f)),
            parallelism: Unkeyed(parallelism),
        })
    }

    /// Applies an async function to every element, up to `parallelism` calls at once, each
    /// call a spawned tokio task (for I/O-bound work: fetching, opening files).
    ///
    /// `f`'s futures cannot fail; for futures of `anyhow::Result<U>` use
    /// [`try_map_async`](Dataset::try_map_async).
    ///
    /// # Ordering
    ///
    /// Input order (`buffered`), or completion order (`buffer_unordered`) when the pipeline's
    /// [`Options::deterministic`](crate::Options) is `false`.
    ///
    /// # Errors and cancellation
    ///
    /// A panic becomes an error element; dropping the epoch aborts the tasks.
    ///
    /// # Panics
    ///
    /// If `parallelism` is `Fixed(0)`.
    ///
    /// ```
    /// use streamload::Dataset;
    /// # tokio_test::block_on(async {
    /// let ds = Dataset::range(0, 4).map_async(2, |x| async move { x + 1 });
    /// assert_eq!(ds.collect().await?, [1, 2, 3, 4]);
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    pub fn map_async<U, F, Fut>(&self, parallelism: impl Into<Parallelism>, f: F) -> Dataset<U>
    where
        U: Send + 'static,
        F: Fn(T) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = U> + Send + 'static,
    {
        use futures::FutureExt;
        self.try_map_async(parallelism, move |x| f(x).map(anyhow::Ok))
    }

    /// Like [`map_async`](Dataset::map_async), for async functions that can fail: an `Err`
    /// becomes an error element in the element's place (drop those with
    /// [`ignore_errors`](Dataset::ignore_errors)); the epoch goes on.
    ///
    /// # Errors and cancellation
    ///
    /// An `Err` or a panic becomes an error element; dropping the epoch aborts the tasks.
    ///
    /// # Panics
    ///
    /// If `parallelism` is `Fixed(0)`.
    ///
    /// ```
    /// use streamload::Dataset;
    /// # tokio_test::block_on(async {
    /// let ds = Dataset::range(0, 4).try_map_async(2, |x| async move {
    ///     anyhow::ensure!(x != 1, "no {x}");
    ///     Ok(x + 1)
    /// });
    /// assert_eq!(ds.ignore_errors().collect().await?, [1, 3, 4]);
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    pub fn try_map_async<U, F, Fut>(&self, parallelism: impl Into<Parallelism>, f: F) -> Dataset<U>
    where
        U: Send + 'static,
        F: Fn(T) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = anyhow::Result<U>> + Send + 'static,
    {
        let parallelism = nonzero(parallelism.into(), "map_async");
        self.then(ops::map_async::MapAsync {
            f: Unkeyed(Arc::new(f)),
            parallelism: Unkeyed(parallelism.resolve()),
        })
    }

    /// Keeps the elements for which `predicate` is true (tf.data's `filter`). Error elements
    /// pass through.
    pub fn filter(&self, predicate: impl Fn(&T) -> bool + Send + Sync + 'static) -> Dataset<T> {
        self.then(ops::filter::Filter {
            predicate: Unkeyed(Arc::new(predicate)),
        })
    }

    /// Maps each element to a dataset and yields all of their elements in turn (tf.data's
    /// `flat_map`; the same as `interleave(1, 1, f)`).
    ///
    /// ```
    /// use streamload::Dataset;
    /// # tokio_test::block_on(async {
    /// let ds = Dataset::range(1, 4).flat_map(|x| Dataset::range(0, x));
    /// assert_eq!(ds.collect().await?, [0, 0, 1, 0, 1, 2]);
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    pub fn flat_map<U: Send + 'static>(
        &self,
        f: impl Fn(T) -> Dataset<U> + Send + Sync + 'static,
    ) -> Dataset<U> {
        self.interleave(1, 1, f)
    }

    /// Elements while `predicate` holds; ends at the first that fails it (tf.data's `take_while`).
    pub fn take_while(&self, predicate: impl Fn(&T) -> bool + Send + Sync + 'static) -> Dataset<T> {
        self.then(ops::take_while::TakeWhile {
            predicate: Unkeyed(Arc::new(predicate)),
        })
    }

    /// Pairs each element with its index, counting from `start` (tf.data's `enumerate`). An
    /// error element takes an index too, as in tf.data (a zip with a counter).
    pub fn enumerate(&self, start: i64) -> Dataset<(i64, T)> {
        self.then(ops::enumerate::Enumerate { start })
    }

    /// A running state over the elements: `f(state, x)` returns the next state and the output
    /// (tf.data's `scan`). Its state need not be serializable, so a checkpoint through it is
    /// refused, naming `scan`: [`scan_resumable`](Dataset::scan_resumable) saves it.
    ///
    /// ```
    /// use streamload::Dataset;
    /// # tokio_test::block_on(async {
    /// let sums = Dataset::range(1, 6).scan(0, |s, x| (s + x, s + x));
    /// assert_eq!(sums.collect().await?, [1, 3, 6, 10, 15]);
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    pub fn scan<S, U>(
        &self,
        initial_state: S,
        f: impl Fn(S, T) -> (S, U) + Send + Sync + 'static,
    ) -> Dataset<U>
    where
        S: Clone + Send + Sync + 'static,
        U: Send + 'static,
    {
        self.then(ops::scan::Scan {
            initial: Unkeyed(initial_state),
            f: Unkeyed(Arc::new(f)),
            codec: Unkeyed(None),
            key: 0,
        })
    }

    /// [`scan`](Dataset::scan) with a running state that checkpoints save
    /// ([`Epoch::checkpoint`](crate::Epoch::checkpoint)): it is serialized with serde (postcard's encoding) into the
    /// checkpoint, and read back by [`Dataset::iter_from`]. The elements are the same as
    /// `scan`'s.
    ///
    /// A scan's elements depend on the running state before them: when a stage after the
    /// scan holds its elements by position (a `shuffle` after it, or a `batch` after it when
    /// a shuffle comes before it), each element's position is its input element's with the
    /// running state it was made with, and a resume applies `f` to that state again. Such a
    /// position costs the state's serialized size, so keep the state small there (a plain
    /// `scan` is refused instead).
    ///
    /// ```
    /// use futures::StreamExt;
    /// use streamload::{Checkpoint, Dataset};
    /// # tokio_test::block_on(async {
    /// let sums = || Dataset::range(1, 6).scan_resumable(0i64, |s, x| (s + x, s + x));
    /// let mut epoch = sums().iter();
    /// assert_eq!(epoch.next().await.unwrap()?, 1);
    /// assert_eq!(epoch.next().await.unwrap()?, 3);
    /// let saved = epoch.checkpoint()?.to_bytes();
    /// let rest = sums().iter_from(&Checkpoint::from_bytes(&saved)?)?;
    /// let rest: Vec<i64> = rest.map(|x| x.unwrap()).collect().await;
    /// assert_eq!(rest, [6, 10, 15]);
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    ///
    /// # Errors
    ///
    /// As `scan`: a panic in `f` is an error element and ends the stage.
    pub fn scan_resumable<S, U>(
        &self,
        initial_state: S,
        f: impl Fn(S, T) -> (S, U) + Send + Sync + 'static,
    ) -> Dataset<U>
    where
        S: Clone + serde::Serialize + serde::de::DeserializeOwned + Send + Sync + 'static,
        U: Send + 'static,
    {
        self.then(ops::scan::Scan {
            key: ops::scan::Scan::key_of(&initial_state),
            initial: Unkeyed(initial_state),
            f: Unkeyed(Arc::new(f)),
            codec: Unkeyed(Some(ops::scan::Codec::postcard())),
        })
    }

    /// Applies a transformation function to the whole dataset (tf.data's `apply`).
    pub fn apply<U>(&self, f: impl FnOnce(Dataset<T>) -> Dataset<U>) -> Dataset<U> {
        f(self.clone())
    }

    /// Drops elements seen before (tf.data's `unique`). Remembers every distinct element.
    pub fn unique(&self) -> Dataset<T>
    where
        T: Clone + Eq + Hash,
    {
        self.then(ops::unique::Unique)
    }
}

impl<T: Send + 'static> Dataset<T> {
    /// The same elements, with a known [`cardinality`](crate::Dataset::cardinality) of
    /// `expected`, checked as the epoch runs (tf.data's
    /// `tf.data.experimental.assert_cardinality`): stages downstream (`batch`) and callers
    /// (a progress bar, a learning-rate schedule) can count on the number before the epoch.
    ///
    /// ```
    /// use streamload::{Cardinality, Dataset};
    /// # tokio_test::block_on(async {
    /// let ds = Dataset::range(0, 10).filter(|x| x % 2 == 0); // unknown cardinality
    /// let ds = ds.assert_cardinality(5).batch(2);
    /// assert_eq!(ds.cardinality(), Cardinality::Finite(3));
    /// assert_eq!(ds.count().await?, 3);
    ///
    /// let wrong = Dataset::range(0, 4).filter(|x| x % 2 == 0).assert_cardinality(3);
    /// let err = wrong.collect().await.unwrap_err();
    /// assert!(err.to_string().contains("expected to contain 3 elements but contained only 2"));
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    ///
    /// # Errors
    ///
    /// An [`Error::InvalidArgument`](crate::Error::InvalidArgument) element, after which the
    /// epoch ends, when the input has more elements than `expected` (in place of the first
    /// one too many) or fewer (at its end). Error elements pass through and are not counted.
    pub fn assert_cardinality(&self, expected: u64) -> Dataset<T> {
        self.then(ops::assert_cardinality::AssertCardinality { expected })
    }
}
