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
//! [`Error::Checkpoint`](crate::Error::Checkpoint) naming the file. Records held by
//! position are read again by scanning the file from the first wanted offset to the last
//! (a shuffle buffer's lie close together); such a file is checked only in that every saved
//! offset must still start a record. `list_files` saves its listing's size and a hash of
//! its names, and refuses a listing that changed.
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
//! A stage's stream implements [`Resumable`](state::Resumable) and is built with
//! `Dataset::unary_resumable` (its input built for it, restored from input 0 of its state) or
//! `Dataset::unary_with` (it builds its input itself: to replay it, or to restore it from a
//! mark); sources with `Dataset::stage_resumable`. Every other stage is wrapped in
//! [`Opaque`](state::Opaque), whose `save` is an error naming it. The build closure looks at
//! its context, in this order:
//! 1. `ctx.replaying()`: yield exactly the elements at these positions, in this order (build
//!    the input with the positions it needs: popped words, a group's members, the same list).
//! 2. `ctx.restoring()`: go on from this state (its `words`, `held` positions, `inputs`);
//!    inputs are built with `ctx.for_input(i)`, replays with
//!    `ctx.for_input(0).with_replay(positions)`.
//! 3. Neither: a fresh epoch (random stages key their draws by `ctx.epoch()`).
//!
//! `save` describes the stream as of the last element it yielded. A stage that holds elements
//! in order over a small input keeps a [`Marker`](state::Marker) (a mark of its input before
//! the oldest element not passed on, and how many were passed on since; restored through
//! [`Skipping`](state::Skipping)); over an input that is not small it keeps each element's
//! [`Prov`](state::Prov) (`input.last_prov()` right after the element) and replays them.
//! `last_prov` must answer whenever `ctx.provenance()` was set at build (a stage downstream
//! holds elements by position). A file format's decoder saves `[offset, record]` after the
//! last element it yielded (never what it read ahead) and gives each element's start offset
//! as its position; with `FileFormat::resumable` set, `format::files` opens, restores,
//! checks and replays its files. The tests in `tests/checkpoint.rs` check a stage by
//! comparing an interrupted and resumed epoch with an uninterrupted one at many points.
//!
//! The shared pieces: `parallel_map::InFlight` (calls in flight in input order: a mark per
//! group, or positions), [`held`] (several partial groups at once: buckets, windows by key),
//! [`Routed`] (replay through several inputs, each position keyed by its input with
//! [`Prov::keyed`](state::Prov::keyed)), and [`Restored`]: every stage built from a saved
//! state saves that state until its first element, so a stage need not be able to describe
//! the refills it does before it.
//!
//! # Format
//!
//! [`Checkpoint::to_bytes`]: the magic `SLCK`, the format version (a little-endian `u32`,
//! now [`Checkpoint::FORMAT_VERSION`]), then the checkpoint in postcard's encoding (serde, varints):
//! the recipe's fingerprint (a hash of its stages, their order and their parameters), the
//! epoch number, the state tree, and the seeds the epoch's unseeded random stages drew.

pub(crate) mod held;
pub(crate) mod route;
pub(crate) mod state;

use serde::{Deserialize, Serialize};

use crate::error::Error;
pub(crate) use route::Routed;
pub(crate) use state::positions_of_input;
pub(crate) use state::{
    ENDED, Ended, Marker, Opaque, Prov, ReplaySource, Restored, Resumable, Resumed, Skipping,
    StageStream, State, unsupported,
};

const MAGIC: &[u8; 4] = b"SLCK";

/// `held` (positions of elements of `input`) replayed, then `back`.
pub(crate) fn resume<T: Send + 'static>(
    ctx: &crate::dataset::Ctx,
    input: &crate::dataset::Dataset<T>,
    held: &[Prov],
    back: crate::dataset::BoxStream<T>,
) -> crate::dataset::BoxStream<T> {
    if held.is_empty() {
        return back;
    }
    let held: std::sync::Arc<[Prov]> = held.into();
    let replay = input.build(&ctx.for_input(0).with_replay(std::sync::Arc::clone(&held)));
    Box::pin(Resumed::new(replay, held, back))
}

/// The position of an epoch, to go on from after a restart: see
/// [`Epoch::checkpoint`](crate::Epoch::checkpoint).
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
}

impl Checkpoint {
    /// The version of [`to_bytes`](Checkpoint::to_bytes)' format; other versions are refused.
    pub const FORMAT_VERSION: u32 = 1;

    /// The epoch this checkpoint was taken in (0 for the recipe's first `iter()`).
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The checkpoint as bytes: `SLCK`, the format version, then postcard's encoding.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = MAGIC.to_vec();
        out.extend_from_slice(&Self::FORMAT_VERSION.to_le_bytes());
        // Serializing plain data into a vector cannot fail.
        out.extend(postcard::to_allocvec(self).unwrap_or_default());
        out
    }

    /// Reads [`to_bytes`](Checkpoint::to_bytes)' output.
    ///
    /// # Errors
    ///
    /// [`Error::Checkpoint`](crate::Error) when the bytes are not a checkpoint, are of
    /// another format version, or are damaged.
    pub fn from_bytes(bytes: &[u8]) -> anyhow::Result<Checkpoint> {
        let (magic, rest) = bytes.split_at_checked(4).unzip();
        if magic != Some(&MAGIC[..]) {
            return Err(
                Error::Checkpoint("not a streamload checkpoint (no SLCK magic)".into()).into(),
            );
        }
        let (version, body) = rest
            .and_then(|r| r.split_at_checked(4))
            .ok_or_else(|| Error::Checkpoint("truncated checkpoint".into()))?;
        let version = u32::from_le_bytes(version.try_into().unwrap_or_default());
        if version != Self::FORMAT_VERSION {
            return Err(Error::Checkpoint(format!(
                "format version {version}, this build reads version {}",
                Self::FORMAT_VERSION
            ))
            .into());
        }
        postcard::from_bytes(body)
            .map_err(|e| Error::Checkpoint(format!("damaged checkpoint: {e}")).into())
    }
}
