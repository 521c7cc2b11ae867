//! Blocks of whole rows of a sharded array, read inner chunk by inner chunk:
//! [`decode`](super::decode)'s fast path.
//!
//! zarrs reads part of a shard through its partial decoders, which move each inner chunk's
//! bytes four times after they are read (the encoded bytes gathered from the shard's read,
//! the decoded bytes joined, copied into a zeroed block, then turned into values): on W13
//! (slices of 64 rows, each one inner chunk of D8's shards), 9.8% of a core in `memmove`,
//! 3.3% in `memset` and 2% in the kernel clearing pages, beside 64% in zstd itself
//! (`BENCHMARKS.md`). When a sharded array's inner chunks hold whole rows (an inner chunk
//! spans every axis but the first, and so does a shard) and a block takes every column, each
//! inner chunk's part of the block is one run of bytes, one after the other: each inner
//! chunk is read on its own (one positioned read of the shard kept open, or a ranged GET),
//! decoded by the shard's inner codecs (zarrs' codec chain), and its rows copied into the
//! block, whose memory is asked of the allocator zeroed (fresh pages: no `memset`). When
//! the inner codecs are `bytes` in the machine's byte order then `zstd` (zarr-python's
//! default with a zstd compressor), an inner chunk the block takes whole is decompressed
//! by the `zstd` crate straight into the block: one copy of the bytes, by the decoder.
//!
//! The shard's index is read once per shard and epoch ([`Ranged::index`]), then decoded and
//! checked for each block as zarrs does it (its own codec chain: `bytes`, then most often
//! `crc32c`; a few dozen bytes). An inner chunk
//! the index marks empty, or a shard the listing does not have, is the fill value, as in
//! zarrs. Anything else goes through zarrs: a block that does not take every column, inner
//! chunks or shards that split a row, `bool` elements (whose bytes must be checked), and
//! arrays with codecs beside the sharding codec.

use std::borrow::Cow;
use std::cell::RefCell;
use std::num::NonZeroU64;
use std::ops::Range;

use ndarray::ArrayD;
use zarrs::array::codec::{
    ArrayToBytesCodecTraits, CodecOptions, ShardingCodecConfiguration, ShardingIndexLocation,
};
use zarrs::array::{Array, ArrayMetadata, ChunkRepresentation, CodecChain, DataType};
use zarrs::metadata::v3::MetadataV3;

use super::element::Element;
use super::store::Ranged;

/// A sharded array whose shards and inner chunks hold whole rows.
pub(crate) struct WholeRows {
    /// Rows of a shard and of an inner chunk.
    shard_rows: u64,
    inner_rows: u64,
    /// The array's rows, and a row's shape (the array's other axes) and size in bytes.
    rows: u64,
    row_shape: Vec<usize>,
    row_bytes: usize,
    /// An inner chunk as the inner codecs decode it, and those codecs.
    inner: ChunkRepresentation,
    inner_codecs: CodecChain,
    /// The shard index as its codecs decode it, those codecs, its encoded size and where
    /// it is.
    index: ChunkRepresentation,
    index_codecs: CodecChain,
    index_bytes: u64,
    index_at_end: bool,
    /// Whether the inner codecs are `bytes` in the machine's byte order then `zstd`.
    zstd_only: bool,
    /// One element of the fill value, as bytes in the machine's order.
    fill: Vec<u8>,
}

impl std::fmt::Debug for WholeRows {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WholeRows")
            .field("shard_rows", &self.shard_rows)
            .field("inner_rows", &self.inner_rows)
            .field("zstd_only", &self.zstd_only)
            .finish_non_exhaustive()
    }
}

/// Whether `codecs` are `bytes` (in the machine's order, or for single bytes) then `zstd`.
fn bytes_then_zstd(codecs: &[MetadataV3], data_type: &DataType) -> bool {
    let [bytes, zstd] = codecs else {
        return false;
    };
    if bytes.name() != "bytes" || zstd.name() != "zstd" {
        return false;
    }
    let endian = bytes
        .to_configuration::<serde_json::Value>()
        .ok()
        .and_then(|c| c.get("endian").and_then(|e| e.as_str().map(str::to_owned)));
    let native = if cfg!(target_endian = "little") {
        "little"
    } else {
        "big"
    };
    match endian.as_deref() {
        Some(order) => order == native,
        None => matches!(data_type.size(), zarrs::array::DataTypeSize::Fixed(1)),
    }
}

