//! Megatron-LM's indexed datasets: the `.bin` + `.idx` pairs most pretraining corpora are
//! shipped in, read as a dataset of documents (their token ids), by document, in order or
//! shuffled, locally or from object storage; and written ([`MegatronWriter`]).
//!
//! # The format
//!
//! As `megatron/core/datasets/indexed_dataset.py` writes it (`IndexedDatasetBuilder`): the
//! `.bin` holds every sequence's tokens one after another, little-endian, of one type
//! ([`TokenType`]); the `.idx` holds the header `MMIDIDX\0\0`, the version (1, a `u64`), the
//! type's code (a byte), the number of sequences and the number of document boundaries (two
//! `u64`s), then each sequence's length (`i32`), each sequence's byte offset in the `.bin`
//! (`i64`), the document boundaries (`i64` sequence indices, from 0 to the number of
//! sequences: document `d` is sequences `b[d]..b[d + 1]`), and in a multimodal dataset a mode
//! per sequence (`i8`). A document is usually one sequence (`preprocess_data.py` without
//! sentence splitting); with sentences split it is several, read here as one run of tokens.
//!
//! # Checks
//!
//! A pair is checked when it is opened, so a damaged or mismatched one is refused before any
//! document is read, with an error naming the file and what is wrong: a header, version or type code Megatron does not write, an `.idx` whose size is
//! not the one its counts give, a sequence past the end of the `.bin` or a `.bin` longer than
//! its sequences (another index's data), document boundaries that do not run from 0 to the
//! number of sequences in order. Token ids are read as `u32`: a negative one, or one past
//! `u32::MAX` in an `int64` file, is an error naming the file, the document and the token;
//! a float type is refused when the pair is opened.
//!
//! # Checkpoints
//!
//! A document's position is its place in the epoch's order (a few bytes); a checkpoint holds
//! the place reached. The order is drawn from (seed, epoch), so a restored epoch reads the
//! same documents. The recipe's fingerprint holds every pair's name, a digest of its index
//! and the `.bin`'s size and version: a pair that changed refuses the checkpoint.
//!
//! # Ranks
//!
//! [`MegatronDataset`] is a [`ShardSource`](crate::distribute::ShardSource): a rank reads
//! runs of documents by number, and with `pack` after it an elastic resume goes on in the
//! middle of a document (see the data-parallel guide).

use std::ops::Range;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures::stream::Stream;

use crate::checkpoint::{Prov, State};
use crate::engine::{BoxStream, Cardinality, Ctx, Dataset, ReplaySource, Resumable, Source};
use crate::engine::{Start, unsupported};
use crate::error::Error;
use crate::hash::{Key, Permutation, mix64};
use crate::options::Parallelism;
use crate::runtime::Coop;
use crate::storage::{self, Identity, Location};

const STAGE: &str = "megatron";
const HEADER: &[u8; 9] = b"MMIDIDX\x00\x00";
/// The header, the version, the type code and the two counts.
const FIXED: usize = 9 + 8 + 1 + 8 + 8;

/// The type of a Megatron dataset's tokens: its code in the `.idx` is Megatron's `DType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TokenType {
    /// `uint8` (code 1).
    U8,
    /// `int8` (code 2).
    I8,
    /// `int16` (code 3).
    I16,
    /// `int32` (code 4): Megatron's choice for a vocabulary of 65,500 or more.
    I32,
    /// `int64` (code 5).
    I64,
    /// `uint16` (code 8): Megatron's choice for a vocabulary under 65,500.
    U16,
}

impl TokenType {
    /// Megatron's `DType.optimal_dtype`: `U16` for a vocabulary under 65,500, else `I32`.
    pub fn for_vocabulary(size: usize) -> TokenType {
        if size < 65_500 {
            TokenType::U16
        } else {
            TokenType::I32
        }
    }

    fn code(self) -> u8 {
        match self {
            TokenType::U8 => 1,
            TokenType::I8 => 2,
            TokenType::I16 => 3,
            TokenType::I32 => 4,
            TokenType::I64 => 5,
            TokenType::U16 => 8,
        }
    }

