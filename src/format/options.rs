//! The options every file reader shares ([`FileOptions`]: the files, how many are read at
//! once, how each is read as blocks), and their builder methods, written once
//! ([`file_options!`]) into each reader's builder.

use super::Compression;
use crate::hash::Key;
use crate::options::Parallelism;
use crate::storage::Location;

/// What every file reader's builder holds besides its format's own options (one field,
/// `files`, of `TFRecordDataset`, `TextLineDataset`, `JsonLinesDataset`, `CsvDataset`,
/// `FixedLengthRecordDataset` and `WebDataset`), handed whole to
/// [`read_files`](super::files::read_files).
#[derive(Debug, Clone)]
pub(crate) struct FileOptions {
    /// The files, in the order they are read.
    pub(crate) files: Vec<Location>,
    /// Files read at once (`None`: one after the other).
    pub(crate) num_parallel_reads: Option<Parallelism>,
    /// How each file is read.
    pub(crate) blocks: BlockOptions,
}

/// How one file is read as blocks: inflated or as it is, how many bytes at a time, mapped
/// into memory or read.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BlockOptions {
    /// How the files are compressed ([`Compression::Auto`]: by each file's extension).
    pub(crate) compression: Compression,
    /// Bytes read (or mapped) at a time.
    pub(crate) buffer_size: usize,
    /// Map local files that are not compressed into memory rather than read them.
    pub(crate) memory_map: bool,
}

impl FileOptions {
    /// `files`, read one after the other, as they are (not compressed), 1 MiB at a time, not
    /// mapped.
    pub(crate) fn new<P: Into<Location>>(files: impl IntoIterator<Item = P>) -> Self {
        FileOptions {
            files: files.into_iter().map(Into::into).collect(),
            num_parallel_reads: None,
            blocks: BlockOptions {
                compression: Compression::None,
                buffer_size: crate::storage::local::DEFAULT_BLOCK,
                memory_map: false,
            },
        }
    }

    /// The same, with local files that are not compressed mapped into memory.
    pub(crate) fn mapped(mut self) -> Self {
        self.blocks.memory_map = true;
        self
    }

    /// The same, compressed as `compression` says.
    pub(crate) fn compressed(mut self, compression: Compression) -> Self {
        self.blocks.compression = compression;
        self
    }
}

impl BlockOptions {
    /// The options that decide which elements a file gives, for the recipe's fingerprint:
    /// the compression (a file inflated or read as it is gives other records). Not the
    /// buffer size nor the memory map, which only change speed, so a checkpoint resumes
    /// across them. (The files and `num_parallel_reads` are keyed by the stages
    /// [`read_files`](super::files::read_files) builds: the list, the interleave.)
    pub(crate) fn key(&self) -> u64 {
        // Every field named: one added later does not build until it is keyed or left out.
        let BlockOptions {
            compression,
            buffer_size: _,
            memory_map: _,
        } = self;
        Key::new().word(*compression as u64).finish()
    }
}

/// Writes the builder methods of [`FileOptions`] into a file reader's builder, which holds
/// them as its field `files`: `compression`, `buffer_size` and `num_parallel_reads`, and,
/// with `memory_map`, `memory_map`. The arguments: the builder (its name begins the panics'
/// messages), what its docs call a file (`"file"`, `"shard"`), and where the default is not
/// "no compression", the compression's default as its docs say it.
///
/// ```text
/// file_options!(TextLineDataset, "file");
/// file_options!(TFRecordDataset, "file", memory_map);
/// file_options!(WebDataset, "shard", "default [`Compression::Auto`]: ...", memory_map);
/// ```
macro_rules! file_options {
    ($reader:ident, $file:literal) => {
        $crate::format::options::file_options!(
            @shared $reader, $file,
            "default: none; [`Compression::Auto`](crate::format::Compression::Auto) goes by \
             extension",
            ""
        );
    };
    ($reader:ident, $file:literal, memory_map) => {
        $crate::format::options::file_options!(
            $reader, $file,
            "default: none; [`Compression::Auto`](crate::format::Compression::Auto) goes by \
             extension",
            memory_map
        );
    };
    ($reader:ident, $file:literal, $compression:literal, memory_map) => {
        $crate::format::options::file_options!(
            @shared $reader, $file, $compression,
            ", or mapped (see [`memory_map`](Self::memory_map)),"
        );

        impl $reader {
            #[doc = concat!("Maps local ", $file, "s that are not compressed into memory, a")]
            /// window of `buffer_size` bytes at a time, rather than reading them (default: on).
            /// The elements (records, a sample's fields) are then slices of the page cache: no
            /// copy, no allocation per element, and elements held in a shuffle buffer pin page
            /// cache (which the kernel can reclaim) rather than heap memory. With it, reading a
            /// TFRecord file costs little more than checking its CRCs (on two cores, W2 went
            /// from 1.97 to 3.37 GB/s and W3 from 401 to 706 thousand records/s; see
            /// BENCHMARKS.md).
            ///
            #[doc = concat!("Turn it off for ", $file, "s that another process may truncate or")]
            /// rewrite while they are read: touching a mapped page that a truncation took away
            /// kills the process with `SIGBUS` (each window is mapped only up to the file's
            /// length at that moment, so only a truncation while a window is in use can do
            /// that). Files that cannot be mapped (pipes, empty files, file systems without
            /// `mmap`) are read either way; object storage and compressed files are never
            /// mapped.
            pub fn memory_map(mut self, on: bool) -> Self {
                self.files.blocks.memory_map = on;
                self
            }
        }
    };
    (@shared $reader:ident, $file:literal, $compression:literal, $mapped:literal) => {
        impl $reader {
            #[doc = concat!("How the ", $file, "s are compressed (", $compression, ").")]
            pub fn compression(mut self, compression: $crate::format::Compression) -> Self {
                self.files.blocks.compression = compression;
                self
            }

            #[doc = concat!("Bytes read", $mapped, " from a ", $file, " at a time (default 1 MiB;")]
            /// two blocks are read ahead).
            ///
            /// # Panics
            ///
            /// If `bytes` is 0.
            pub fn buffer_size(mut self, bytes: usize) -> Self {
                assert!(
                    bytes > 0,
                    concat!(stringify!($reader), ": buffer_size must be at least 1")
                );
                self.files.blocks.buffer_size = bytes;
                self
            }

            #[doc = concat!("Reads this many ", $file, "s at once (tf.data's `num_parallel_reads`;")]
            /// one element from each in turn, deterministically), and opens as many more ahead,
            #[doc = concat!("so the next ", $file, "s' first bytes arrive while the current ones")]
            /// are read.
            pub fn num_parallel_reads(mut self, n: impl Into<$crate::options::Parallelism>) -> Self {
                self.files.num_parallel_reads = Some(n.into());
                self
            }
        }
    };
}

pub(crate) use file_options;
