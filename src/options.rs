//! Pipeline options: parallelism levels, determinism and the global seed.

use std::num::NonZeroUsize;

/// How many calls run at once, or how many elements a buffer holds: a fixed number or
/// [`AUTOTUNE`], tf.data's `tf.data.AUTOTUNE`.
///
/// `usize` converts into it, so `ds.prefetch(2)` and `ds.prefetch(AUTOTUNE)` both read well.
///
/// `Autotune` currently resolves to the number of cores this process may use; the adaptive
/// tuner (which adjusts it while an epoch runs) plugs in at [`Parallelism::resolve`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Parallelism {
    /// Exactly this many.
    Fixed(usize),
    /// Let the library choose (tf.data's `AUTOTUNE`).
    Autotune,
}

/// tf.data's `AUTOTUNE`: let the library pick a parallelism level or buffer size.
pub const AUTOTUNE: Parallelism = Parallelism::Autotune;

impl From<usize> for Parallelism {
    fn from(n: usize) -> Self {
        Parallelism::Fixed(n)
    }
}

impl Parallelism {
    /// The number this setting stands for now: `Fixed(n)` is `n`, `Autotune` the number of cores.
    pub fn resolve(self) -> usize {
        match self {
            Parallelism::Fixed(n) => n,
            Parallelism::Autotune => available_cores(),
        }
    }
}

/// The number of cores this process may use (at least 1).
pub fn available_cores() -> usize {
    std::thread::available_parallelism().map_or(1, NonZeroUsize::get)
}

/// Options that apply to a whole pipeline, like `tf.data.Options`.
///
/// Set them with [`Dataset::with_options`](crate::Dataset::with_options). As in tf.data, options
/// set anywhere in a pipeline apply to every stage of it, upstream and downstream; when two
/// branches (say the two sides of a `zip`) set the same option, the later call wins.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Options {
    /// Whether parallel stages must keep the input order (tf.data's
    /// `experimental_deterministic`, default `true`). With `Some(false)`, `map_parallel`,
    /// `map_async` and `parallel_interleave` hand out elements in completion order.
    pub deterministic: Option<bool>,
    /// A global seed, like `tf.random.set_seed`: every random operation without a seed of its
    /// own derives one from this seed and its position in the pipeline.
    pub seed: Option<u64>,
    /// Whether the per-stage statistics also time the stages (busy and wait time, which the
    /// report needs to name the bottleneck). Element and error counts are always kept.
    /// Default `false`: timing costs a few nanoseconds per element and stage, which shows
    /// only in pipelines whose elements take nanoseconds.
    pub stats_timing: Option<bool>,
}

impl Options {
    /// Options with nothing set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets [`Options::deterministic`].
    pub fn deterministic(mut self, deterministic: bool) -> Self {
        self.deterministic = Some(deterministic);
        self
    }

    /// Sets [`Options::seed`].
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Sets [`Options::stats_timing`].
    pub fn stats_timing(mut self, on: bool) -> Self {
        self.stats_timing = Some(on);
        self
    }

    /// `other`'s settings over `self`'s.
    pub(crate) fn merge(&self, other: &Options) -> Options {
        Options {
            deterministic: other.deterministic.or(self.deterministic),
            seed: other.seed.or(self.seed),
            stats_timing: other.stats_timing.or(self.stats_timing),
        }
    }

    pub(crate) fn is_deterministic(&self) -> bool {
        self.deterministic.unwrap_or(true)
    }
}
