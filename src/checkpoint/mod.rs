//! Mid-epoch checkpoints and exact resume: [`Checkpoint`], taken with
//! [`Epoch::checkpoint`](crate::Epoch::checkpoint) and resumed with
//! [`Dataset::iter_from`](crate::Dataset::iter_from).
//!
//! # What is saved
//!
//! A checkpoint describes what the consumer has received, as positions, never as element
//! contents: each stage saves its [`State`](state::State) as of the last element it yielded
//! (a source its byte offset or index, a shuffle its random generator's position and the
//! *positions* of the elements in its buffer, a batch the mark it started its batch from),
//! with the states of its inputs. What stages read or computed ahead of the consumer (prefetch
//! buffers, calls in flight, partial batches) is not saved: it is made again after the
//! restore, never lost and never delivered twice.
//!
//! # How: provenance, marks and replay
//!
//! Two tools keep the state small and the cost nil when no checkpoint is taken:
//!
//! - **Marks** (Flink's barrier idea, applied where the state is small): a stage that holds
//!   elements in order (a batch being filled, a prefetch queue, a parallel map's calls in
//!   flight) keeps the state of its input from before the oldest element it has not passed on
//!   (one per batch or group, not per element), and after a restore rebuilds its input from
//!   that mark and skips what it had already passed on.
//! - **Provenance and replay**, where elements leave their order (a shuffle buffer): the
//!   stage keeps, beside each element, where it came from (a [`Prov`](state::Prov): the
//!   source's record offset or index, plus a word per interleave or random map on the way;
//!   for a batch, its members' positions). Its state lists those positions (a few bytes each
//!   once encoded); a restore builds the stage's input again in *replay* mode, in which the
//!   sources read exactly those records (positioned reads) and every stage on the way does
//!   its work on them again, and refills the buffer.
//!
//! # Files
//!
//! A file reader (TFRecord, text lines, CSV, fixed-length records) saves the byte offset
//! after the last element it yielded and that element's index in the file, then the file's
//! size and version: its modification time (a local file) or its ETag, or without one its
//! Last-Modified date (an object). A restored reader opens the file *at* the offset:
//! positioned reads from there (local), ranged GETs from there (object storage). A restore
//! whose file changed (size or version differ) is refused with an
//! [`Error::Checkpoint`](crate::Error::Checkpoint) naming the file. Records held by position
//! (a shuffle buffer's, a batch's members over a shuffle, what a prefetch or a parallel map
//! held over one) are read again by scanning the file from the first wanted offset to the
//! last (a shuffle buffer's lie close together); each position carries, beside the record's
//! offset, a 14-bit digest of the identity of the file it was read from, and a file whose
//! identity no longer has that digest is refused the same way (a changed file goes
//! unnoticed there with a chance of 1 in 16,383; the reader restored at its offset compares
//! the whole identity). Damage that a [`resync`](crate::format::TFRecordDataset::resync)
//! skipped is skipped again by the scan, so records past it are found where they were. A
//! reader that has ended (at the end of its file, or at an error that ends the file: damage
//! read without `resync`, a failed read) saves that it ended, and a restore does not open
//! the file again: read again from before the error, it would give the error a second time.
//! A state saved before its file was open (a mark taken before a reader's first element, an
//! interleave between two files) names no identity: the checkpoint also lists the files its
//! epoch opened last ([`opened`]: up to 128, by a hash of the name, size and version), and a
//! resumed epoch checks every file it opens that is in the list, however it came to open it.
//! `list_files` saves its listing's size and a hash of its names, and refuses a listing that
//! changed.
//!
//! # Refusals
//!
//! A resume is never silently wrong: what cannot be resumed exactly is refused, with an
//! [`Error::Checkpoint`](crate::Error::Checkpoint).
//! - [`Checkpoint::from_bytes`] refuses damaged bytes (a CRC32C covers them), and
//!   [`Dataset::iter_from`](crate::Dataset::iter_from) a checkpoint of another recipe: the
//!   fingerprint hashes every stage's parameters that decide its elements or their order
//!   (sizes, counts, seeds, cycle and block lengths, a reader's compression, record layout and
//!   damaged-data policy). Parameters that only change the speed (parallelism, buffer and
//!   prefetch sizes, memory maps) are not in it: a job may resume with other values. Functions
//!   (a `map`'s, a `filter`'s), padding values and shapes, and the contents of `from_vec` and
//!   the names of a reader's files (their number is) are not hashed: resume with the same code
//!   and data (files may move: their identity is checked where they are read).
//! - A file that changed since the checkpoint is refused as an error element, before any
//!   element read from it reaches the consumer, whatever stands between the reader and the
//!   consumer (`prefetch`, `map_parallel`, a shuffle, a batch, interleaves). With one file
//!   changed among several, elements of the others that stages held at the checkpoint may
//!   come first. The refusal is never dropped: [`ignore_errors`](crate::Dataset::ignore_errors)
//!   and error budgets pass it on, and the epoch ends after it (a checkpoint of it is an error).
//!
//! Indexed TFRecord files ([`IndexedTFRecords`](crate::format::IndexedTFRecords)) save the
//! place in the epoch's order (one number) and the epoch: the order comes from (seed, epoch),
//! and a record's position is its number across the files, read again by its index entry.
//! They record each file's size and a digest of its version too, and refuse a resume over
//! a file that changed, naming it.
//!
//! A compressed file (GZIP, ZLIB) has no random access: a restored reader inflates it from
//! its start and drops what comes before the offset, so restoring costs reading and
//! inflating the file up to the offset again (about what that part cost the first time; a
//! reader near the end of a large compressed file reads nearly all of it), and so does
//! reading records of it again for a buffer. Offsets in a compressed file are offsets in
//! the decompressed stream.
//!
//! Randomness is keyed by the epoch: [`Dataset::iter`](crate::Dataset::iter) numbers the
//! epochs of a recipe, `repeat` numbers its repetitions, and a shuffle's order derives from
//! (seed, epoch), so a restored shuffle draws what the uninterrupted one would have.
//!
//! # Making a stage resumable (for contributors)
//!
//! This module is the checkpoint's data and its bytes; the machinery that saves and
//! restores streams is the engine's (`crate::engine`), and ARCHITECTURE.md's "How to add an
//! operation" is the page to follow. In short: an operation is one type implementing
//! `engine::Operation` (a source `engine::Source`); its fields are its parameters (hashed
//! into the fingerprint, unless wrapped in `Unkeyed`); its `open` builds its stream from a
//! `Start` (fresh, restored from the state its stream saved, or replaying positions), and
//! its stream's `Resumable::save`, in the same file, writes that state. In replay, yield
//! exactly the elements at the positions given, in order (an operation that drops or holds
//! back elements passes each one on: they are ones it passed on). `last_prov` must answer
//! whenever `ctx.provenance()` was set at build (a stage downstream holds elements by
//! position).
//!
//! A stage that holds elements (shuffle, batch and its family, window, group_by_window,
//! bucket_by_sequence_length, unique, prefetch, the parallel maps) reads its input through
//! `engine::Hold`: over a small input each held element is an index after a mark of the
//! input, otherwise its [`Prov`](state::Prov), and after a restore the hold hands the held
//! elements back first (`parallel_interleave` holds each reader's inner stream in one: what
//! its task read ahead and was not passed on). A file format's decoder saves
//! `[offset, record]` after the last element it yielded (never what it read ahead; once it
//! has ended, at the end of the file or at an error that ends it, the offset
//! `format::files::Start::ENDED`, so a resume does not read the file again) and gives each
//! element's start offset as its position; with `FileFormat::resumable` set, `format::files` opens,
//! restores, checks and replays its files. The tests in `tests/checkpoint.rs` check a stage
//! by comparing an interrupted and resumed epoch with an uninterrupted one at many points.
//!
//! # Format
//!
//! [`Checkpoint::to_bytes`]: the magic `SLCK`, the format version (a little-endian `u32`,
//! now [`Checkpoint::FORMAT_VERSION`]), the CRC32C of what follows (a little-endian `u32`;
//! [`Checkpoint::from_bytes`] refuses bytes that do not match it), then the checkpoint in
//! postcard's encoding (serde, varints):
//! the recipe's fingerprint (a hash of its stages, their order and their parameters), the
//! epoch number, the state tree, the seeds the epoch's unseeded random stages drew, and the
//! files it opened last. Versions 1 to 3 (before every stage held its elements through
//! `engine::Hold`) are refused with an error that says so.

