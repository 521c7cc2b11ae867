//! File formats: TFRecord (read and write, CRC-checked, GZIP/ZLIB), `tf.train.Example` (decode,
//! encode, `parse_example` with a feature spec; indexes for random access), text lines, JSON
//! lines, fixed-length records, CSV, WebDataset tar shards (read and write), Parquet, HDF5 and
//! Zarr (features `parquet`, `hdf5` and `zarr`) and `list_files`.
//!
//! Every reader works on any `tokio::io::AsyncRead`, so the same code reads local files and,
//! through the storage layer, object storage.

#[cfg(any(feature = "hdf5", feature = "zarr"))]
mod arrays;
mod csv;
mod example;
mod files;
mod fixed_length;
#[cfg(feature = "hdf5")]
pub mod hdf5;
mod json_lines;
pub mod megatron;
mod options;
#[cfg(feature = "parquet")]
pub mod parquet;
mod parse_example;
mod text;
mod tfrecord;
mod webdataset;
#[cfg(feature = "zarr")]
pub mod zarr;

pub use crate::storage::compression::Compression;
pub use crate::storage::listing::list_files;
pub use csv::{Column, CsvDataset, Field};
pub use example::{
    BytesList, Example, Feature, FeatureList, FeatureLists, Features, FloatList, Int64List, Kind,
    SequenceExample,
};
pub use fixed_length::FixedLengthRecordDataset;
pub use json_lines::JsonLinesDataset;
pub use parse_example::{
    ExampleView, FeatureSpec, ParseSpec, Parsed, ParsedExample, ViewBytes, ViewFloats, ViewInt64s,
    parse_example, parse_single_example, parse_single_example_view,
};
pub use text::{TextLineDataset, text_lines};
pub use tfrecord::{
    IndexEntry, IndexTarget, IndexedTFRecords, TFRecordDataset, TFRecordIndex, TFRecordWriter,
    tfrecord_records,
};
pub use webdataset::{Sample, ShardWriter, WebDataset, webdataset_samples};

/// TensorFlow's masked CRC32C: `((crc >> 15) | (crc << 17)) + 0xa282ead8`.
pub(crate) fn masked_crc32c(data: &[u8]) -> u32 {
    let crc = crc32c::crc32c(data);
    crc.rotate_right(15).wrapping_add(0xa282_ead8)
}
