//! Compression of record files: none, GZIP or ZLIB, as TensorFlow's `compression_type`.

use std::path::Path;

use async_compression::tokio::bufread::{GzipDecoder, ZlibDecoder};
use tokio::io::{AsyncBufRead, AsyncRead};

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

    /// Wraps a buffered reader in the matching decoder (the reader's own buffer feeds the
    /// decompressor, so no further buffering is added).
    pub(crate) fn reader<R>(self, inner: R) -> Box<dyn AsyncRead + Send + Unpin>
    where
        R: AsyncBufRead + Send + Unpin + 'static,
    {
        match self {
            Compression::Gzip => {
                let mut decoder = GzipDecoder::new(inner);
                decoder.multiple_members(true);
                Box::new(decoder)
            }
            Compression::Zlib => Box::new(ZlibDecoder::new(inner)),
            Compression::None | Compression::Auto => Box::new(inner),
        }
    }
}
