//! `streamload._native`: streamload's pipelines for Python training loops.
//!
//! A Python `Dataset` wraps a `streamload::Dataset<Value>` ([`value::Value`]: tf.data's
//! nested structure of tensors, holding no Python object). Every Rust stage runs without the
//! GIL; Python functions (`map`, `filter`, `from_generator`) take it only while they run.
//! Iterating hands each element to Python as numpy arrays that own the Rust buffers.
//!
//! - `dataset.rs`: the `Dataset` class, one thin method per tf.data operation.
//! - `iterator.rs`: one epoch (`Iterator`): waits for elements with the GIL released,
//!   checks for Ctrl-C while it waits, checkpoints.
//! - `readers.rs`: the file readers (TFRecord, text lines, fixed-length records, CSV, JSON
//!   lines, WebDataset, Parquet, HDF5) and the reading settings they share.
//! - `formats.rs`: each format's element as a `Value`.
//! - `transforms.rs`: the built-in transforms `map` runs without the GIL (images, text).
//! - `distribute.rs`: `Dataset.distribute`, a rank's share (by file, row group or element).
//! - `padding.rs`: `padded_batch`'s padding.
//! - `spec.rs`: `FixedLenFeature` and `parse_example`.
//! - `strings_view.rs`: `StringsView`, string tensors handed over without copies.
//! - `errors.rs`: Rust errors as the exceptions of `streamload.errors`.
//! - `reference.rs`: recipes built with the Rust API alone, for the tests' comparisons.
//! - `runtime.rs`: the tokio runtime the epochs run on.
#![deny(unsafe_code)]

mod dataset;
mod distribute;
mod errors;
mod formats;
mod iterator;
mod padding;
mod readers;
mod reference;
mod runtime;
mod spec;
mod strings_view;
mod transforms;
mod value;

use pyo3::prelude::*;

/// Every Rust allocation of the extension (the pipeline's buffers, the arrays numpy receives
/// and frees through their Rust owner) goes to mimalloc: elements are allocated on one thread
/// and freed on another, at a high rate, which glibc's arenas serialize. Python's own objects
/// keep Python's allocator.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The extension module; `streamload/__init__.py` re-exports its names.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<dataset::PyDataset>()?;
    m.add_class::<iterator::PyIterator>()?;
    m.add_class::<spec::FixedLenFeature>()?;
    m.add_class::<spec::VarLenFeature>()?;
    m.add_class::<spec::FixedLenSequenceFeature>()?;
    m.add_class::<spec::SparseFeature>()?;
    m.add_class::<spec::RaggedFeature>()?;
    m.add_class::<strings_view::StringsView>()?;
    m.add_function(wrap_pyfunction!(dataset::list_files, m)?)?;
    m.add_function(wrap_pyfunction!(readers::read, m)?)?;
    m.add_class::<transforms::Transform>()?;
    m.add_class::<transforms::PyVocabulary>()?;
    m.add_class::<transforms::PyTokenizer>()?;
    m.add_function(wrap_pyfunction!(transforms::decode, m)?)?;
    m.add_function(wrap_pyfunction!(transforms::read_file, m)?)?;
    m.add_function(wrap_pyfunction!(transforms::convert_image_dtype, m)?)?;
    m.add_function(wrap_pyfunction!(transforms::resize, m)?)?;
    m.add_function(wrap_pyfunction!(transforms::image_op, m)?)?;
    m.add_function(wrap_pyfunction!(transforms::random_resized_crop, m)?)?;
    m.add_function(wrap_pyfunction!(transforms::center_crop, m)?)?;
    m.add_function(wrap_pyfunction!(readers::fixed_length_record_dataset, m)?)?;
    m.add_function(wrap_pyfunction!(readers::csv_dataset, m)?)?;
    m.add_function(wrap_pyfunction!(readers::parquet_dataset, m)?)?;
    m.add_function(wrap_pyfunction!(readers::hdf5_dataset, m)?)?;
    m.add_class::<readers::PyMegatron>()?;
    m.add_function(wrap_pyfunction!(reference::_reference_range, m)?)?;
    m.add_function(wrap_pyfunction!(reference::_reference_tfrecord, m)?)?;
    m.add("AUTOTUNE", dataset::AUTOTUNE)?;
    m.add("INFINITE_CARDINALITY", dataset::INFINITE)?;
    m.add("UNKNOWN_CARDINALITY", dataset::UNKNOWN)?;
    Ok(())
}
