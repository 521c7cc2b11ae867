//! Blocks of whole rows, read chunk by chunk: [`read_rows`](super::read_rows)'s fast path.
//!
//! `hdf5-reader`'s `read_slice` copies each decoded chunk into its result one run along the
//! last axis at a time, with checked index arithmetic for each run: a chunk of float32
//! `[64, 1024, 3]` is 65,536 copies of 12 bytes (W12: 38.6% of a core, `BENCHMARKS.md`).
//! When a dataset's chunks hold whole rows (a chunk spans every axis but the first) and a
//! block's rows start and end on the chunk grid, each chunk's part of the block is one run
//! of bytes, and the block is those runs one after the other: each is appended to the
//! result as values in one pass (`Element`'s `raw`: the byte order turned round where the
//! file's is not the machine's, float16 from its bits), with no index arithmetic. When the
//! shuffle filter is the last one a chunk is decoded with (h5py's order: shuffle, the
//! compression, fletcher32), it is left out of the pipeline and undone in that same pass
//! (the reader's `unshuffle` writes a byte at a time into a buffer of its own: 16% of a core
//! on W12 once the row copies were gone).
//!
//! `hdf5-reader` has no public call that decodes one chunk by its coordinates
//! (`iter_chunks` decodes every chunk of the dataset in turn), so this reads a chunk with
//! its public parts: the chunk index, walked once when the file is opened
//! ([`chunks`](super::chunks)), the file's storage (the same positioned or ranged reads),
//! and its filter pipeline (`filters::apply_pipeline_with_limit`, with the registry the
//! file was opened with, LZF included). A chunk read here skips the reader's chunk cache:
//! blocks on the grid never share a chunk, so within an epoch each is decoded once either
//! way.
//!
//! Anything else is read by `read_slice`: a block off the chunk grid (whose edge chunks
//! another block shares, and the cache keeps), a hyperslab or patch that does not take
//! every column, a chunk the index does not list (an error before the read, or with
//! `fill_missing_chunks` the fill value), strings and compound fields.

use std::collections::HashMap;
use std::ops::Range;

use hdf5_reader::chunk_index::ChunkEntry;
use hdf5_reader::error::{Error as H5Error, Result as H5Result};
use hdf5_reader::messages::HdfMessage;
use hdf5_reader::messages::filter_pipeline::FilterDescription;
use hdf5_reader::{Dataset, Datatype, FilterRegistry, Hdf5File};
use ndarray::ArrayD;

use super::chunks::Index;
use super::element::{self, Element};

/// A dataset whose chunks hold whole rows, read a block of whole chunks at a time.
pub(crate) struct WholeRows {
    /// The file (for its storage).
    file: Hdf5File,
    filters: Vec<FilterDescription>,
    registry: FilterRegistry,
    /// Whether the shuffle filter is the last one a chunk is decoded with (h5py's order:
    /// shuffle, the compression, fletcher32): then it is left out of the pipeline, and the
    /// bytes are unshuffled while they become values (`Raw::shuffled`).
    shuffle_last: bool,
    /// The dataset's rows, and a chunk's.
    rows: u64,
    chunk_rows: u64,
    /// A row's shape (the dataset's other axes) and its size in bytes.
    row_shape: Vec<usize>,
    row_bytes: usize,
    element_size: usize,
    /// A decoded chunk's size in bytes.
    chunk_bytes: usize,
    /// The stored chunks, by their number along the first axis.
    chunks: HashMap<u64, ChunkEntry>,
}

/// Whether `dataset`'s chunks hold whole rows: worth walking its index for [`WholeRows`].
pub(crate) fn fits(dataset: &Dataset) -> bool {
    let shape = dataset.shape();
    dataset.chunks().is_some_and(|chunk| {
        chunk.len() >= shape.len()
            && !shape.is_empty()
            && (1..shape.len()).all(|d| u64::from(chunk[d]) == shape[d])
    })
}