    fn from_code(code: u8) -> Result<TokenType, &'static str> {
        Ok(match code {
            1 => TokenType::U8,
            2 => TokenType::I8,
            3 => TokenType::I16,
            4 => TokenType::I32,
            5 => TokenType::I64,
            8 => TokenType::U16,
            6 | 7 => return Err("floats (float64 or float32), not token ids"),
            _ => return Err("a type code Megatron does not write"),
        })
    }

    /// Bytes per token.
    fn size(self) -> u64 {
        match self {
            TokenType::U8 | TokenType::I8 => 1,
            TokenType::I16 | TokenType::U16 => 2,
            TokenType::I32 => 4,
            TokenType::I64 => 8,
        }
    }

    /// The token ids in `bytes` (little-endian), or the index of the first that is no `u32`.
    fn decode(self, bytes: &[u8]) -> Result<Vec<u32>, usize> {
        fn all<const N: usize>(
            bytes: &[u8],
            id: impl Fn([u8; N]) -> Option<u32>,
        ) -> Result<Vec<u32>, usize> {
            bytes
                .chunks_exact(N)
                .enumerate()
                .map(|(i, c)| {
                    let word: [u8; N] = c.try_into().map_err(|_| i)?;
                    id(word).ok_or(i)
                })
                .collect()
        }
        match self {
            TokenType::U8 => Ok(bytes.iter().map(|&b| u32::from(b)).collect()),
            TokenType::I8 => all(bytes, |b: [u8; 1]| u32::try_from(i8::from_le_bytes(b)).ok()),
            TokenType::I16 => all(bytes, |b| u32::try_from(i16::from_le_bytes(b)).ok()),
            TokenType::U16 => all(bytes, |b| Some(u32::from(u16::from_le_bytes(b)))),
            TokenType::I32 => all(bytes, |b| u32::try_from(i32::from_le_bytes(b)).ok()),
            TokenType::I64 => all(bytes, |b| u32::try_from(i64::from_le_bytes(b)).ok()),
        }
    }

    /// `tokens` as this type's little-endian bytes, or the index of the first that does not fit.
    fn encode(self, tokens: &[u32], out: &mut Vec<u8>) -> Result<(), usize> {
        for (i, &t) in tokens.iter().enumerate() {
            match self {
                TokenType::U8 => out.push(u8::try_from(t).map_err(|_| i)?),
                TokenType::I8 => out.extend(i8::try_from(t).map_err(|_| i)?.to_le_bytes()),
                TokenType::I16 => out.extend(i16::try_from(t).map_err(|_| i)?.to_le_bytes()),
                TokenType::U16 => out.extend(u16::try_from(t).map_err(|_| i)?.to_le_bytes()),
                TokenType::I32 => out.extend(i32::try_from(t).map_err(|_| i)?.to_le_bytes()),
                TokenType::I64 => out.extend(i64::from(t).to_le_bytes()),
            }
        }
        Ok(())
    }
}

/// One `.idx`, checked against its `.bin`'s size.
#[derive(Debug)]
struct Index {
    tokens: TokenType,
    /// Each sequence's byte range in the `.bin`.
    sequences: Vec<Range<u64>>,
    /// Document `d` is sequences `bounds[d]..bounds[d + 1]`.
    bounds: Vec<u64>,
}

impl Index {
    fn documents(&self) -> u64 {
        self.bounds.len().saturating_sub(1) as u64
    }

