//! Text preprocessing: a [`Vocabulary`] that maps tokens to ids, as TensorFlow's
//! `tf.lookup.StaticVocabularyTable` does (Keras' `StringLookup` hashes unknown tokens the same
//! way but lays ids out differently: see [`Vocabulary::reserve_padding_id`]).
//!
//! With the `tokenizers` feature, a [`Tokenizer`] reads a Hugging Face `tokenizer.json` (the
//! subword tokenizers language models use) and turns documents into token ids.
//!
//! This is a transformation applied to elements inside `map` / `map_parallel`, not a file
//! format (those are in [`format`](crate::format): the lines come from
//! [`TextLineDataset`](crate::format::TextLineDataset)) nor a tensor type (in
//! [`tensor`](crate::tensor)): a pipeline reads lines, tokenizes them into ids here, then pads
//! or buckets the ids into batches.
//!
//! ```
//! use std::sync::Arc;
//! use ndarray::array;
//! use streamload::Dataset;
//! use streamload::text::Vocabulary;
//!
//! # tokio_test::block_on(async {
//! let vocab = Arc::new(Vocabulary::from_tokens(["the", "cat", "sat"])?.reserve_padding_id(true));
//! let lines = Dataset::from_vec(vec!["the cat sat", "the dog"]);
//! let ids = lines.map(move |line| vocab.tokenize(line.as_bytes())).padded_batch(2, None, None, false);
//! // Padding is 0, known tokens 1..=3, the unknown "dog" one of the OOV ids (4).
//! assert_eq!(ids.collect().await?, [array![[1, 2, 3], [1, 4, 0]]]);
//! # anyhow::Ok(()) }).unwrap();
//! ```

pub use crate::ops::pack::{Document, Packed, PackedBatch, Packing};

use std::fmt;
use std::sync::Arc;

use anyhow::Context as _;
use futures::StreamExt;
use hashbrown::HashTable;

use crate::Error;
use crate::storage::Location;
use crate::tensor::StringList;

#[cfg(feature = "tokenizers")]
mod tokenizer;
#[cfg(feature = "tokenizers")]
pub use tokenizer::Tokenizer;

const TOO_MANY: &str = "a vocabulary holds at most 4,294,967,295 tokens";

/// Token -> id lookup with hashed ids for unknown tokens (tf.lookup.StaticVocabularyTable).
///
/// Ids, as TensorFlow lays them out: the vocabulary's tokens get `0..len()` in order, and an
/// unknown token gets `len() + fingerprint64(token) % num_oov_buckets`, where `fingerprint64`
/// is Google's FarmHash `Fingerprint64`: the hash TensorFlow's `StaticVocabularyTable` and
/// `tf.strings.to_hash_bucket_fast` use, so unknown tokens get the ids TensorFlow gives them.
/// With [`reserve_padding_id`](Vocabulary::reserve_padding_id), id 0 is kept for padding
/// (Keras' mask token) and every other id is one higher.
///
/// Cloning is cheap (the table is shared). Lookups borrow the token's bytes and hash each
/// token once: the fingerprint both finds a known token and picks an unknown one's bucket.
/// Tokenizing allocates only the output vector.
///
/// ```
/// use streamload::text::Vocabulary;
///
/// let vocab = Vocabulary::from_tokens(["emerson", "lake", "palmer"])?.num_oov_buckets(3);
/// assert_eq!(vocab.lookup(b"lake"), 1);
/// assert!((3..6).contains(&vocab.lookup(b"king")));
/// assert_eq!(vocab.tokenize(b"  palmer\tlake  king "), [2, 1, vocab.lookup(b"king")]);
/// assert_eq!(vocab.vocabulary_size(), 6);
/// # anyhow::Ok(())
/// ```
#[derive(Clone)]
pub struct Vocabulary {
    table: Arc<Table>,
    num_oov_buckets: u64,
    /// 1 when id 0 is reserved for padding, else 0.
    offset: i64,
}

/// The tokens, back to back in one buffer, and a hash table of `(fingerprint, id)` over them.
#[derive(Default)]
struct Table {
    index: HashTable<(u64, u32)>,
    /// The tokens' bytes in id order.
    bytes: Vec<u8>,
    /// Where token `id` ends in `bytes` (it starts where `id - 1` ends).
    ends: Vec<usize>,
}

impl fmt::Debug for Vocabulary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Vocabulary")
            .field("tokens", &self.len())
            .field("num_oov_buckets", &self.num_oov_buckets)
            .field("reserve_padding_id", &(self.offset == 1))
            .finish()
    }
}

