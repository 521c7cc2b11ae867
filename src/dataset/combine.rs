//! Several datasets into one: `zip`, `concatenate`, the samplers, the interleaves.

use std::sync::Arc;

use super::nonzero;
use crate::engine::{Dataset, Unkeyed};
use crate::ops;
use crate::options::Parallelism;

impl<T: Send + 'static> Dataset<T> {
    /// Pairs of elements of two datasets, until the shorter ends (tf.data's `zip`).
    ///
    /// ```
    /// use streamload::Dataset;
    /// # tokio_test::block_on(async {
    /// let ds = Dataset::zip(Dataset::range(0, 5), Dataset::range(10, 13));
    /// assert_eq!(ds.collect().await?, [(0, 10), (1, 11), (2, 12)]);
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    pub fn zip<U: Send + 'static>(a: Dataset<T>, b: Dataset<U>) -> Dataset<(T, U)> {
        a.then(ops::zip::Zip { other: b })
    }

    /// One vector per step with an element of each dataset, until the shortest ends.
    pub fn zip_all(datasets: Vec<Dataset<T>>) -> Dataset<Vec<T>> {
        Dataset::combine(datasets, ops::zip::ZipAll)
    }

    /// Elements drawn at random from `datasets` (tf.data's `sample_from_datasets`).
    ///
    /// Each step picks input `i` with probability `weights[i]` (normalised; `None` means
    /// uniform) using a ChaCha RNG seeded by `seed` (else the global seed, else OS entropy).
    /// Inputs whose weight is not positive (0, negative, NaN) are dropped when the dataset is
    /// made, as tf.data does: with one input left it is that input, with none an empty
    /// dataset. When an input runs out, `stop_on_empty_dataset` ends the whole dataset;
    /// otherwise sampling goes on among the others. Each input's own order is preserved.
    ///
    /// # Panics
    ///
    /// If `datasets` is empty, or `weights` has another length (with TensorFlow's messages),
    /// or an infinite weight.
    pub fn sample_from_datasets(
        datasets: Vec<Dataset<T>>,
        weights: Option<Vec<f64>>,
        seed: Option<u64>,
        stop_on_empty_dataset: bool,
    ) -> Dataset<T> {
        ops::sample::sample_from_datasets(datasets, weights, seed, stop_on_empty_dataset)
    }

    /// Elements drawn at random from `datasets` by weights that follow `mixture`, a schedule
    /// over the epoch's steps (the elements passed on so far): the data mixtures of
    /// language-model training, whose weights change as training goes on
    /// ([`Mixture`](crate::Mixture): constant, piecewise, interpolated, or any
    /// function of the step). Like [`sample_from_datasets`](Dataset::sample_from_datasets),
    /// each draw is from a ChaCha generator seeded by `seed` (else the global seed, else OS
    /// entropy), each input keeps its own order, and an input that has ended is not drawn
    /// again (the mixture ends when all have); a step whose weights are refused (another
    /// count, negative or not finite, all 0 among the inputs still open) is an
    /// `Error::InvalidArgument` naming the step, and the mixture ends there.
    ///
    /// A checkpoint saves the generator, the step and each input's position. The schedule is
    /// not part of the recipe's fingerprint: a training loop that changes the weights
    /// rebuilds the recipe with the new schedule and resumes from its checkpoint, and the
    /// draws go on from the saved step under the new weights. The mixture opens no pool of
    /// its own per input: put the parallel work after it (`mix(readers).map_parallel(..)`,
    /// one pool for all the sources), not in each source (a `map_parallel` per source runs
    /// its own threads). Mixing 40 files this way holds 1.2-1.4x the memory of reading them
    /// as one source, with as many threads (BENCHMARKS.md, W14m). For sampling without
    /// replacement within a source, shuffle that source (`shuffle`, or `list_files` with a
    /// seed) and `repeat` it.
    ///
    /// ```
    /// use streamload::Dataset;
    /// use streamload::Mixture;
    /// # tokio_test::block_on(async {
    /// let web = Dataset::range(0, 1_000);
    /// let code = Dataset::range(1_000, 2_000);
    /// // All web text at first, then half code from step 100 on.
    /// let mixture = Mixture::piecewise(vec![(0, vec![1.0, 0.0]), (100, vec![0.5, 0.5])]);
    /// let steps = Dataset::mix(vec![web, code], mixture, Some(7)).take(400).collect().await?;
    /// assert!(steps[..100].iter().all(|&x| x < 1_000));
    /// let code = steps[100..].iter().filter(|&&x| x >= 1_000).count();
    /// assert!((120..180).contains(&code), "{code} of 300");
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    ///
    /// # Panics
    ///
    /// If `datasets` is empty.
    pub fn mix(
        datasets: Vec<Dataset<T>>,
        mixture: crate::Mixture,
        seed: Option<u64>,
    ) -> Dataset<T> {
        assert!(!datasets.is_empty(), "mix: `datasets` should not be empty");
        Dataset::combine(
            datasets,
            ops::mix::Mix {
                mixture: Unkeyed(mixture),
                count: Unkeyed(None),
                seed,
                fallback: Unkeyed(rand::random()),
            },
        )
    }

    /// [`mix`](Dataset::mix) whose schedule runs over tokens rather than elements: a step is
    /// a token of the elements passed on so far (`length(element)` of them; an error counts
    /// for none), so `Mixture::piecewise(vec![(0, a), (1_000_000_000, b)])` changes the
    /// weights after a billion tokens, however long the documents. Saved and resumed as
    /// `mix` is (the tokens so far are its step).
    ///
    /// ```
    /// use streamload::{Dataset, Mixture};
    /// # tokio_test::block_on(async {
    /// let short = Dataset::from_vec(vec![vec![1u32; 2]; 100]);
    /// let long = Dataset::from_vec(vec![vec![2u32; 10]; 100]);
    /// // Only short documents for the first 20 tokens, then only long ones.
    /// let m = Mixture::piecewise(vec![(0, vec![1.0, 0.0]), (20, vec![0.0, 1.0])]);
    /// let docs = Dataset::mix_over_tokens(vec![short, long], m, Some(1), Vec::len);
    /// let lengths: Vec<usize> = docs.take(12).collect().await?.iter().map(Vec::len).collect();
    /// assert_eq!(lengths, [2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 10, 10]);
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    ///
    /// # Panics
    ///
    /// If `datasets` is empty.
    pub fn mix_over_tokens(
        datasets: Vec<Dataset<T>>,
        mixture: crate::Mixture,
        seed: Option<u64>,
        length: impl Fn(&T) -> usize + Send + Sync + 'static,
    ) -> Dataset<T> {
        assert!(!datasets.is_empty(), "mix: `datasets` should not be empty");
        let count: ops::sample::Count<T> = Arc::new(move |x| length(x) as u64);
        Dataset::combine(
            datasets,
            ops::mix::Mix {
                mixture: Unkeyed(mixture),
                count: Unkeyed(Some(count)),
                seed,
                fallback: Unkeyed(rand::random()),
            },
        )
    }

    /// Elements taken from `datasets[choice]` for each `choice` that `choices` yields
    /// (tf.data's `choose_from_datasets`).
    ///
    /// A choice outside `0..datasets.len()` is an error element. When the chosen input has run
    /// out, `stop_on_empty_dataset` (tf.data's default: `true`) ends the dataset; otherwise that
    /// choice is skipped.
    ///
    /// ```
    /// use streamload::Dataset;
    /// # tokio_test::block_on(async {
    /// let ds = Dataset::choose_from_datasets(
    ///     vec![Dataset::range(0, 3), Dataset::range(10, 15)],
    ///     Dataset::range(0, 2).repeat_n(3),
    ///     true,
    /// );
    /// assert_eq!(ds.collect().await?, [0, 10, 1, 11, 2, 12]);
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    pub fn choose_from_datasets(
        datasets: Vec<Dataset<T>>,
        choices: Dataset<i64>,
        stop_on_empty_dataset: bool,
    ) -> Dataset<T> {
        ops::sample::choose_from_datasets(datasets, choices, stop_on_empty_dataset)
    }

    /// Maps each element to a dataset and cycles through `cycle_length` of them at once,
    /// `block_length` elements from each in turn (tf.data's `interleave`, sequential).
    ///
    /// The order is exactly tf.data's: an exhausted inner dataset frees its slot and the cursor
    /// moves on at once; the next input element is opened into the freed slot only when the
    /// cursor comes back to it. For reading many files concurrently see
    /// [`parallel_interleave`](Dataset::parallel_interleave).
    ///
    /// ```
    /// use streamload::Dataset;
    /// # tokio_test::block_on(async {
    /// let ds = Dataset::range(1, 4).interleave(2, 1, |x| Dataset::range(10 * x, 10 * x + 3));
    /// assert_eq!(ds.collect().await?, [10, 20, 11, 21, 12, 22, 30, 31, 32]);
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    ///
    /// # Panics
    ///
    /// If `cycle_length` is `Fixed(0)` or `block_length` is 0.
    pub fn interleave<U: Send + 'static>(
        &self,
        cycle_length: impl Into<Parallelism>,
        block_length: usize,
        f: impl Fn(T) -> Dataset<U> + Send + Sync + 'static,
    ) -> Dataset<U> {
        let cycle_length = nonzero(cycle_length.into(), "interleave: cycle_length");
        assert!(
            block_length > 0,
            "interleave: block_length must be greater than zero."
        );
        self.then(ops::interleave::Interleave {
            cycle_length: cycle_length.resolve(),
            block_length,
            f: Unkeyed(Arc::new(f)),
        })
    }

    /// [`interleave`](Dataset::interleave) with each open inner dataset driven by a task of its
    /// own (tf.data's `interleave(..., num_parallel_calls=...)`): the way to read many files at
    /// once and hide storage latency.
    ///
    /// `num_parallel_calls` is how many inner datasets are read at once: the `cycle_length`
    /// open ones, plus `num_parallel_calls - cycle_length` opened ahead of the cursor when it
    /// is larger. `AUTOTUNE` opens `cycle_length` ahead (`2 * cycle_length` readers), as
    /// tf.data's parallel interleave prefetches input elements (its default: twice the
    /// cycle) to overlap opening the next files, a round trip each on object storage, with
    /// reading the current ones. `Fixed(cycle_length)` opens none ahead.
    ///
    /// # Memory
    ///
    /// Each reader holds at most `max(block_length, 128)` elements ahead of the consumer,
    /// handed over in chunks of half that, plus what is left of the chunk being read, and
    /// what its inner dataset buffers (for files, the read-ahead blocks).
    ///
    /// # Ordering
    ///
    /// With deterministic options (the default) the order is exactly that of `interleave`,
    /// except that an error element from an inner dataset takes a place in its block, as in
    /// tf.data's parallel interleave (its sequential interleave does not count it).
    /// Otherwise the cursor skips inner datasets with nothing ready, so output follows arrival.
    ///
    /// # Cancellation
    ///
    /// Dropping the epoch aborts every reader task.
    ///
    /// # Panics
    ///
    /// If `cycle_length` or `num_parallel_calls` is `Fixed(0)` or `block_length` is 0.
    ///
    /// ```
    /// use streamload::{AUTOTUNE, Dataset};
    /// # tokio_test::block_on(async {
    /// let ds = Dataset::range(1, 4).parallel_interleave(2, 1, AUTOTUNE, |x| Dataset::range(10 * x, 10 * x + 3));
    /// assert_eq!(ds.collect().await?, [10, 20, 11, 21, 12, 22, 30, 31, 32]);
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    pub fn parallel_interleave<U: Send + 'static>(
        &self,
        cycle_length: impl Into<Parallelism>,
        block_length: usize,
        num_parallel_calls: impl Into<Parallelism>,
        f: impl Fn(T) -> Dataset<U> + Send + Sync + 'static,
    ) -> Dataset<U> {
        let cycle_length = nonzero(cycle_length.into(), "parallel_interleave: cycle_length");
        let num_parallel_calls = nonzero(
            num_parallel_calls.into(),
            "parallel_interleave: num_parallel_calls",
        );
        assert!(
            block_length > 0,
            "parallel_interleave: block_length must be greater than zero."
        );
        self.then(ops::parallel_interleave::ParallelInterleave {
            cycle_length: cycle_length.resolve(),
            block_length,
            num_parallel_calls: Unkeyed(num_parallel_calls),
            f: Unkeyed(Arc::new(f)),
        })
    }

    /// Appends the elements of `other` (tf.data's `concatenate`).
    pub fn concatenate(&self, other: &Dataset<T>) -> Dataset<T> {
        Dataset::combine(
            vec![self.clone(), other.clone()],
            ops::concatenate::Concatenate,
        )
    }

    /// Pairs this dataset's elements with `other`'s (see [`Dataset::zip`]).
    pub fn zip_with<U: Send + 'static>(&self, other: &Dataset<U>) -> Dataset<(T, U)> {
        self.then(ops::zip::Zip {
            other: other.clone(),
        })
    }
}
