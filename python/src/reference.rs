//! Recipes built with streamload's Rust API alone (`Dataset<i64>`, `Dataset<Bytes>`, no
//! `Value`), for the tests: the Python package must give the same elements as the Rust
//! crate on the same recipe.

use pyo3::prelude::*;
use pyo3::types::PyBytes;
use streamload::Dataset;
use streamload::format::TFRecordDataset;

use crate::errors;

/// `epochs` epochs of `range(0, n).shuffle(buffer, seed).shard(num_shards, index).batch(batch)`.
#[pyfunction]
#[pyo3(signature = (n, buffer, seed, num_shards, index, batch, epochs))]
#[allow(clippy::too_many_arguments)] // one per operation's parameter, as the Python recipe
pub(crate) fn _reference_range(
    py: Python<'_>,
    n: i64,
    buffer: usize,
    seed: u64,
    num_shards: u64,
    index: u64,
    batch: usize,
    epochs: usize,
) -> PyResult<Vec<Vec<Vec<i64>>>> {
    let ds = Dataset::range(0, n)
        .shuffle(buffer, Some(seed))
        .shard(num_shards, index)
        .batch(batch);
    py.detach(|| {
        (0..epochs)
            .map(|_| ds.iter_blocking().collect::<anyhow::Result<Vec<_>>>())
            .collect::<anyhow::Result<Vec<_>>>()
    })
    .map_err(|e| errors::to_py(py, e))
}

/// The records of `TFRecordDataset(files).num_parallel_reads(reads)`, shuffled by
/// `shuffle(buffer, seed)`.
#[pyfunction]
pub(crate) fn _reference_tfrecord(
    py: Python<'_>,
    files: Vec<String>,
    reads: usize,
    buffer: usize,
    seed: u64,
) -> PyResult<Vec<Py<PyBytes>>> {
    let ds = TFRecordDataset::new(files)
        .num_parallel_reads(reads)
        .build()
        .shuffle(buffer, Some(seed));
    let records = py
        .detach(|| ds.iter_blocking().collect::<anyhow::Result<Vec<_>>>())
        .map_err(|e| errors::to_py(py, e))?;
    Ok(records
        .iter()
        .map(|r| PyBytes::new(py, r).unbind())
        .collect())
}