impl Vocabulary {
    /// A vocabulary of `tokens`, ids in order, with one OOV bucket and no padding id (as a
    /// `StaticVocabularyTable` over a `KeyValueTensorInitializer`: the empty string may be a
    /// token).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] when a token appears twice (naming it and both positions),
    /// or when there is none: TensorFlow fails on both.
    pub fn from_tokens<I>(tokens: I) -> anyhow::Result<Vocabulary>
    where
        I: IntoIterator,
        I::Item: AsRef<[u8]>,
    {
        let mut table = Table::default();
        for token in tokens {
            let position = table.len();
            let token = token.as_ref();
            table.insert(token).map_err(|first| {
                Error::InvalidArgument(match first {
                    Some(first) => format!(
                        "duplicate token {:?} in the vocabulary: at positions {first} and {position}",
                        String::from_utf8_lossy(token)
                    ),
                    None => TOO_MANY.into(),
                })
            })?;
        }
        if table.len() == 0 {
            return Err(
                Error::InvalidArgument("a vocabulary needs at least one token".into()).into(),
            );
        }
        Ok(Vocabulary {
            table: Arc::new(table),
            num_oov_buckets: 1,
            offset: 0,
        })
    }

    /// A vocabulary read from a file (or URL) of one token per line; ids in line order, one
    /// OOV bucket, no padding id. This is tf.lookup's `TextFileInitializer` with
    /// `TextFileIndex.WHOLE_LINE` keys and `LINE_NUMBER` values, and reads lines as it does:
    /// a line ends at `\n`, one `\r` before that (or before the end of the file) is dropped,
    /// any other `\r`, tab or space is part of the token, and a last line of nothing but
    /// `\r` is none. The file is read as it is (no decompression by extension).
    ///
    /// # Errors
    ///
    /// When the file cannot be read, holds no token, or a line is empty or repeats an earlier
    /// one (naming the file and the 1-based line numbers): TensorFlow fails on each of these.
    pub async fn from_file(location: impl Into<Location>) -> anyhow::Result<Vocabulary> {
        let location = location.into();
        let text = read_all(&location)
            .await
            .with_context(|| format!("reading the vocabulary {location}"))?;
        let mut table = Table::default();
        let mut rest = &text[..];
        while !rest.is_empty() {
            let (line, next) = match memchr::memchr(b'\n', rest) {
                Some(at) => (&rest[..at], &rest[at + 1..]),
                None => (rest, &rest[rest.len()..]),
            };
            let last = next.is_empty() && !rest.ends_with(b"\n");
            rest = next;
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            let n = table.len() + 1;
            if line.is_empty() {
                if last {
                    break;
                }
                return Err(Error::InvalidArgument(format!(
                    "vocabulary {location}: line {n} is empty"
                ))
                .into());
            }
            table.insert(line).map_err(|first| {
                Error::InvalidArgument(match first {
                    Some(first) => format!(
                        "vocabulary {location}: line {n} repeats the token {:?} of line {}",
                        String::from_utf8_lossy(line),
                        first + 1
                    ),
                    None => format!("vocabulary {location}: line {n}: {TOO_MANY}"),
                })
            })?;
        }
        if table.len() == 0 {
            return Err(Error::InvalidArgument(format!(
                "vocabulary {location}: the file holds no token"
            ))
            .into());
        }
        Ok(Vocabulary {
            table: Arc::new(table),
            num_oov_buckets: 1,
            offset: 0,
        })
    }

    /// How many hashed ids unknown tokens share (default 1).
    ///
    /// # Panics
    ///
    /// If `n` is 0 (as TensorFlow's `StaticVocabularyTable`: without OOV buckets, unknown
    /// tokens have no id).
    pub fn num_oov_buckets(mut self, n: u64) -> Vocabulary {
        assert!(n > 0, "Vocabulary: num_oov_buckets must be at least 1");
        self.num_oov_buckets = n;
        self
    }

    /// Keeps id 0 for padding (Keras' mask token), so `padded_batch`'s default padding value
    /// is never a token's id; every other id is one higher.
    ///
    /// This is not Keras' `StringLookup(mask_token=..)` layout: that puts the OOV ids first
    /// (`1 + bucket`, the bucket being the same FarmHash one) and the vocabulary after them,
    /// and maps the mask token itself to 0; here the empty string is looked up as any token.
    pub fn reserve_padding_id(mut self, reserve: bool) -> Vocabulary {
        self.offset = i64::from(reserve);
        self
    }

