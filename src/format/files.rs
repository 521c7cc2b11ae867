//! Reading many files through one decoder: in order, or several at once.

use std::path::PathBuf;

use bytes::Bytes;
use futures::stream::StreamExt;
use tokio::io::AsyncRead;

use super::Compression;
use crate::dataset::{BoxStream, Cardinality, Dataset};
use crate::options::Parallelism;
use crate::storage::local::READ_AHEAD;

/// Turns one file's (decompressed) bytes into elements; the `&str` names the file in errors.
pub(crate) type Decode = fn(Box<dyn AsyncRead + Send + Unpin>, &str) -> BoxStream<Bytes>;

/// How to read each file of a file dataset.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FileFormat {
    /// The stage name of each file's reader (`tfrecord`, `text_line`).
    pub(crate) stage: &'static str,
    pub(crate) decode: Decode,
    pub(crate) compression: Compression,
    pub(crate) buffer_size: usize,
}

/// The elements of `files` in order, or `num_parallel_reads` files at once through
/// `parallel_interleave` (one element from each in turn, deterministically).
pub(crate) fn read_files(
    files: Vec<PathBuf>,
    format: FileFormat,
    num_parallel_reads: Option<Parallelism>,
) -> Dataset<Bytes> {
    let files = Dataset::from_vec(files);
    let read = move |path: PathBuf| file_elements(path, format);
    match num_parallel_reads {
        None => files.flat_map(read),
        Some(n) => files.parallel_interleave(n, 1, n, read),
    }
}

/// One file's elements; the file is opened when the stream is first polled.
fn file_elements(path: PathBuf, format: FileFormat) -> Dataset<Bytes> {
    Dataset::source(format.stage, Cardinality::Unknown, move |_| {
        let path = path.clone();
        async_stream::stream! {
            let name = path.display().to_string();
            let block = format.buffer_size;
            let file = match crate::storage::local::read_ahead(&path, block, READ_AHEAD).await {
                Ok(file) => file,
                Err(e) => {
                    yield Err(anyhow::Error::new(e).context(format!("opening {name}")));
                    return;
                }
            };
            let reader = format.compression.for_path(&path).reader(file);
            let mut elements = (format.decode)(reader, &name);
            while let Some(element) = elements.next().await {
                yield element;
            }
        }
    })
}
