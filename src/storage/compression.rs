//! Compression of record files: none, GZIP or ZLIB, as TensorFlow's `compression_type`.

use std::io;
use std::path::Path;

use async_compression::tokio::bufread::{GzipDecoder, ZlibDecoder};
use futures::TryStreamExt;
use tokio_util::io::StreamReader;

use super::blocks::{Blocks, reader_blocks};

/// How a record file is compressed (TensorFlow's `compression_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Compression {
    /// Not compressed (TensorFlow's `""`).
    #[default]
    None,
    /// GZIP (`"GZIP"`); concatenated members are read as one stream.
    Gzip,
    /// ZLIB (`"ZLIB"`).
    Zlib,
    /// By the file name: `.gz` (or `.tgz`) is GZIP, `.zz` or `.zlib` is ZLIB, anything else
    /// none.
    Auto,
}

impl Compression {
    /// The compression a file name implies, for [`Compression::Auto`].
    pub fn for_path(self, path: &Path) -> Compression {
        self.for_extension(path.extension().and_then(|e| e.to_str()))
    }

    pub(crate) fn for_extension(self, extension: Option<&str>) -> Compression {
        if self != Compression::Auto {
            return self;
        }
        match extension {
            Some("gz" | "tgz") => Compression::Gzip,
            Some("zz" | "zlib") => Compression::Zlib,
            _ => Compression::None,
        }
    }

    /// Decompresses a stream of blocks into blocks of at most `capacity` bytes (the blocks
    /// themselves when not compressed). An error of the decompressor itself (a damaged or
    /// truncated compressed stream, or bytes that are not compressed at all) comes out as an
    /// `InvalidData` error that [`damage`] recognises; an error reading the compressed bytes
    /// comes out as it was.
    pub(crate) fn blocks(self, blocks: Blocks, capacity: usize) -> Blocks {
        let name = match self {
            Compression::Gzip => "GZIP",
            Compression::Zlib => "ZLIB",
            Compression::None | Compression::Auto => return blocks,
        };
        // Errors of the source are marked on their way in, so whatever else comes out of the
        // decoder is the decoder's.
        let source = StreamReader::new(blocks.map_err(|e| io::Error::new(e.kind(), Source(e))));
        let decoded: Blocks = if self == Compression::Gzip {
            let mut decoder = GzipDecoder::new(source);
            decoder.multiple_members(true);
            Box::pin(reader_blocks(decoder, capacity))
        } else {
            Box::pin(reader_blocks(ZlibDecoder::new(source), capacity))
        };
        Box::pin(decoded.map_err(move |e| {
            if e.get_ref().is_some_and(|inner| inner.is::<Source>()) {
                return match e.into_inner().map(|inner| inner.downcast::<Source>()) {
                    Some(Ok(source)) => source.0,
                    _ => io::Error::other("a source error lost on its way out"),
                };
            }
            io::Error::new(
                io::ErrorKind::InvalidData,
                Damaged {
                    compression: name,
                    source: e,
                },
            )
        }))
    }
}

/// An error reading compressed bytes, on its way through a decoder.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
struct Source(io::Error);

/// The decompressor's own error: the compressed stream is damaged (TensorFlow's
/// `DataLossError` "inflate() failed ...").
#[derive(Debug, thiserror::Error)]
#[error("{compression} inflate() failed ({source}) in the decompressed stream")]
struct Damaged {
    compression: &'static str,
    source: io::Error,
}

/// When `e` is a decompressor's error (see [`Compression::blocks`]), what went wrong, for a
/// data-loss error that names the record and the offset (in the decompressed stream, the
/// one the readers count in) where decompression failed.
pub(crate) fn damage(e: &io::Error) -> Option<String> {
    e.get_ref()?
        .downcast_ref::<Damaged>()
        .map(ToString::to_string)
}
