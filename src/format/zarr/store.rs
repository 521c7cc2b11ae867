//! A store's objects as zarrs sees them, read through streamload's storage layer (async
//! reads, local or object storage, retried as every read is): [`Fetched`], chunks fetched
//! whole before a block is decoded, then served from memory to zarrs' synchronous decoding
//! on a blocking thread; [`Ranged`], for a sharded array, the byte ranges zarrs asks of a
//! shard (its index, then the inner chunks a block touches): in a local store by positioned
//! reads on the decoding thread itself, of a file kept open per shard for the epoch
//! ([`OpenShards`], as `zarrs_filesystem` reads on the calling thread, but without opening
//! the file for each read); in object storage by ranged reads run by the runtime while the
//! decoding thread waits.
//!
//! zarrs reads a chunk that is not in the store as the fill value (the spec's missing chunk);
//! here a key is "in the store" when the store's listing, taken when the store is opened,
//! has it. A chunk listed but not readable is an error, never a fill value.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;
use zarrs::storage::byte_range::{ByteRange, ByteRangeIterator};
use zarrs::storage::{
    MaybeBytes, MaybeBytesIterator, ReadableStorageTraits, StorageError, StoreKey,
};

use crate::storage::{self, Location};

/// The byte ranges `ranges` asks of an object of `len` bytes; an error for one past its end.
fn resolve(
    key: &StoreKey,
    len: u64,
    ranges: impl Iterator<Item = ByteRange>,
) -> Result<Vec<Range<u64>>, StorageError> {
    ranges
        .map(|range| {
            // Computed here, not by `ByteRange::start`, which underflows on a suffix longer
            // than the object (a truncated shard shorter than its index).
            let (start, end) = match range {
                ByteRange::FromStart(offset, length) => (
                    offset,
                    length.map_or(len, |length| offset.saturating_add(length)),
                ),
                ByteRange::Suffix(length) => (len.checked_sub(length).unwrap_or(u64::MAX), len),
            };
            if start > end || end > len {
                return Err(StorageError::Other(format!(
                    "`{key}`: bytes {start}..{end} are past its end ({len} bytes): truncated?"
                )));
            }
            Ok(start..end)
        })
        .collect()
}

/// Objects fetched ahead of a read, by their key in the store.
#[derive(Debug, Default)]
pub(crate) struct Fetched(pub(crate) HashMap<StoreKey, Bytes>);

impl ReadableStorageTraits for Fetched {
    fn get(&self, key: &StoreKey) -> Result<MaybeBytes, StorageError> {
        Ok(self.0.get(key).cloned())
    }

    fn get_partial_many<'a>(
        &'a self,
        key: &StoreKey,
        byte_ranges: ByteRangeIterator<'a>,
    ) -> Result<MaybeBytesIterator<'a>, StorageError> {
        let Some(data) = self.0.get(key).cloned() else {
            return Ok(None);
        };
        let ranges = resolve(key, data.len() as u64, byte_ranges)?;
        Ok(Some(Box::new(ranges.into_iter().map(move |r| {
            Ok(data.slice(r.start as usize..r.end as usize))
        }))))
    }

    fn size_key(&self, key: &StoreKey) -> Result<Option<u64>, StorageError> {
        Ok(self.0.get(key).map(|b| b.len() as u64))
    }

    fn supports_get_partial(&self) -> bool {
        true
    }
}

/// A store's listed objects read by ranges when zarrs asks (a sharded array's shards: the
/// index, then only the inner chunks wanted), on the calling (blocking) thread through
/// `handle`. The first read that fails is kept: the error names it, and no chunk is read
/// again to find which failed.
#[derive(Debug)]
pub(crate) struct Ranged {
    pub(crate) root: Location,
    pub(crate) listed: Arc<HashMap<StoreKey, u64>>,
    pub(crate) handle: tokio::runtime::Handle,
    pub(crate) failed: Mutex<Option<String>>,
    /// The shards' indexes read so far (kept with the open store for the epoch).
    pub(crate) indexes: Arc<Indexes>,
    /// A local store's shard files opened so far (kept with the open store for the epoch).
    pub(crate) files: Arc<OpenShards>,
}