    /// Parses `idx` (the `.idx`'s bytes, `name` in errors) and checks it against the size of
    /// its `.bin`.
    fn parse(idx: &[u8], name: &str, bin_size: u64) -> anyhow::Result<Index> {
        let damaged = |what: String| -> anyhow::Error {
            anyhow::anyhow!("{name}: not a Megatron index: {what}")
        };
        if idx.len() < FIXED || &idx[..9] != HEADER {
            return Err(damaged("no MMIDIDX header".into()));
        }
        let word = |at: usize| u64::from_le_bytes(idx[at..at + 8].try_into().unwrap_or([0; 8]));
        let version = word(9);
        if version != 1 {
            return Err(damaged(format!(
                "version {version}, where Megatron writes 1"
            )));
        }
        let tokens = TokenType::from_code(idx[17])
            .map_err(|why| damaged(format!("its type code {} is {why}", idx[17])))?;
        let (count, bounds) = (word(18), word(26));
        let base = (count as u128) * 12 + (bounds as u128) * 8 + FIXED as u128;
        let len = idx.len() as u128;
        if len != base && len != base + count as u128 {
            return Err(damaged(format!(
                "{len} bytes, where its {count} sequences and {bounds} document boundaries take \
                 {base} (truncated, or another file)"
            )));
        }
        let (count, n_bounds) = (count as usize, bounds as usize);
        let lengths = &idx[FIXED..FIXED + 4 * count];
        let pointers = &idx[FIXED + 4 * count..FIXED + 12 * count];
        let bounds_at = FIXED + 12 * count;
        let mut sequences = Vec::with_capacity(count);
        let mut end = 0u64;
        for i in 0..count {
            let length = i32::from_le_bytes(lengths[4 * i..4 * i + 4].try_into().unwrap_or([0; 4]));
            let pointer =
                i64::from_le_bytes(pointers[8 * i..8 * i + 8].try_into().unwrap_or([0; 8]));
            let (Ok(length), Ok(start)) = (u64::try_from(length), u64::try_from(pointer)) else {
                return Err(damaged(format!(
                    "sequence {i} has length {length} at offset {pointer}"
                )));
            };
            let stop = start.saturating_add(length.saturating_mul(tokens.size()));
            if stop > bin_size {
                return Err(damaged(format!(
                    "sequence {i} ends at byte {stop} of a .bin of {bin_size} bytes (a \
                     truncated .bin, or another index's)"
                )));
            }
            end = end.max(stop);
            sequences.push(start..stop);
        }
        if end != bin_size {
            return Err(damaged(format!(
                "its sequences end at byte {end} of a .bin of {bin_size} bytes (another \
                 index's .bin)"
            )));
        }
        let bounds: Vec<u64> = (0..n_bounds).map(|d| word(bounds_at + 8 * d)).collect();
        let ordered = bounds.windows(2).all(|w| w[0] <= w[1]);
        if bounds.first() != Some(&0) || bounds.last() != Some(&(count as u64)) || !ordered {
            return Err(damaged(format!(
                "its document boundaries do not run from 0 to its {count} sequences in order"
            )));
        }
        Ok(Index {
            tokens,
            sequences,
            bounds,
        })
    }
}

/// One opened pair.
#[derive(Debug)]
struct Pair {
    /// The prefix, as given (`data/corpus` for `data/corpus.bin` and `data/corpus.idx`).
    name: String,
    bin: Location,
    index: Index,
    /// The `.bin`'s size and version, and a digest of the `.idx`'s bytes.
    bin_identity: Identity,
    idx_digest: u64,
    /// The global number of its first document.
    first: u64,
}

/// Megatron-LM indexed datasets (`.bin` + `.idx` pairs), opened: their documents as a
/// [`Dataset`] of token ids, in order or shuffled, and by number.
///
/// ```
/// use streamload::format::megatron::{MegatronDataset, MegatronWriter, TokenType};
/// # tokio_test::block_on(async {
/// let dir = tempfile::tempdir()?;
/// let prefix = dir.path().join("corpus");
/// let mut writer = MegatronWriter::create(&prefix, TokenType::U16)?;
/// writer.add_document(&[5, 6, 7])?;
/// writer.add_document(&[8])?;
/// writer.finish()?;
///
/// let corpus = MegatronDataset::open([prefix.to_str().unwrap()]).await?;
/// assert_eq!(corpus.num_documents(), 2);
/// assert_eq!(corpus.read_document(1).await?, [8]);
/// assert_eq!(corpus.documents().collect().await?, [vec![5, 6, 7], vec![8]]);
/// # anyhow::Ok(()) }).unwrap();
/// ```
#[derive(Debug, Clone)]
pub struct MegatronDataset {
    pairs: Arc<[Pair]>,
    seed: Option<u64>,
    shard: (u64, u64),
    num_parallel_reads: Parallelism,
}