pub(crate) mod opened;
pub(crate) mod state;

use serde::{Deserialize, Serialize};

use crate::error::Error;
pub(crate) use state::{ENDED, Prov, State};

const MAGIC: &[u8; 4] = b"SLCK";

/// The position of an epoch, to go on from after a restart: see
/// [`Epoch::checkpoint`](crate::Epoch::checkpoint).
///
/// What each operation saves: the guide's [table](crate::guide::checkpoints).
///
/// Serializable with serde, or as bytes with [`to_bytes`](Checkpoint::to_bytes) and
/// [`from_bytes`](Checkpoint::from_bytes). It names the recipe it belongs to:
/// [`Dataset::iter_from`](crate::Dataset::iter_from) refuses it for another one.
///
/// It names the files it read too, by size and modification time (local files) or ETag
/// (objects): a resume over a file that changed since is refused, naming the file (files
/// copied to another machine must keep their modification times: `cp -p`, `rsync -t`). File
/// readers resume at their byte offset, read from there (positioned reads, ranged GETs); a
/// compressed file has no random access and is inflated again from its start up to the
/// offset.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// The recipe's fingerprint.
    pub(crate) fingerprint: u64,
    /// Which epoch of the recipe (0 for its first [`iter`](crate::Dataset::iter)).
    pub(crate) epoch: u64,
    pub(crate) state: State,
    /// The seeds the epoch's unseeded random stages drew, by depth.
    pub(crate) seeds: Vec<(u64, u64)>,
    /// The files the epoch opened last, by what they were (see [`opened`]).
    pub(crate) files: Vec<(u64, u64, u64)>,
}