/// A local store's shard files, opened the first time a block reads one and kept for the
/// epoch (each later read of the shard is one positioned read: no `open`, `fstat` and
/// `close` per read): at most [`OpenShards::MAX_OPEN`] of them, past which a shard is opened
/// for its read and closed after it.
#[derive(Debug, Default)]
pub(crate) struct OpenShards(Mutex<HashMap<StoreKey, Arc<std::fs::File>>>);

impl OpenShards {
    /// File descriptors kept open per array.
    const MAX_OPEN: usize = 256;

    /// The shard `key`, at `path`, opened.
    fn get(&self, key: &StoreKey, path: &std::path::Path) -> std::io::Result<Arc<std::fs::File>> {
        if let Some(file) = self
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(key)
        {
            return Ok(Arc::clone(file));
        }
        // Opened outside the lock; two first reads racing open it twice, one is kept.
        let file = Arc::new(std::fs::File::open(path)?);
        let mut kept = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if kept.len() < Self::MAX_OPEN {
            kept.entry(key.clone()).or_insert_with(|| Arc::clone(&file));
        }
        Ok(file)
    }
}

/// Shard indexes (the suffix zarrs reads first of each shard), by shard, kept for an epoch
/// so that each block reading an inner chunk of a shard does not read its index again: at
/// most [`Indexes::MAX_BYTES`] of them.
#[derive(Debug, Default)]
pub(crate) struct Indexes(Mutex<(HashMap<StoreKey, Bytes>, usize)>);

impl Indexes {
    const MAX_BYTES: usize = 64 << 20;

    fn get(&self, key: &StoreKey, range: &Range<u64>, len: u64) -> Option<Bytes> {
        let kept = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let index = kept.0.get(key)?;
        // The same suffix of the object as listed.
        (range.end == len && index.len() as u64 == range.end - range.start).then(|| index.clone())
    }

    fn keep(&self, key: &StoreKey, index: &Bytes) {
        let mut kept = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if kept.1 + index.len() <= Self::MAX_BYTES && !kept.0.contains_key(key) {
            kept.1 += index.len();
            kept.0.insert(key.clone(), index.clone());
        }
    }
}