impl MegatronDataset {
    /// Opens the pairs named by these prefixes (`corpus` for `corpus.bin` and `corpus.idx`;
    /// local paths or URLs): each `.idx` is read whole and checked against its `.bin`'s size.
    /// Documents are numbered across the pairs in order.
    ///
    /// # Errors
    ///
    /// A file that cannot be read, or a damaged or mismatched pair (see the
    /// [module](self) doc), naming the file.
    pub async fn open<P: AsRef<str>>(
        prefixes: impl IntoIterator<Item = P>,
    ) -> anyhow::Result<MegatronDataset> {
        let mut pairs = Vec::new();
        let mut first = 0;
        for prefix in prefixes {
            let name = prefix.as_ref().to_string();
            let bin = Location::parse(&format!("{name}.bin"));
            let idx = Location::parse(&format!("{name}.idx"));
            let bin_identity = storage::identity(&bin).await?;
            let idx_size = storage::identity(&idx).await?.size;
            let bytes = storage::read_range(idx.clone(), 0..idx_size).await?;
            let index = Index::parse(&bytes, &idx.to_string(), bin_identity.size)?;
            let idx_digest = Key::new().bytes(&bytes).finish();
            let documents = index.documents();
            pairs.push(Pair {
                name,
                bin,
                index,
                bin_identity,
                idx_digest,
                first,
            });
            first += documents;
        }
        Ok(MegatronDataset {
            pairs: pairs.into(),
            seed: None,
            shard: (1, 0),
            num_parallel_reads: Parallelism::Autotune,
        })
    }

    /// Documents in all the pairs.
    pub fn num_documents(&self) -> u64 {
        self.pairs.iter().map(|p| p.index.documents()).sum()
    }

