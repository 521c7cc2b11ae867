//! Compression of record files: none, GZIP or ZLIB, as TensorFlow's `compression_type`.

use std::path::Path;

use async_compression::tokio::bufread::{GzipDecoder, ZlibDecoder};
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
    /// By the file name: `.gz` is GZIP, `.zz` or `.zlib` is ZLIB, anything else none.
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
            Some("gz") => Compression::Gzip,
            Some("zz" | "zlib") => Compression::Zlib,
            _ => Compression::None,
        }
    }

    /// Decompresses a stream of blocks into blocks of at most `capacity` bytes (the blocks
    /// themselves when not compressed).
    pub(crate) fn blocks(self, blocks: Blocks, capacity: usize) -> Blocks {
        match self {
            Compression::Gzip => {
                let mut decoder = GzipDecoder::new(StreamReader::new(blocks));
                decoder.multiple_members(true);
                Box::pin(reader_blocks(decoder, capacity))
            }
            Compression::Zlib => Box::pin(reader_blocks(
                ZlibDecoder::new(StreamReader::new(blocks)),
                capacity,
            )),
            Compression::None | Compression::Auto => blocks,
        }
    }
}