    /// How many tokens the vocabulary holds.
    pub fn len(&self) -> usize {
        self.table.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.table.len() == 0
    }

    /// How many ids there are: the padding id, the tokens and the OOV buckets (an embedding
    /// table's input size; Keras' `vocabulary_size()`).
    pub fn vocabulary_size(&self) -> usize {
        self.offset as usize + self.len() + self.num_oov_buckets as usize
    }

    /// The id of `token`.
    #[inline]
    pub fn lookup(&self, token: &[u8]) -> i64 {
        let hash = farmhash::fingerprint64(token);
        match self.table.find(hash, token) {
            Some(id) => self.offset + i64::from(id),
            None => self.offset + self.len() as i64 + (hash % self.num_oov_buckets) as i64,
        }
    }

    /// The OOV bucket of a token: FarmHash `Fingerprint64(token) % num_oov_buckets`
    /// (TensorFlow's `to_hash_bucket_fast`).
    pub fn oov_bucket(&self, token: &[u8]) -> u64 {
        farmhash::fingerprint64(token) % self.num_oov_buckets
    }

    /// The token of a vocabulary id (`None` for the padding id, OOV ids and ids out of range).
    pub fn token(&self, id: i64) -> Option<&[u8]> {
        let index = u32::try_from(id - self.offset).ok()?;
        (index as usize)
            .lt(&self.table.len())
            .then(|| self.table.token(index))
    }

    /// The ids of the words of `text` split at runs of whitespace (space, `\t`, `\n`, `\v`,
    /// `\f`, `\r`), as [`StringList::split_whitespace`] and `tf.strings.split` without a
    /// separator split: other bytes, non-ASCII spaces included, are part of words.
    pub fn tokenize(&self, text: &[u8]) -> Vec<i64> {
        let mut ids = Vec::with_capacity(text.len() / 4 + 1);
        ids.extend(
            text.split(is_space)
                .filter(|w| !w.is_empty())
                .map(|w| self.lookup(w)),
        );
        ids
    }

    /// The ids of already split words (one id per string, empty strings included).
    pub fn encode(&self, words: &StringList) -> Vec<i64> {
        let mut ids = Vec::with_capacity(words.len());
        self.encode_into(words, &mut ids);
        ids
    }

    /// Appends the ids of `words` to `ids`.
    pub fn encode_into(&self, words: &StringList, ids: &mut Vec<i64>) {
        ids.extend(words.iter().map(|w| self.lookup(w)));
    }
}

/// The whole file at `location`, read in 64 KiB blocks.
pub(crate) async fn read_all(location: &Location) -> anyhow::Result<Vec<u8>> {
    let mut blocks = crate::storage::open_blocks(location, 64 * 1024, 2, false, 0)
        .await?
        .blocks;
    let mut text = Vec::new();
    while let Some(block) = blocks.next().await {
        text.extend_from_slice(&block?);
    }
    Ok(text)
}

/// TensorFlow's whitespace (C's `isspace`): space, `\t`, `\n`, `\v`, `\f`, `\r`. Rust's
/// `u8::is_ascii_whitespace` leaves out `\v` (0x0b).
#[inline]
pub(crate) fn is_space(b: &u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r')
}

impl Table {
    fn len(&self) -> usize {
        self.ends.len()
    }

    fn token(&self, id: u32) -> &[u8] {
        let id = id as usize;
        let start = if id == 0 { 0 } else { self.ends[id - 1] };
        &self.bytes[start..self.ends[id]]
    }

    fn find(&self, hash: u64, token: &[u8]) -> Option<u32> {
        self.index
            .find(hash, |&(h, id)| h == hash && self.token(id) == token)
            .map(|&(_, id)| id)
    }

    /// Adds a token with the next id. Errors: `Some(first id)` for a repeated token, `None`
    /// past `u32::MAX` tokens.
    fn insert(&mut self, token: &[u8]) -> Result<(), Option<u32>> {
        let hash = farmhash::fingerprint64(token);
        if let Some(first) = self.find(hash, token) {
            return Err(Some(first));
        }
        let Ok(id) = u32::try_from(self.len()) else {
            return Err(None);
        };
        self.bytes.extend_from_slice(token);
        self.ends.push(self.bytes.len());
        self.index.insert_unique(hash, (hash, id), |&(h, _)| h);
        Ok(())
    }
}