    /// Each epoch reads the documents in a random order drawn from `seed` and the epoch's
    /// number (a permutation computed one place at a time: no memory per document).
    pub fn shuffle_documents(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Only every `num_shards`-th document, from `index` (tf.data's `shard`, before any read).
    ///
    /// # Panics
    ///
    /// If `num_shards` is 0 or `index >= num_shards`.
    pub fn shard(mut self, num_shards: u64, index: u64) -> Self {
        assert!(
            num_shards > 0 && index < num_shards,
            "MegatronDataset::shard: index {index} of {num_shards} shards"
        );
        self.shard = (num_shards, index);
        self
    }

    /// Documents read at once (default [`AUTOTUNE`](crate::AUTOTUNE)), each by one ranged
    /// read of its tokens.
    pub fn num_parallel_reads(mut self, n: impl Into<Parallelism>) -> Self {
        self.num_parallel_reads = n.into();
        self
    }

    /// The token ids of document `number` (counted across the pairs), read by one ranged read.
    ///
    /// # Errors
    ///
    /// A number past the last document, a failed read, or a token id that is no `u32`,
    /// naming the file and the document.
    pub async fn read_document(&self, number: u64) -> anyhow::Result<Vec<u32>> {
        read(&self.pairs, number).await
    }

    /// The documents (the ids of each one's tokens), in order or as
    /// [`shuffle_documents`](Self::shuffle_documents) says, `num_parallel_reads` at once.
    ///
    /// # Errors
    ///
    /// A document that cannot be read is an error element naming the file and the document;
    /// the others follow.
    pub fn documents(&self) -> Dataset<Vec<u32>> {
        self.read_order(Order {
            total: self.num_documents(),
            shard: self.shard,
            seed: self.seed,
            pairs: self.pairs_key(),
            from: 0,
        })
    }

    /// The documents `order` numbers, `num_parallel_reads` at once.
    fn read_order(&self, order: Order) -> Dataset<Vec<u32>> {
        let pairs = Arc::clone(&self.pairs);
        Dataset::from_source(order)
            .hidden()
            .try_map_async(self.num_parallel_reads, move |number| {
                let pairs = Arc::clone(&pairs);
                async move { read(&pairs, number).await }
            })
            .named(STAGE)
    }

    /// The pairs' names, index digests and `.bin` identities, for the fingerprint.
    fn pairs_key(&self) -> u64 {
        self.pairs
            .iter()
            .fold(Key::new().word(self.pairs.len() as u64), |key, p| {
                key.bytes(p.name.as_bytes())
                    .word(p.idx_digest)
                    .word(p.bin_identity.size)
                    .word(p.bin_identity.version)
            })
            .finish()
    }
}

/// The pairs as a [`ShardSource`](crate::distribute::ShardSource): a pair is a file, a
/// document a record, read by number (so
/// [`ShardPolicy::Record`](crate::distribute::ShardPolicy::Record) deals runs of documents
/// without reading those before them). The plan deals and orders the documents:
/// a dataset made with [`shuffle_documents`](MegatronDataset::shuffle_documents) or
/// [`shard`](MegatronDataset::shard) is refused (shuffle after the plan's dataset instead).
///
/// ```
/// use streamload::distribute::{Distribute, ShardPolicy};
/// use streamload::format::megatron::{MegatronDataset, MegatronWriter, TokenType};
/// # tokio_test::block_on(async {
/// let dir = tempfile::tempdir()?;
/// let prefix = dir.path().join("corpus");
/// let mut writer = MegatronWriter::create(&prefix, TokenType::U16)?;
/// for d in 0..6u32 {
///     writer.add_document(&[d; 3])?;
/// }
/// writer.finish()?;
/// let corpus = MegatronDataset::open([prefix.to_str().unwrap()]).await?;
/// let rank = Distribute::new(1, 2).policy(ShardPolicy::Record).plan(corpus).await?;
/// let docs: Vec<Vec<u32>> = rank.dataset().map(|d| d.item).collect().await?;
/// assert_eq!(docs, [vec![3; 3], vec![4; 3], vec![5; 3]]); // the second half
/// # anyhow::Ok(()) }).unwrap();
/// ```
impl crate::distribute::ShardSource for MegatronDataset {
    type Item = Vec<u32>;

    fn names(&self) -> Vec<String> {
        self.pairs.iter().map(|p| p.name.clone()).collect()
    }

    fn count(&self) -> futures::future::BoxFuture<'_, anyhow::Result<Vec<u64>>> {
        let counts = if self.seed.is_some() || self.shard != (1, 0) {
            Err(Error::InvalidArgument(format!(
                "{STAGE}: a dataset made with shuffle_documents or shard is not dealt to ranks \
                 (the plan deals and orders the documents): plan the pairs as opened, and \
                 shuffle after the plan's dataset"
            ))
            .into())
        } else {
            Ok(self.pairs.iter().map(|p| p.index.documents()).collect())
        };
        Box::pin(futures::future::ready(counts))
    }

    fn read(&self, unit: crate::distribute::Unit) -> Dataset<Vec<u32>> {
        let first = self.pairs.get(unit.file).map_or(0, |p| p.first);
        self.read_order(Order {
            total: unit.len(),
            shard: (1, 0),
            seed: None,
            pairs: self.pairs_key(),
            from: first + unit.start,
        })
    }

    fn seekable_records(&self) -> bool {
        true
    }
}

/// Document `number`'s tokens.
async fn read(pairs: &[Pair], number: u64) -> anyhow::Result<Vec<u32>> {
    // The last pair starting at or before it (pairs without documents share their
    // successor's first number).
    let at = pairs.partition_point(|p| p.first <= number);
    let pair = at
        .checked_sub(1)
        .and_then(|i| pairs.get(i))
        .filter(|p| number - p.first < p.index.documents())
        .ok_or_else(|| Error::InvalidArgument(format!("document {number} is past the last one")))?;
    let d = (number - pair.first) as usize;
    let index = &pair.index;
    let (lo, hi) = (index.bounds[d] as usize, index.bounds[d + 1] as usize);
    let mut tokens = Vec::new();
    if lo == hi {
        return Ok(tokens);
    }
    let ranges = &index.sequences[lo..hi];
    // Megatron writes a document's sequences one after another: one read, unless they are not.
    let contiguous = ranges.windows(2).all(|w| w[0].end == w[1].start);
    let parts: Vec<Bytes> = if contiguous {
        let whole = ranges[0].start..ranges[ranges.len() - 1].end;
        vec![storage::read_range(pair.bin.clone(), whole).await?]
    } else {
        let mut parts = Vec::with_capacity(ranges.len());
        for r in ranges {
            parts.push(storage::read_range(pair.bin.clone(), r.clone()).await?);
        }
        parts
    };
    for part in parts {
        let ids = index.tokens.decode(&part).map_err(|i| {
            anyhow::anyhow!(
                "{}.bin: document {d}: token {} is {}, no token id",
                pair.name,
                tokens.len() + i,
                describe(index.tokens, &part, i)
            )
        })?;
        tokens.extend(ids);
    }
    Ok(tokens)
}

/// The value of token `i` in `bytes`, for an error.
fn describe(tokens: TokenType, bytes: &[u8], i: usize) -> String {
    let at = i * tokens.size() as usize;
    let word = |n: usize| bytes.get(at..at + n).unwrap_or(&[]);
    match tokens {
        TokenType::I8 => format!("{}", word(1).first().map_or(0, |&b| b as i8)),
        TokenType::I16 => format!(
            "{}",
            i16::from_le_bytes(word(2).try_into().unwrap_or([0; 2]))
        ),
        TokenType::I32 => format!(
            "{}",
            i32::from_le_bytes(word(4).try_into().unwrap_or([0; 4]))
        ),
        TokenType::I64 => format!(
            "{}",
            i64::from_le_bytes(word(8).try_into().unwrap_or([0; 8]))
        ),
        TokenType::U8 | TokenType::U16 => "out of range".into(),
    }
}

/// The documents' numbers in the epoch's order: the source of [`MegatronDataset::documents`].
///
/// Saved state: `[places of the order yielded]`. A document's position is its place.
#[derive(Hash)]
struct Order {
    total: u64,
    shard: (u64, u64),
    seed: Option<u64>,
    /// The pairs (see `pairs_key`).
    pairs: u64,
    /// The number of its first document (a rank's run of documents: `ShardSource::read`).
    from: u64,
}

impl Order {
    /// Documents in the shard.
    fn len(&self) -> u64 {
        let (n, i) = self.shard;
        self.total.saturating_sub(i).div_ceil(n)
    }

