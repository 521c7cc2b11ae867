//! The operations, one stream combinator per file.
//!
//! | file | tf.data name |
//! |---|---|
//! | `map.rs` | `map` (no parallelism), `try_map` |
//! | `parallel_map.rs` | `map(num_parallel_calls=...)` on blocking threads: `map_parallel`, `try_map_parallel` |
//! | `random_map.rs` | a parallel map with per-element randomness (Grain's `RandomMapTransform`): `random_map`, `try_random_map` |
//! | `map_async.rs` | `map` of an async function as spawned tasks: `map_async`, `try_map_async` |
//! | `filter.rs` | `filter` |
//! | `interleave.rs` | `interleave`, `flat_map` |
//! | `parallel_interleave.rs` | `interleave(num_parallel_calls=...)` |
//! | `batch.rs` | `batch`, `rebatch` (one size or a list of sizes in turn: `rebatch_sizes`) |
//! | `collate.rs` | stacking batches into arrays (`batch` of tensors): `collate` |
//! | `padded_batch.rs`, `ragged_batch.rs` | `padded_batch`, `ragged_batch` |
//! | `bucket_by_sequence_length.rs` | `bucket_by_sequence_length` |
//! | `unbatch.rs` | `unbatch` (of `Vec`s and tensors: `tensor::Unbatch`) |
//! | `shuffle.rs` | `shuffle` |
//! | `repeat.rs` | `repeat()` (forever), `repeat(count)`: `repeat`, `repeat_n` |
//! | `take.rs`, `skip.rs`, `take_while.rs` | `take`, `skip`, `take_while` |
//! | `shard.rs`, `enumerate.rs` | `shard`, `enumerate` |
//! | `assert_cardinality.rs` | `tf.data.experimental.assert_cardinality` |
//! | `window.rs` | `window` (each window a `Vec`; as a dataset: `window_datasets`) |
//! | `scan.rs`, `unique.rs` | `scan`, `unique` |
//! | `group_by_window.rs` | `group_by_window` (`window_size_func`: `group_by_window_with`) |
//! | `cache.rs` | `cache()` (in memory) |
//! | `prefetch.rs` | `prefetch` |
//! | `ignore_errors.rs` | `ignore_errors` |
//! | `ignore_errors_within.rs` | `ignore_errors` with an error budget (SPDL's `max_failures`) |
//! | `zip.rs`, `concatenate.rs` | `zip`, `concatenate` |
//! | `sample.rs` | `sample_from_datasets`, `choose_from_datasets` |
//! | `batch_by_tokens.rs` | batches of at most a budget of tokens (fairseq's `max_tokens`): `batch_by_tokens` |
//! | `mix.rs` | weighted sampling whose weights follow a schedule (data mixtures): `mix` |
//! | `pack.rs` | token ids packed into sequences (Grain's packing transformations): `pack` |

pub(crate) mod assert_cardinality;
pub(crate) mod batch;
pub(crate) mod batch_by_tokens;
pub(crate) mod bucket_by_sequence_length;
pub(crate) mod cache;
pub(crate) mod collate;
pub(crate) mod concatenate;
pub(crate) mod enumerate;
pub(crate) mod filter;
pub(crate) mod group_by_window;
pub(crate) mod ignore_errors;
pub(crate) mod ignore_errors_within;
pub(crate) mod interleave;
pub(crate) mod map;
pub(crate) mod map_async;
pub(crate) mod mix;
pub(crate) mod pack;
pub(crate) mod padded_batch;
pub(crate) mod parallel_interleave;
pub(crate) mod parallel_map;
pub(crate) mod prefetch;
pub(crate) mod ragged_batch;
pub(crate) mod random_map;
pub(crate) mod repeat;
pub(crate) mod sample;
pub(crate) mod scan;
pub(crate) mod shard;
pub(crate) mod shuffle;
pub(crate) mod skip;
pub(crate) mod take;
pub(crate) mod take_while;
pub(crate) mod unbatch;
pub(crate) mod unique;
pub(crate) mod window;
pub(crate) mod zip;