impl WholeRows {
    /// The layout of `array` when it is sharded (the sharding codec alone, on a regular
    /// grid) and its shards and inner chunks span every axis but the first; `None` when it
    /// is not, or when zarrs cannot make its codecs (then zarrs' own path says why).
    pub(crate) fn new<S: ?Sized>(array: &Array<S>) -> Option<WholeRows> {
        let ArrayMetadata::V3(metadata) = array.metadata() else {
            return None;
        };
        let [sharding] = metadata.codecs.as_slice() else {
            return None;
        };
        if sharding.name() != "sharding_indexed"
            || metadata.chunk_grid.name() != "regular"
            || !metadata.storage_transformers.is_empty()
        {
            return None;
        }
        let ShardingCodecConfiguration::V1(config) = sharding.to_configuration().ok()? else {
            return None;
        };
        let shape = array.shape();
        let shard = array.chunk_shape(&vec![0; shape.len()]).ok()?;
        let inner = &config.chunk_shape;
        let whole = |chunk: &[NonZeroU64]| {
            chunk.len() == shape.len()
                && chunk[1..]
                    .iter()
                    .zip(&shape[1..])
                    .all(|(c, &n)| c.get() == n)
        };
        if shape.is_empty() || !whole(&shard) || !whole(inner) {
            return None;
        }
        let shard_rows = shard[0].get();
        let inner_rows = inner[0].get();
        if shard_rows % inner_rows != 0 {
            return None;
        }
        let zarrs::array::DataTypeSize::Fixed(element) = array.data_type().size() else {
            return None;
        };
        let row_shape: Vec<usize> = shape[1..]
            .iter()
            .map(|&n| usize::try_from(n).ok())
            .collect::<Option<_>>()?;
        let row_bytes = row_shape.iter().product::<usize>() * element;
        let data_type = array.data_type().clone();
        let fill_value = array.fill_value().clone();
        let inner_repr =
            ChunkRepresentation::new(inner.to_vec(), data_type.clone(), fill_value.clone()).ok()?;
        let inner_codecs = CodecChain::from_metadata(&config.codecs).ok()?;
        // The index: (offset, length) of each inner chunk, `uint64`, `u64::MAX` when empty.
        let index_shape = std::iter::once(NonZeroU64::new(shard_rows / inner_rows)?)
            .chain(inner[1..].iter().map(|_| NonZeroU64::MIN))
            .chain(NonZeroU64::new(2))
            .collect();
        let index = ChunkRepresentation::new(index_shape, DataType::UInt64, u64::MAX).ok()?;
        let index_codecs = CodecChain::from_metadata(&config.index_codecs).ok()?;
        let index_bytes = match index_codecs.encoded_representation(&index).ok()? {
            zarrs::array::BytesRepresentation::FixedSize(n) => n,
            _ => return None,
        };
        Some(WholeRows {
            shard_rows,
            inner_rows,
            rows: shape[0],
            row_shape,
            row_bytes,
            zstd_only: bytes_then_zstd(&config.codecs, &data_type),
            inner: inner_repr,
            inner_codecs,
            index,
            index_codecs,
            index_bytes,
            index_at_end: config.index_location == ShardingIndexLocation::End,
            fill: fill_value.as_ne_bytes().to_vec(),
        })
    }

    /// The elements of `ranges` of `array`: `None` when they are not whole rows, or `T`'s
    /// bytes must be checked (zarrs reads them); else the block, or an error naming the
    /// shard and the inner chunk.
    pub(crate) fn read<T: Element>(
        &self,
        array: &Array<impl ?Sized>,
        ranged: &Ranged,
        ranges: &[Range<u64>],
    ) -> Option<anyhow::Result<ArrayD<T>>> {
        let (rows, rest) = ranges.split_first()?;
        let whole = rest.len() == self.row_shape.len()
            && rest
                .iter()
                .zip(&self.row_shape)
                .all(|(r, &n)| r.start == 0 && r.end == n as u64);
        if !whole || rows.end > self.rows || rows.start > rows.end {
            return None;
        }
        let n = usize::try_from(rows.end - rows.start).ok()?;
        let len = n.checked_mul(self.row_shape.iter().product::<usize>())?;
        let mut values = T::zeroed(len)?;
        let mut shape = vec![n];
        shape.extend(&self.row_shape);
        let out = T::as_bytes_mut(&mut values);
        Some(
            self.fill_block(array, ranged, rows, out)
                .and_then(|()| ArrayD::from_shape_vec(shape, values).map_err(anyhow::Error::from)),
        )
    }