impl WholeRows {
    /// The fast path for `dataset` of `file`, whose chunk index is `index`, or `None` when
    /// its chunks do not hold whole rows.
    pub(crate) fn new(file: &Hdf5File, dataset: &Dataset, index: Index) -> Option<Self> {
        let shape = dataset.shape();
        let (&rows, rest) = shape.split_first()?;
        if !fits(dataset) || index.chunk.len() != shape.len() || rows == 0 {
            return None;
        }
        let chunk_rows = index.chunk[0];
        let element_size = dataset.raw_element_size().ok()?;
        let row_shape = rest
            .iter()
            .map(|&d| usize::try_from(d).ok())
            .collect::<Option<Vec<usize>>>()?;
        let row_bytes = row_shape
            .iter()
            .try_fold(element_size, |n, &d| n.checked_mul(d))?;
        let chunk_bytes = row_bytes.checked_mul(usize::try_from(chunk_rows).ok()?)?;
        if chunk_bytes == 0 || chunk_bytes > hdf5_reader::DEFAULT_MAX_CHUNK_BYTES {
            return None;
        }
        let header = file.get_or_parse_header(dataset.address()).ok()?;
        let filters = header
            .messages
            .iter()
            .find_map(|m| match m {
                HdfMessage::FilterPipeline(pipeline) => Some(pipeline.filters.clone()),
                _ => None,
            })
            .unwrap_or_default();
        let shuffle_last = filters
            .first()
            .is_some_and(|f| f.id == hdf5_reader::filters::FILTER_SHUFFLE);
        let chunks = index
            .stored
            .into_iter()
            .map(|(origin, entry)| (origin[0] / chunk_rows, entry))
            .collect();
        Some(WholeRows {
            file: file.clone(),
            filters,
            registry: element::filters(),
            shuffle_last,
            rows,
            chunk_rows,
            row_shape,
            row_bytes,
            element_size,
            chunk_bytes,
            chunks,
        })
    }

    /// `rows` (and `rest` of the other axes) of the dataset, of type `dtype`, as `T`; `None`
    /// when they are not whole chunks' rows (or `T` is not read from bytes): read them with
    /// `read_slice`. An error comes with the number of its chunk along the first axis.
    pub(crate) fn read<T: Element>(
        &self,
        dtype: &Datatype,
        rows: &Range<u64>,
        rest: &[Range<u64>],
    ) -> Option<Result<ArrayD<T>, (u64, H5Error)>> {
        let raw = T::raw(dtype)?;
        let c = self.chunk_rows;
        let whole = rest.len() == self.row_shape.len()
            && rest
                .iter()
                .zip(&self.row_shape)
                .all(|(r, &d)| r.start == 0 && r.end == d as u64);
        let on_grid = rows.start < rows.end
            && rows.end <= self.rows
            && rows.start % c == 0
            && (rows.end % c == 0 || rows.end == self.rows);
        if !whole || !on_grid {
            return None;
        }
        let (first, last) = (rows.start / c, rows.end.div_ceil(c));
        let entries = (first..last)
            .map(|k| self.chunks.get(&k))
            .collect::<Option<Vec<&ChunkEntry>>>()?;
        let count = usize::try_from(rows.end - rows.start).ok()?;
        let elements = count.checked_mul(self.row_bytes)? / self.element_size;
        let mut values = Vec::with_capacity(elements);
        for (k, entry) in (first..).zip(entries) {
            // The rows of this chunk in the block: all of them but at the dataset's end.
            let take = (rows.end.min((k + 1) * c) - k * c) as usize * self.row_bytes;
            // A chunk's mask bit 0 set: its shuffle filter was skipped when it was written.
            let shuffled = self.shuffle_last && entry.filter_mask & 1 == 0;
            let read = if shuffled {
                self.chunk(entry, entry.filter_mask | 1, |bytes| {
                    (raw.shuffled)(bytes, take / self.element_size, &mut values)
                })
            } else {
                self.chunk(entry, entry.filter_mask, |bytes| {
                    (raw.plain)(&bytes[..take], &mut values)
                })
            };
            if let Err(e) = read {
                return Some(Err((k, e)));
            }
        }
        let shape: Vec<usize> = std::iter::once(count)
            .chain(self.row_shape.iter().copied())
            .collect();
        Some(
            ArrayD::from_shape_vec(shape, values)
                .map_err(|e| (first, H5Error::InvalidData(e.to_string()))),
        )
    }