impl Ranged {
    /// The first read that failed.
    pub(crate) fn failure(&self) -> Option<String> {
        self.failed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The encoded index of the shard `key` (of `len` bytes, as listed), at `range`: kept
    /// from a read earlier in the epoch, or read (and kept when it is the shard's suffix).
    pub(crate) fn index(
        &self,
        key: &StoreKey,
        range: Range<u64>,
        len: u64,
    ) -> anyhow::Result<Bytes> {
        if let Some(index) = self.indexes.get(key, &range, len) {
            return Ok(index);
        }
        let read = self.read(key, std::slice::from_ref(&range), len)?;
        let index = read.into_iter().next().unwrap_or_default();
        if range.end == len {
            self.indexes.keep(key, &index);
        }
        Ok(index)
    }

    /// The bytes of `ranges` of the object `key` (of `len` bytes, as listed), each checked
    /// to be as long as asked.
    pub(crate) fn read(
        &self,
        key: &StoreKey,
        ranges: &[Range<u64>],
        len: u64,
    ) -> anyhow::Result<Vec<Bytes>> {
        // Most of the object wanted (a whole shard): one read of all of it.
        let wanted: u64 = ranges.iter().map(|r| r.end - r.start).sum();
        let location = child(&self.root, key.as_str())?;
        let parts = if let Location::Local(path) = &location {
            let file = self.files.get(key, path)?;
            let read = |range: Range<u64>| {
                let n = usize::try_from(range.end - range.start)?;
                anyhow::Ok(storage::local::read_at(&file, range.start, n)?.0)
            };
            if wanted >= len / 2 {
                // A short read (the file shrank since it was listed) gives short parts,
                // refused below.
                let all = read(0..len)?;
                let cut = |at: u64| usize::try_from(at).map_or(all.len(), |at| at.min(all.len()));
                ranges
                    .iter()
                    .map(|r| all.slice(cut(r.start)..cut(r.end)))
                    .collect()
            } else {
                ranges
                    .iter()
                    .map(|r| read(r.clone()))
                    .collect::<Result<_, _>>()?
            }
        } else if wanted >= len / 2 {
            let all = self
                .handle
                .block_on(storage::read_range(location, 0..len))?;
            anyhow::ensure!(
                all.len() as u64 == len,
                "{} bytes, {len} when listed: it changed",
                all.len()
            );
            ranges
                .iter()
                .map(|r| all.slice(r.start as usize..r.end as usize))
                .collect()
        } else {
            let reads = ranges
                .iter()
                .map(|r| storage::read_range(location.clone(), r.clone()));
            self.handle.block_on(futures::future::try_join_all(reads))?
        };
        let short = ranges
            .iter()
            .zip(&parts)
            .find(|(r, part)| part.len() as u64 != r.end - r.start);
        if let Some((r, part)) = short {
            anyhow::bail!(
                "bytes {r:?}: {} read: it is shorter than listed",
                part.len()
            );
        }
        Ok(parts)
    }
}

impl ReadableStorageTraits for Ranged {
    fn get_partial_many<'a>(
        &'a self,
        key: &StoreKey,
        byte_ranges: ByteRangeIterator<'a>,
    ) -> Result<MaybeBytesIterator<'a>, StorageError> {
        let Some(&len) = self.listed.get(key) else {
            return Ok(None);
        };
        let ranges = resolve(key, len, byte_ranges)?;
        // A shard's index (one suffix range) read before: from memory.
        let suffix = match ranges.as_slice() {
            [range] if range.end == len && range.start > 0 => Some(range.clone()),
            _ => None,
        };
        if let Some(index) = suffix.as_ref().and_then(|r| self.indexes.get(key, r, len)) {
            return Ok(Some(Box::new(std::iter::once(Ok(index)))));
        }
        let read = self.read(key, &ranges, len);
        if let (Some(_), Ok([index])) = (&suffix, read.as_deref()) {
            self.indexes.keep(key, index);
        }
        match read {
            Ok(parts) => Ok(Some(Box::new(parts.into_iter().map(Ok)))),
            Err(e) => {
                let message = format!("fetching chunk `{key}`: {e:#}");
                let mut failed = self.failed.lock().unwrap_or_else(PoisonError::into_inner);
                failed.get_or_insert_with(|| message.clone());
                Err(StorageError::Other(message))
            }
        }
    }

    fn size_key(&self, key: &StoreKey) -> Result<Option<u64>, StorageError> {
        Ok(self.listed.get(key).copied())
    }

    fn supports_get_partial(&self) -> bool {
        true
    }
}

/// The location of `key` (`/`-separated, relative) under `root`.
pub(crate) fn child(root: &Location, key: &str) -> anyhow::Result<Location> {
    Ok(match root {
        Location::Local(path) => {
            Location::Local(key.split('/').fold(path.clone(), |p, part| p.join(part)))
        }
        Location::Url(url) => {
            let text = format!("{}/{key}", url.as_str().trim_end_matches('/'));
            Location::Url(
                url::Url::parse(&text)
                    .map_err(|e| anyhow::anyhow!("{root}: no URL for `{key}`: {e}"))?,
            )
        }
    })
}

/// The bytes of the object `key` (of `size` bytes, as listed) under `root`.
pub(crate) async fn fetch(root: &Location, key: &str, size: u64) -> anyhow::Result<Bytes> {
    storage::read_range(child(root, key)?, 0..size).await
}

