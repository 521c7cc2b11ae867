//! A chunked dataset's chunk index, walked once when a file is opened: which chunks the
//! file does not store, and where the stored ones are (for [`whole`](super::whole)'s reads).
//!
//! HDF5 reads a chunk that was never written as the fill value, and so do h5py and
//! `hdf5-reader`. In a file written whole (h5py's `create_dataset(data=...)`) every chunk is
//! stored, and a missing one means a damaged chunk index (a B-tree v1 node, which h5py's
//! default file format does not checksum): read as zeros, it would be silent wrong data.
//! So the chunk index is walked once when a file is opened, and a read that touches a
//! missing chunk is an error (unless [`Hdf5Dataset::fill_missing_chunks`] says to read
//! it as h5py does).
//!
//! [`Hdf5Dataset::fill_missing_chunks`]: super::Hdf5Dataset::fill_missing_chunks

use std::collections::HashMap;

use hdf5_reader::btree_v1::BTreeV1Key;
use hdf5_reader::chunk_index::ChunkEntry;
use hdf5_reader::error::Result;
use hdf5_reader::io::Cursor;
use hdf5_reader::messages::HdfMessage;
use hdf5_reader::messages::layout::{ChunkIndexing, DataLayout};
use hdf5_reader::{Dataset, Hdf5File};

/// The chunks of a chunked dataset, as its index lists them.
pub(crate) struct Index {
    /// The chunk's shape (one extent per axis of the dataset).
    pub(crate) chunk: Vec<u64>,
    /// The stored chunks on the chunk grid inside the dataset, by origin (element
    /// coordinates of their first element, one per axis).
    pub(crate) stored: HashMap<Vec<u64>, ChunkEntry>,
    /// Whether the index cannot miss a chunk (single-chunk, implicit; an empty dataset),
    /// whatever `stored` holds.
    complete: bool,
}

impl Index {
    /// The origins of the chunks the index does not list, in row-major order of the grid,
    /// with the chunk's shape.
    pub(crate) fn missing(&self, shape: &[u64]) -> (Vec<Vec<u64>>, Vec<u64>) {
        let chunk = self.chunk.clone();
        let ndim = shape.len();
        if self.complete || chunk.len() != ndim {
            return (Vec::new(), chunk);
        }
        let per_axis: Vec<u64> = (0..ndim).map(|d| shape[d].div_ceil(chunk[d])).collect();
        let expected = per_axis
            .iter()
            .try_fold(1u64, |n, &k| n.checked_mul(k))
            .unwrap_or(u64::MAX);
        if self.stored.len() as u64 >= expected {
            return (Vec::new(), chunk);
        }
        let mut missing = Vec::new();
        let mut index = vec![0u64; ndim];
        'grid: loop {
            let origin: Vec<u64> = (0..ndim).map(|d| index[d] * chunk[d]).collect();
            if !self.stored.contains_key(&origin) {
                missing.push(origin);
            }
            for d in (0..ndim).rev() {
                index[d] += 1;
                if index[d] < per_axis[d] {
                    continue 'grid;
                }
                index[d] = 0;
            }
            break;
        }
        (missing, chunk)
    }
}

/// The chunk index of `dataset`, or `None` for a dataset that is not chunked.
pub(crate) fn index(file: &Hdf5File, dataset: &Dataset) -> Result<Option<Index>> {
    let header = file.get_or_parse_header(dataset.address())?;
    let layout = header.messages.iter().find_map(|m| match m {
        HdfMessage::DataLayout(message) => Some(&message.layout),
        _ => None,
    });
    let Some(DataLayout::Chunked {
        address,
        dims,
        chunk_indexing,
        ..
    }) = layout
    else {
        return Ok(None);
    };
    let shape = dataset.shape();
    let ndim = shape.len();
    let chunk: Vec<u64> = dims
        .iter()
        .take(ndim)
        .map(|&d| u64::from(d).max(1))
        .collect();
    let complete = |chunk| {
        Ok(Some(Index {
            chunk,
            stored: HashMap::new(),
            complete: true,
        }))
    };
    if chunk.len() != ndim || shape.contains(&0) {
        return complete(chunk);
    }
    let superblock = file.superblock();
    let (offset_size, length_size) = (superblock.offset_size, superblock.length_size);
    let storage = file.storage();
    let mut single = false;
    let stored: Vec<ChunkEntry> = if Cursor::is_undefined_offset(*address, offset_size) {
        Vec::new()
    } else {
        match chunk_indexing {
            None => hdf5_reader::btree_v1::collect_btree_v1_leaves_storage(
                storage,
                *address,
                offset_size,
                length_size,
                Some(ndim as u32),
                dims,
                None,
            )?
            .into_iter()
            .filter_map(|(key, chunk_address)| match key {
                BTreeV1Key::RawData {
                    chunk_size,
                    filter_mask,
                    offsets,
                } => Some(ChunkEntry {
                    address: chunk_address,
                    size: u64::from(chunk_size),
                    filter_mask,
                    offsets,
                }),
                BTreeV1Key::Group { .. } => None,
            })
            .collect(),
            Some(ChunkIndexing::SingleChunk {
                filtered_size,
                filters,
            }) => {
                single = true;
                vec![hdf5_reader::chunk_index::single_chunk_entry(
                    *address,
                    *filtered_size,
                    *filters,
                    ndim,
                )]
            }
            // Every chunk at its place, none listed: read through `read_slice`.
            Some(ChunkIndexing::Implicit) => return complete(chunk),
            Some(ChunkIndexing::BTreeV2) => {
                hdf5_reader::chunk_index::collect_v2_chunk_entries_storage(
                    storage,
                    *address,
                    offset_size,
                    length_size,
                    ndim as u32,
                    dims,
                    None,
                )?
            }
            Some(ChunkIndexing::FixedArray { .. }) => {
                hdf5_reader::fixed_array::collect_fixed_array_chunk_entries_storage(
                    storage,
                    *address,
                    offset_size,
                    length_size,
                    shape,
                    dims,
                    None,
                )?
            }
            Some(ChunkIndexing::ExtensibleArray { .. }) => {
                hdf5_reader::extensible_array::collect_extensible_array_chunk_entries_storage(
                    storage,
                    *address,
                    offset_size,
                    length_size,
                    shape,
                    dataset.max_dims(),
                    dims,
                    None,
                )?
            }
        }
    };
    // The stored origins on the chunk grid, inside the dataset.
    let on_grid = |origin: &[u64]| {
        origin.len() >= ndim && (0..ndim).all(|d| origin[d] % chunk[d] == 0 && origin[d] < shape[d])
    };
    let stored = stored
        .into_iter()
        .filter(|e| on_grid(&e.offsets))
        .map(|mut e| {
            e.offsets.truncate(ndim);
            (e.offsets.clone(), e)
        })
        .collect();
    Ok(Some(Index {
        chunk,
        stored,
        complete: single,
    }))
}
