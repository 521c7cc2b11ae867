//! The errors the library raises itself.
//!
//! Elements are `anyhow::Result<T>`; when streamload itself fails (a worker panicked, no tokio
//! runtime, corrupt data), the `anyhow::Error` holds one of these, so callers can
//! `err.downcast_ref::<streamload::Error>()` and match on it.

/// An error raised by streamload itself.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A user function or a spawned task panicked while producing an element.
    #[error("{stage}: a worker panicked: {message}")]
    WorkerPanicked {
        /// The stage whose work panicked, e.g. `map_parallel`.
        stage: &'static str,
        /// The panic payload, when it was a string.
        message: String,
    },
    /// A stage needs to spawn tasks, but the stream is not polled inside a tokio runtime.
    #[error(
        "{stage}: no tokio runtime: iterate the dataset inside a tokio runtime (e.g. #[tokio::main]), or with Dataset::iter_blocking"
    )]
    NoRuntime {
        /// The stage that needed to spawn.
        stage: &'static str,
    },
    /// A checkpoint cannot be taken through this stage: it does not save its position (a
    /// plain generator, a stream made by user code, or an operation not made resumable yet).
    #[error("cannot checkpoint stage `{stage}`: {reason}")]
    NotResumable {
        /// The stage, by its tf.data name (or the name given with `Dataset::named`).
        stage: String,
        /// Why, and what to use instead.
        reason: String,
    },
    /// A checkpoint cannot be restored: it belongs to another recipe, another version of the
    /// format, or files that changed since it was taken; or its bytes are damaged.
    #[error("checkpoint: {0}")]
    Checkpoint(String),
    /// An argument or an element is out of the range an operation accepts.
    #[error("{0}")]
    InvalidArgument(String),
    /// Damaged data (TensorFlow's `DataLossError`): a CRC mismatch, a truncated record, or a
    /// damaged compressed stream. The message carries TensorFlow's words ("corrupted record
    /// at OFFSET", "truncated record at OFFSET", "GZIP inflate() failed (...)") and names the
    /// file and the record: `PATH: MESSAGE at OFFSET (record N)`. As in TensorFlow, a
    /// corrupted record at offset 0 (the first header of the file is not a TFRecord header)
    /// reads "corrupted record at 0 (Is this even a TFRecord file?)"; when such a file was
    /// read without decompression but starts as a GZIP or ZLIB stream, the text ends with
    /// which compression to set (see `looks_compressed`).
    #[error(
        "{path}: {message} at {offset}{} (record {record}){}{}",
        checksum_suffix(.message, *.offset),
        compression_hint(*.looks_compressed),
        resync_note(.skipped)
    )]
    #[non_exhaustive]
    DataLoss {
        /// The file or URL being read.
        path: String,
        /// The 0-based index of the damaged record in that file.
        record: u64,
        /// The byte offset TensorFlow names: the payload's for a bad data CRC, the record's
        /// start otherwise (in the decompressed stream for a compressed file).
        offset: u64,
        /// What is wrong: `corrupted record`, `truncated record`, ...
        message: String,
        /// The compression the data seems to have, when it was read as uncompressed
        /// TFRecords and its first header is damaged because it starts as a GZIP stream
        /// (`1f 8b`) or a ZLIB one (`78 ..`): TensorFlow's reader says only "corrupted record
        /// at 0"; this says which `compression` to set.
        looks_compressed: Option<crate::storage::compression::Compression>,
        /// With [`TFRecordDataset::resync`](crate::format::TFRecordDataset::resync): the
        /// bytes skipped to find the next good record (`start..end`, where reading went on
        /// at `end`, or the end of the file), shown as "; skipped N bytes (start..end),
        /// reading on at end".
        skipped: Option<std::ops::Range<u64>>,
    },
    /// An element is longer than the shape it is padded to (`padded_batch`,
    /// `bucket_by_sequence_length`): TensorFlow's `DataLossError` "Attempted to pad to a
    /// smaller size than the input element.", raised when the batch holding that element is made.
    #[error(
        "Attempted to pad to a smaller size than the input element. Component {component}, element {element} of its batch: shape {shape:?}, padded shape {padded:?}"
    )]
    PaddingTooSmall {
        /// The tensor component (tf.data's flattened structure: tuple fields count from 0).
        component: usize,
        /// The element's index in its batch.
        element: usize,
        /// The element's shape.
        shape: Vec<usize>,
        /// The shape it was to be padded to.
        padded: Vec<usize>,
    },
}

/// TensorFlow's reminder after a checksum error at offset 0 of a TFRecord file
/// (`GetChecksumErrorSuffix` in `tensorflow/tsl/lib/io/record_reader.cc`): TFRecord files
/// have no format marker, so a file of something else fails its first header's CRC.
fn checksum_suffix(message: &str, offset: u64) -> &'static str {
    if offset == 0 && message == "corrupted record" {
        " (Is this even a TFRecord file?)"
    } else {
        ""
    }
}

fn resync_note(skipped: &Option<std::ops::Range<u64>>) -> String {
    match skipped {
        Some(r) => format!(
            "; skipped {} bytes ({}..{}), reading on at {}",
            r.end - r.start,
            r.start,
            r.end,
            r.end
        ),
        None => String::new(),
    }
}

fn compression_hint(looks_compressed: Option<crate::storage::compression::Compression>) -> String {
    use crate::storage::compression::Compression;
    match looks_compressed {
        Some(c @ (Compression::Gzip | Compression::Zlib)) => {
            let name = if c == Compression::Gzip {
                "GZIP"
            } else {
                "ZLIB"
            };
            format!("; the file looks {name}-compressed: set .compression(Compression::{c:?})")
        }
        _ => String::new(),
    }
}

pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_string()
    }
}

/// Whether `e` refuses a resume ([`Error::Checkpoint`]: a file changed since the checkpoint,
/// a saved position that no longer holds). A refusal is never dropped or counted as an
/// element: `ignore_errors`, error budgets and the skipping that replays a mark pass it on,
/// and the epoch ends after it.
pub(crate) fn is_refusal(e: &anyhow::Error) -> bool {
    matches!(e.downcast_ref::<Error>(), Some(Error::Checkpoint(_)))
}