/// A Zarr v2 `.zarray` with a boolean fill value (`"fill_value": false`, as zarr-python
/// writes for `bool` arrays) with it as `0` or `1`: zarrs 0.22 parses v2 fill values as
/// numbers or strings only (and reads `0`/`1` as a bool's fill value). Anything else as is.
pub(crate) fn bool_fill_value(name: &str, bytes: Bytes) -> Bytes {
    if name != ".zarray" {
        return bytes;
    }
    let Ok(mut metadata) = serde_json::from_slice::<serde_json::Value>(&bytes) else {
        return bytes;
    };
    let Some(serde_json::Value::Bool(fill)) = metadata.get("fill_value") else {
        return bytes;
    };
    metadata["fill_value"] = serde_json::Value::from(u8::from(*fill));
    serde_json::to_vec(&metadata).map_or(bytes, Bytes::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `Ranged` over the local store `root` listing `key` at `len` bytes.
    fn local_store(
        root: &std::path::Path,
        key: &StoreKey,
        len: u64,
        handle: tokio::runtime::Handle,
    ) -> Ranged {
        Ranged {
            root: Location::Local(root.to_path_buf()),
            listed: Arc::new(HashMap::from([(key.clone(), len)])),
            handle,
            failed: Mutex::default(),
            indexes: Arc::default(),
            files: Arc::default(),
        }
    }

    fn read(
        ranged: &Ranged,
        key: &StoreKey,
        ranges: &[ByteRange],
    ) -> Result<Vec<Bytes>, StorageError> {
        let parts = ranged.get_partial_many(key, Box::new(ranges.iter().copied()))?;
        parts
            .ok_or_else(|| StorageError::Other("not listed".into()))?
            .collect()
    }

    #[test]
    fn local_shards_are_read_by_positioned_reads_of_a_file_kept_open() {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("c/0")).unwrap();
        let path = dir.path().join("c/0/0");
        let bytes: Vec<u8> = (0..100).collect();
        std::fs::write(&path, &bytes).unwrap();
        let key = StoreKey::new("c/0/0").unwrap();
        let ranged = local_store(dir.path(), &key, 100, runtime.handle().clone());

        // Inner chunks (a part of the shard), then its index (a suffix), then most of it.
        let parts = read(
            &ranged,
            &key,
            &[
                ByteRange::FromStart(10, Some(5)),
                ByteRange::FromStart(40, Some(3)),
            ],
        )
        .unwrap();
        assert_eq!(parts, [&bytes[10..15], &bytes[40..43]]);
        assert_eq!(
            read(&ranged, &key, &[ByteRange::Suffix(16)]).unwrap(),
            [&bytes[84..]]
        );
        assert_eq!(
            read(&ranged, &key, &[ByteRange::FromStart(0, Some(90))]).unwrap(),
            [&bytes[..90]]
        );
        // One file opened, kept for the reads after.
        assert_eq!(ranged.files.0.lock().unwrap().len(), 1);

        // Removed from its directory: still read through the file kept open.
        std::fs::rename(&path, dir.path().join("moved")).unwrap();
        assert_eq!(
            read(&ranged, &key, &[ByteRange::FromStart(50, Some(2))]).unwrap(),
            [&bytes[50..52]]
        );

        // A shard shorter than listed (truncated since): an error naming it, never short
        // bytes; a new epoch's files opened anew find it gone, naming it too.
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(dir.path().join("moved"))
            .unwrap();
        file.set_len(60).unwrap();
        for ranges in [
            vec![ByteRange::FromStart(0, Some(100))],
            vec![ByteRange::FromStart(55, Some(10))],
        ] {
            let err = read(&ranged, &key, &ranges).unwrap_err().to_string();
            assert!(
                err.contains("`c/0/0`") && err.contains("shorter than listed"),
                "{err}"
            );
        }
        let fresh = local_store(dir.path(), &key, 100, runtime.handle().clone());
        let err = read(&fresh, &key, &[ByteRange::FromStart(0, Some(4))])
            .unwrap_err()
            .to_string();
        assert!(err.contains("`c/0/0`"), "{err}");
        assert!(fresh.failure().is_some_and(|f| f.contains("`c/0/0`")));
    }
}