    /// Reads the chunk of `entry`, decodes it with the filters `mask` does not skip, and
    /// hands its bytes (of the whole chunk shape, checked) to `then`.
    fn chunk<R>(
        &self,
        entry: &ChunkEntry,
        mask: u32,
        then: impl FnOnce(&[u8]) -> R,
    ) -> H5Result<R> {
        let size = if entry.size > 0 {
            usize::try_from(entry.size)
                .map_err(|_| H5Error::InvalidData("a chunk larger than memory".into()))?
        } else {
            self.chunk_bytes
        };
        let raw = self.file.storage().read_range(entry.address, size)?;
        let decoded;
        let skipped = |i: usize| i < 32 && mask & (1 << i) != 0;
        let bytes: &[u8] = if (0..self.filters.len()).all(skipped) {
            &raw
        } else {
            decoded = hdf5_reader::filters::apply_pipeline_with_limit(
                &raw,
                &self.filters,
                mask,
                self.element_size,
                Some(&self.registry),
                Some(self.chunk_bytes + 1),
            )?;
            &decoded
        };
        // As `read_slice` checks it.
        if bytes.len() != self.chunk_bytes {
            return Err(H5Error::InvalidData(format!(
                "chunk at offsets {:?} decoded to {} bytes, expected {} bytes",
                entry.offsets,
                bytes.len(),
                self.chunk_bytes
            )));
        }
        Ok(then(bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hdf5_reader::{SliceInfo, SliceInfoElem};

    fn open(name: &str) -> Hdf5File {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/hdf5")
            .join(name);
        let options = hdf5_reader::OpenOptions::default().with_filter_registry(element::filters());
        Hdf5File::open_with_options(path, options).unwrap()
    }

    fn whole(file: &Hdf5File, dataset: &Dataset) -> Option<WholeRows> {
        let index = super::super::chunks::index(file, dataset).unwrap()?;
        WholeRows::new(file, dataset, index)
    }

    /// `rows` of `dataset`, all of its other axes, through `read_slice`.
    fn sliced<T: Element>(dataset: &Dataset, rows: &Range<u64>) -> ArrayD<T> {
        let mut selection = SliceInfo::all(dataset.ndim());
        selection.selections[0] = SliceInfoElem::Slice {
            start: rows.start,
            end: rows.end,
            step: 1,
        };
        T::read(dataset, &selection).unwrap()
    }

    #[test]
    fn blocks_of_whole_chunks_read_as_read_slice_reads_them_and_others_are_left_to_it() {
        let file = open("filters.h5");
        for name in [
            "/gzip",
            "/shuffle_gzip_fletcher32",
            "/shuffle_lzf",
            "/fletcher32",
        ] {
            let dataset = file.dataset(name).unwrap();
            let fast = whole(&file, &dataset).expect("chunks of whole rows");
            let full = [0..4, 0..5];
            // Chunks of 6 rows of 40: one chunk, several, the short last one, all.
            for rows in [0..6, 6..18, 36..40, 30..40, 0..40] {
                let got = fast.read::<f32>(dataset.dtype(), &rows, &full);
                let got = got.expect("on the grid").unwrap();
                assert_eq!(got, sliced::<f32>(&dataset, &rows), "{name} {rows:?}");
            }
            // Off the grid, not every column, past the end, empty: `read_slice`'s.
            for (rows, rest) in [
                (1..6, full.clone()),
                (0..7, full.clone()),
                (0..6, [0..4, 1..5]),
                (0..6, [0..3, 0..5]),
                (36..42, full.clone()),
                (6..6, full.clone()),
            ] {
                let got = fast.read::<f32>(dataset.dtype(), &rows, &rest);
                assert!(got.is_none(), "{name} {rows:?} {rest:?}");
            }
            // Strings are not read from bytes.
            assert!(
                fast.read::<String>(dataset.dtype(), &(0..6), &full)
                    .is_none()
            );
        }
        let dataset = file.dataset("/shuffle_int16").unwrap();
        let fast = whole(&file, &dataset).unwrap();
        for rows in [0..9, 27..40, 0..40] {
            let got = fast
                .read::<i16>(dataset.dtype(), &rows, std::slice::from_ref(&(0..7)))
                .unwrap();
            assert_eq!(got.unwrap(), sliced::<i16>(&dataset, &rows));
        }
        // Chunks that split rows (types.h5's (23, 3) in chunks of (5, 2)), contiguous data:
        // no fast path.
        let types = open("types.h5");
        for name in ["/chunked/float32", "/contiguous/float32"] {
            let dataset = types.dataset(name).unwrap();
            let index = super::super::chunks::index(&types, &dataset).unwrap();
            assert!(
                index
                    .and_then(|i| WholeRows::new(&types, &dataset, i))
                    .is_none()
            );
        }
        // A chunk the file does not store (types.h5's /partial, (20, 4) in chunks of 5 rows,
        // rows 5..10 and 15..20 never written): `read_slice` reads it (the fill value).
        let dataset = types.dataset("/partial").unwrap();
        let fast = whole(&types, &dataset).unwrap();
        let got = fast
            .read::<f32>(dataset.dtype(), &(0..5), std::slice::from_ref(&(0..4)))
            .unwrap();
        assert_eq!(got.unwrap(), sliced::<f32>(&dataset, &(0..5)));
        assert!(
            fast.read::<f32>(dataset.dtype(), &(0..10), std::slice::from_ref(&(0..4)))
                .is_none()
        );
    }
}
