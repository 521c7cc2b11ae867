//! The façade: [`Dataset<T>`]'s methods, the recipe users write, grouped by family.
//!
//! A `Dataset` holds configuration only. Each call to [`Dataset::iter`] builds one epoch:
//! fresh buffers, channels, tasks and random state. Every method here is a thin one that
//! records a stage: the stream combinator that runs it lives in its own file under `ops/` (or
//! `source/`), and the machinery every stage shares (statistics, autotuning, checkpoints) in
//! the engine (`crate::engine`), which knows nothing of this layer.
//!
//! - [`sources`]: `range`, `from_vec`, `from_iter`, `from_stream`, `from_generator`;
//! - [`transform`]: one element to one (or none): the maps, `filter`, `flat_map`, `scan`, ...;
//! - [`combine`]: several datasets into one: `zip`, `concatenate`, the samplers, the
//!   interleaves;
//! - [`batch`]: elements into groups and back: the batches, windows, buckets;
//! - [`order`]: which elements, in what order, when: `shuffle`, `repeat`, `take`, `skip`,
//!   `shard`, `cache`, `prefetch`;
//! - [`errors`]: `ignore_errors` and its budgeted form;
//! - [`settings`]: `named`, `with_options`;
//! - [`iterate`]: running a recipe: `iter`, `iter_from`, `collect`, ...

mod batch;
mod combine;
mod errors;
mod iterate;
mod order;
mod settings;
mod sources;
mod transform;

pub use crate::engine::{Cardinality, Dataset, Epoch};

use crate::options::Parallelism;

/// `p`, unless it is zero workers.
///
/// # Panics
///
/// If `p` is `Fixed(0)`.
pub(super) fn nonzero(p: Parallelism, what: &str) -> Parallelism {
    assert!(
        p != Parallelism::Fixed(0),
        "{what} must be greater than zero (or AUTOTUNE)"
    );
    p
}