    fn permutation(&self, epoch: u64) -> Option<Permutation> {
        self.seed
            .map(|seed| Permutation::new(self.len(), mix64(seed) ^ mix64(!epoch)))
    }
}

impl Source for Order {
    type Out = u64;
    type Stream = BoxStream<u64>;
    const NAME: &'static str = STAGE;

    fn cardinality(&self) -> Cardinality {
        Cardinality::Finite(self.len())
    }

    fn open(&self, ctx: &Ctx, start: Start<'_>) -> anyhow::Result<BoxStream<u64>> {
        let permutation = self.permutation(ctx.epoch());
        let (shard, len, from) = (self.shard, self.len(), self.from);
        let number = move |k: u64| {
            let (n, i) = shard;
            from + i + n * permutation.as_ref().map_or(k, |p| p.at(k))
        };
        Ok(match start {
            Start::Replay(provs) => Box::pin(ReplaySource::new(Arc::clone(provs), STAGE, {
                move |k| {
                    if k < len {
                        Ok(number(k))
                    } else {
                        Err(unsupported(STAGE, "a saved place past the order's end"))
                    }
                }
            })),
            Start::Restore(state) => Box::pin(Places {
                next: state.word(0)?.min(len),
                len,
                number: Box::new(number),
                coop: Coop::default(),
            }),
            Start::Fresh => Box::pin(Places {
                next: 0,
                len,
                number: Box::new(number),
                coop: Coop::default(),
            }),
        })
    }
}

/// The order from place `next`.
struct Places {
    next: u64,
    len: u64,
    number: Box<dyn Fn(u64) -> u64 + Send>,
    coop: Coop,
}

impl Stream for Places {
    type Item = anyhow::Result<u64>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if this.next >= this.len {
            return Poll::Ready(None);
        }
        std::task::ready!(this.coop.poll_proceed(cx));
        let number = (this.number)(this.next);
        this.next += 1;
        Poll::Ready(Some(Ok(number)))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = usize::try_from(self.len - self.next).unwrap_or(usize::MAX);
        (n, Some(n))
    }
}