impl Checkpoint {
    /// The version of [`to_bytes`](Checkpoint::to_bytes)' format; other versions are refused.
    /// Version 3 changed how stages that hold elements (batch, shuffle, window, the
    /// groupings) save them, so versions 1 and 2 cannot be read as they were meant.
    pub const FORMAT_VERSION: u32 = 4;

    /// The epoch this checkpoint was taken in (0 for the recipe's first `iter()`).
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The checkpoint as bytes: `SLCK`, the format version, the CRC32C of the rest, then
    /// postcard's encoding.
    pub fn to_bytes(&self) -> Vec<u8> {
        // Serializing plain data into a vector cannot fail.
        let body = postcard::to_allocvec(self).unwrap_or_default();
        let mut out = Vec::with_capacity(12 + body.len());
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&Self::FORMAT_VERSION.to_le_bytes());
        out.extend_from_slice(&crc32c::crc32c(&body).to_le_bytes());
        out.extend(body);
        out
    }

    /// Reads [`to_bytes`](Checkpoint::to_bytes)' output.
    ///
    /// The bytes are checked before anything is restored from them: a checkpoint damaged in
    /// storage or in transit (any changed bit, a cut or a byte more) is refused here, never
    /// resumed from at another position.
    ///
    /// # Errors
    ///
    /// [`Error::Checkpoint`](crate::Error) when the bytes are not a checkpoint, are of
    /// another format version, or are damaged (their CRC32C does not match).
    ///
    /// ```
    /// use streamload::{Checkpoint, Dataset};
    /// # tokio_test::block_on(async {
    /// use futures::StreamExt;
    /// let mut epoch = Dataset::range(0, 100).iter();
    /// epoch.next().await;
    /// let mut bytes = epoch.checkpoint()?.to_bytes();
    /// assert!(Checkpoint::from_bytes(&bytes).is_ok());
    /// let last = bytes.len() - 1;
    /// bytes[last] ^= 1; // one bit flipped
    /// assert!(Checkpoint::from_bytes(&bytes).is_err());
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    pub fn from_bytes(bytes: &[u8]) -> anyhow::Result<Checkpoint> {
        let damaged = |why: &str| Error::Checkpoint(format!("damaged checkpoint: {why}"));
        let (magic, rest) = bytes.split_at_checked(4).unzip();
        if magic != Some(&MAGIC[..]) {
            return Err(
                Error::Checkpoint("not a streamload checkpoint (no SLCK magic)".into()).into(),
            );
        }
        let (version, rest) = rest
            .and_then(|r| r.split_at_checked(4))
            .ok_or_else(|| Error::Checkpoint("truncated checkpoint".into()))?;
        let version = u32::from_le_bytes(version.try_into().unwrap_or_default());
        let body = match version {
            Self::FORMAT_VERSION => {
                let (crc, body) = rest
                    .split_at_checked(4)
                    .ok_or_else(|| Error::Checkpoint("truncated checkpoint".into()))?;
                let crc = u32::from_le_bytes(crc.try_into().unwrap_or_default());
                if crc32c::crc32c(body) != crc {
                    return Err(damaged("its CRC32C does not match its bytes (changed, cut or extended since it was written)").into());
                }
                body
            }
            1..=3 => {
                return Err(Error::Checkpoint(format!(
                    "format version {version}, written by an earlier streamload whose stages \
                     saved the elements they held in another layout; this build reads version \
                     {} only: resume with the version that wrote it, or start the epoch again",
                    Self::FORMAT_VERSION
                ))
                .into());
            }
            _ => {
                return Err(Error::Checkpoint(format!(
                    "format version {version}, this build reads version {}",
                    Self::FORMAT_VERSION
                ))
                .into());
            }
        };
        match postcard::take_from_bytes(body) {
            Ok((checkpoint, [])) => Ok(checkpoint),
            Ok((_, extra)) => Err(damaged(&format!("{} bytes after its end", extra.len())).into()),
            Err(e) => Err(damaged(&e.to_string()).into()),
        }
    }
}
