//! # streamload
//!
//! Fast, async, stream-based input pipelines: what `tf.data` is for Python training jobs, for
//! async Rust.
//!
//! A [`Dataset<T>`] is a cheap, cloneable recipe. Its methods use tf.data's names and
//! semantics (`map`, `shuffle`, `batch`, `interleave`, `prefetch`, ...) and each adds one
//! stage. Each call to [`Dataset::iter`] runs the recipe once, as an [`Epoch`]: a
//! `Stream<Item = anyhow::Result<T>>` whose stages are async stream combinators.
//!
//! - **Extract**: sources ([`Dataset::range`], [`Dataset::from_vec`], [`Dataset::from_stream`],
//!   [`Dataset::from_generator`], [`Dataset::list_files`] for local globs and URLs) and
//!   [`Dataset::parallel_interleave`] to read many inputs at once.
//! - **Transform**: [`Dataset::map_parallel`] runs CPU-bound functions on blocking threads, on
//!   every core; [`Dataset::map_async`] runs async functions as spawned tasks.
//! - **Augment**: [`Dataset::random_map`] hands each element a random generator of its own,
//!   derived from (seed, epoch, index), so random augmentations give the same output at every
//!   parallelism level; the `image` module (feature `image`, on by default) decodes, resizes
//!   and augments images as `tf.image` does.
//! - **Load**: [`Dataset::prefetch`] runs everything upstream in a spawned task behind a bounded
//!   channel, so producer and consumer overlap. [`Dataset::iter_blocking`] hands the elements
//!   to synchronous code (a training loop that is not async) as a blocking `Iterator`, the
//!   epoch running on a tokio runtime streamload owns.
//!
//! Elements are `anyhow::Result<T>`: an error in one element is delivered in its place and the
//! epoch goes on; [`Dataset::ignore_errors`] drops them. Dropping an epoch stops every task it
//! spawned, and every buffer is bounded by the size you gave it.
//!
//! ```
//! use futures::StreamExt;
//! use streamload::{AUTOTUNE, Dataset};
//!
//! # tokio_test::block_on(async {
//! let ds = Dataset::range(0, 1_000)
//!     .shuffle(100, Some(7))
//!     .map_parallel(AUTOTUNE, |x| x * 2) // CPU-bound work on blocking threads
//!     .batch(64)
//!     .prefetch(2);
//! let mut epoch = ds.iter();
//! let mut total = 0;
//! while let Some(batch) = epoch.next().await {
//!     total += batch?.iter().sum::<i64>();
//! }
//! assert_eq!(total, 2 * (0..1_000).sum::<i64>());
//! # anyhow::Ok(()) }).unwrap();
//! ```
//!
//! The [user guide](guide) takes it from there: the concepts, a tour of the common pipelines
//! (TFRecord, text, images, WebDataset, object storage, Parquet, HDF5, ...), checkpoints and
//! resume, data-parallel training, damaged data, and tf.data's names side by side.

// Two `unsafe` blocks, each allowed where it is: one maps files into memory
// (`storage::local::map_window`), one hints the cache (`runtime::prefetch`).
#![deny(unsafe_code)]

#[cfg(any(feature = "burn", feature = "candle"))]
pub mod adapters;
mod blocking;
mod checkpoint;
mod dataset;
pub mod distribute;
mod engine;
mod hash;

// The README's examples run as doc tests too.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
mod error;
pub mod format;
pub mod guide;
#[cfg(feature = "image")]
pub mod image;
mod ops;
mod options;
mod progress;
mod runtime;
mod source;
mod stats;
pub mod storage;
pub mod tensor;
pub mod text;
#[cfg(feature = "tracing")]
mod trace;

pub use blocking::BlockingEpoch;
pub use checkpoint::Checkpoint;
pub use dataset::{Cardinality, Dataset, Epoch};
pub use error::Error;
pub use ops::bucket_by_sequence_length::BucketOptions;
pub use ops::ignore_errors_within::{ErrorBudget, Quarantine, Skipped};
pub use ops::mix::Mixture;
pub use options::{AUTOTUNE, Options, Parallelism, available_cores};
pub use progress::Progress;
/// The random generator [`Dataset::random_map`] hands to its function (ChaCha8).
pub use rand_chacha::ChaCha8Rng;

// The crates whose types appear in streamload's API, re-exported so that users name the same
// versions (a `cargo add rand` may pick another major version, whose traits the generator
// of `random_map` does not implement).
/// The `bytes` crate: records, strings and payloads are [`bytes::Bytes`].
pub use bytes;
/// The `ndarray` crate: `collate`, `padded_batch` and the image functions yield its arrays.
pub use ndarray;
/// The `rand` crate, in the version whose traits [`ChaCha8Rng`] implements: bring
/// [`rand::Rng`] into scope from here to draw from the generator [`Dataset::random_map`]
/// hands out.
///
/// ```
/// use streamload::Dataset;
/// use streamload::rand::Rng; // not `rand::Rng`: that may be another major version
/// # tokio_test::block_on(async {
/// let ds = Dataset::range(0, 8).random_map(2, Some(3), |x, rng| x + rng.random_range(0..10) * 100);
/// assert!(ds.collect().await?.iter().zip(0..).all(|(y, x)| y % 100 == x));
/// # anyhow::Ok(()) }).unwrap();
/// ```
pub use rand;
/// The `rand_chacha` crate of [`ChaCha8Rng`] (to seed one of your own with
/// [`rand::SeedableRng`]).
pub use rand_chacha;
pub use stats::{StageSnapshot, Stats};