impl Resumable for Places {
    fn save(self: Pin<&mut Self>) -> anyhow::Result<State> {
        Ok(State::new(STAGE).words([self.next]))
    }

    fn last_prov(&self) -> anyhow::Result<Prov> {
        self.next
            .checked_sub(1)
            .map(Prov::at)
            .ok_or_else(|| unsupported(STAGE, "no element yielded yet"))
    }
}

/// Writes a Megatron indexed dataset (`PREFIX.bin` and `PREFIX.idx`, local paths), one
/// sequence per document, byte for byte as Megatron's `IndexedDatasetBuilder` writes it with
/// `add_item` and `end_document`.
#[derive(Debug)]
pub struct MegatronWriter {
    prefix: std::path::PathBuf,
    bin: std::io::BufWriter<std::fs::File>,
    tokens: TokenType,
    lengths: Vec<u32>,
    buffer: Vec<u8>,
}

impl MegatronWriter {
    /// Creates `PREFIX.bin` (and, at [`finish`](Self::finish), `PREFIX.idx`).
    ///
    /// # Errors
    ///
    /// When the file cannot be created, naming it.
    pub fn create(prefix: impl AsRef<std::path::Path>, tokens: TokenType) -> anyhow::Result<Self> {
        let prefix = prefix.as_ref().to_path_buf();
        let path = with_suffix(&prefix, ".bin");
        let file = std::fs::File::create(&path)
            .map_err(|e| anyhow::anyhow!("creating {}: {e}", path.display()))?;
        Ok(MegatronWriter {
            prefix,
            bin: std::io::BufWriter::new(file),
            tokens,
            lengths: Vec::new(),
            buffer: Vec::new(),
        })
    }

    /// Appends a document of these tokens.
    ///
    /// # Errors
    ///
    /// A token that does not fit the type (naming it), or a failed write.
    pub fn add_document(&mut self, tokens: &[u32]) -> anyhow::Result<()> {
        use std::io::Write;
        let length = i32::try_from(tokens.len())
            .map_err(|_| Error::InvalidArgument("a document of 2^31 tokens or more".into()))?;
        self.buffer.clear();
        self.tokens.encode(tokens, &mut self.buffer).map_err(|i| {
            Error::InvalidArgument(format!(
                "document {}: token {i} ({}) does not fit {:?}",
                self.lengths.len(),
                tokens[i],
                self.tokens
            ))
        })?;
        self.bin
            .write_all(&self.buffer)
            .map_err(|e| anyhow::anyhow!("writing {}.bin: {e}", self.prefix.display()))?;
        self.lengths.push(length as u32);
        Ok(())
    }

    /// Flushes the `.bin` and writes the `.idx`.
    ///
    /// # Errors
    ///
    /// A failed write, naming the file.
    pub fn finish(mut self) -> anyhow::Result<()> {
        use std::io::Write;
        self.bin
            .flush()
            .map_err(|e| anyhow::anyhow!("writing {}.bin: {e}", self.prefix.display()))?;
        let n = self.lengths.len();
        let mut idx = Vec::with_capacity(FIXED + 20 * n + 8);
        idx.extend_from_slice(HEADER);
        idx.extend(1u64.to_le_bytes());
        idx.push(self.tokens.code());
        idx.extend((n as u64).to_le_bytes());
        idx.extend((n as u64 + 1).to_le_bytes());
        for &length in &self.lengths {
            idx.extend(length.to_le_bytes());
        }
        let mut pointer = 0u64;
        for &length in &self.lengths {
            idx.extend(pointer.to_le_bytes());
            pointer += u64::from(length) * self.tokens.size();
        }
        for d in 0..=n as u64 {
            idx.extend(d.to_le_bytes());
        }
        let path = with_suffix(&self.prefix, ".idx");
        std::fs::write(&path, idx).map_err(|e| anyhow::anyhow!("writing {}: {e}", path.display()))
    }
}

fn with_suffix(prefix: &std::path::Path, suffix: &str) -> std::path::PathBuf {
    let mut name = prefix.as_os_str().to_owned();
    name.push(suffix);
    name.into()
}