    /// Writes rows `rows` into `out`, shard by shard.
    fn fill_block(
        &self,
        array: &Array<impl ?Sized>,
        ranged: &Ranged,
        rows: &Range<u64>,
        out: &mut [u8],
    ) -> anyhow::Result<()> {
        let mut at = rows.start;
        while at < rows.end {
            let shard = at / self.shard_rows;
            let end = rows.end.min((shard + 1) * self.shard_rows);
            let from = self.offset(at - rows.start)?;
            let to = self.offset(end - rows.start)?;
            self.read_shard(array, ranged, shard, at..end, &mut out[from..to])?;
            at = end;
        }
        Ok(())
    }

    /// Bytes of `rows` rows.
    fn offset(&self, rows: u64) -> anyhow::Result<usize> {
        usize::try_from(rows)
            .ok()
            .and_then(|r| r.checked_mul(self.row_bytes))
            .ok_or_else(|| anyhow::anyhow!("{rows} rows do not fit in memory"))
    }

    /// Writes rows `rows` (all in shard `shard`) into `out`.
    fn read_shard(
        &self,
        array: &Array<impl ?Sized>,
        ranged: &Ranged,
        shard: u64,
        rows: Range<u64>,
        out: &mut [u8],
    ) -> anyhow::Result<()> {
        let mut indices = vec![0; self.row_shape.len() + 1];
        indices[0] = shard;
        let key = array.chunk_key(&indices);
        let what = |e: anyhow::Error| e.context(format!("chunk `{key}`"));
        let Some(len) = ranged.listed.get(&key).copied() else {
            // Not in the store: the fill value.
            self.fill_rows(out);
            return Ok(());
        };
        let index = self.shard_index(ranged, &key, len).map_err(what)?;
        let origin = shard * self.shard_rows;
        // The inner chunks wanted: (inner chunk, its rows wanted, its bytes in the shard).
        let first = (rows.start - origin) / self.inner_rows;
        let last = (rows.end - origin).div_ceil(self.inner_rows);
        let mut wanted = Vec::new();
        for inner in first..last {
            let start = origin + inner * self.inner_rows;
            let take = rows.start.max(start)..rows.end.min(start + self.inner_rows);
            let i = usize::try_from(inner)?;
            let (offset, size) = (index[2 * i], index[2 * i + 1]);
            let bytes = if offset == u64::MAX && size == u64::MAX {
                None
            } else {
                let end = offset.checked_add(size).filter(|&end| end <= len);
                let end = end.ok_or_else(|| {
                    what(anyhow::anyhow!(
                        "inner chunk {inner}: bytes {offset}..+{size} are past the shard's end \
                         ({len} bytes): truncated?"
                    ))
                })?;
                Some(offset..end)
            };
            wanted.push((inner, take, bytes));
        }
        let reads: Vec<Range<u64>> = wanted.iter().filter_map(|w| w.2.clone()).collect();
        let mut read = ranged
            .read(&key, &reads, len)
            .map_err(|e| what(e.context("reading it")))?
            .into_iter();
        for (inner, take, bytes) in wanted {
            let from = self.offset(take.start - rows.start)?;
            let to = self.offset(take.end - rows.start)?;
            let into = &mut out[from..to];
            if bytes.is_none() {
                self.fill_rows(into);
                continue;
            }
            let Some(encoded) = read.next() else {
                anyhow::bail!("chunk `{key}`: inner chunk {inner}: not read");
            };
            let skip = self.offset(take.start - (origin + inner * self.inner_rows))?;
            self.decode(&encoded, skip, into)
                .map_err(|e| what(e.context(format!("inner chunk {inner}"))))?;
        }
        Ok(())
    }

    /// The shard index of `key` (`len` bytes): `(offset, length)` of each inner chunk.
    fn shard_index(
        &self,
        ranged: &Ranged,
        key: &zarrs::storage::StoreKey,
        len: u64,
    ) -> anyhow::Result<Vec<u64>> {
        let range = if self.index_at_end {
            let start = len.checked_sub(self.index_bytes).ok_or_else(|| {
                anyhow::anyhow!(
                    "{len} bytes, shorter than its index ({} bytes): truncated?",
                    self.index_bytes
                )
            })?;
            start..len
        } else {
            anyhow::ensure!(
                len >= self.index_bytes,
                "{len} bytes, shorter than its index ({} bytes): truncated?",
                self.index_bytes
            );
            0..self.index_bytes
        };
        let encoded = ranged.index(key, range, len)?;
        let decoded = self
            .index_codecs
            .decode(
                Cow::Borrowed(&encoded),
                &self.index,
                &CodecOptions::default(),
            )
            .and_then(|bytes| bytes.into_fixed())
            .map_err(|e| anyhow::anyhow!("its index: {e}"))?;
        Ok(decoded
            .chunks_exact(8)
            .map(|word| u64::from_ne_bytes(word.try_into().unwrap_or_default()))
            .collect())
    }

    /// Decodes an inner chunk from `encoded`, and writes its bytes from `skip` on into
    /// `out`.
    fn decode(&self, encoded: &[u8], skip: usize, out: &mut [u8]) -> anyhow::Result<()> {
        let whole = skip == 0 && out.len() as u64 == self.inner_rows * self.row_bytes as u64;
        if self.zstd_only && whole {
            let written = ZSTD.with(|cell| -> anyhow::Result<usize> {
                let mut cell = cell.borrow_mut();
                let decompressor = match cell.as_mut() {
                    Some(d) => d,
                    None => cell.insert(zstd::bulk::Decompressor::new()?),
                };
                Ok(decompressor.decompress_to_buffer(encoded, out)?)
            });
            let written = written.map_err(|e| e.context("zstd"))?;
            anyhow::ensure!(
                written == out.len(),
                "zstd: {written} bytes decoded, {} expected",
                out.len()
            );
            return Ok(());
        }
        let decoded = self
            .inner_codecs
            .decode(
                Cow::Borrowed(encoded),
                &self.inner,
                &CodecOptions::default(),
            )
            .and_then(|bytes| bytes.into_fixed())
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        let part = decoded
            .get(skip..skip + out.len())
            .ok_or_else(|| anyhow::anyhow!("{} bytes decoded, too few", decoded.len()))?;
        out.copy_from_slice(part);
        Ok(())
    }

    /// The fill value in every element of `out` (left as it is when it is zero: the block
    /// starts zeroed).
    fn fill_rows(&self, out: &mut [u8]) {
        if self.fill.iter().all(|&b| b == 0) {
            return;
        }
        for element in out.chunks_exact_mut(self.fill.len()) {
            element.copy_from_slice(&self.fill);
        }
    }
}

thread_local! {
    /// A decoding thread's zstd context, made once (zarrs makes one per chunk).
    static ZSTD: RefCell<Option<zstd::bulk::Decompressor<'static>>> = const { RefCell::new(None) };
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::Arc;

    use bytes::Bytes;
    use zarrs::storage::StoreKey;

    use super::*;
    use crate::format::zarr::store::Fetched;

    /// `array` of the conformance store `v3.zarr`, its metadata read.
    fn open(array: &str) -> Array<Fetched> {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/zarr/v3.zarr");
        let key = format!("{array}/zarr.json");
        let bytes = std::fs::read(root.join(&key)).unwrap();
        let store = Fetched(HashMap::from([(
            StoreKey::new(key).unwrap(),
            Bytes::from(bytes),
        )]));
        Array::open(Arc::new(store), &format!("/{array}")).unwrap()
    }

    #[test]
    fn sharded_arrays_with_inner_chunks_of_whole_rows_are_read_here() {
        let zstd = WholeRows::new(&open("codecs/sharded_zstd_rows")).unwrap();
        assert!(zstd.zstd_only);
        assert_eq!(
            (zstd.shard_rows, zstd.inner_rows, zstd.row_bytes),
            (12, 6, 80)
        );
        // Big-endian bytes, gzip and crc32c: through zarrs' codec chain.
        let gzip = WholeRows::new(&open("codecs/sharded_rows")).unwrap();
        assert!(!gzip.zstd_only);
        assert_eq!(gzip.fill, (-1.5f32).to_ne_bytes());
        // Inner chunks that split a row, and no shards: zarrs' own path.
        assert!(WholeRows::new(&open("codecs/sharded")).is_none());
        assert!(WholeRows::new(&open("codecs/zstd")).is_none());
    }
}
