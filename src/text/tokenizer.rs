//! [`Tokenizer`]: documents to token ids with a Hugging Face `tokenizer.json` (feature
//! `tokenizers`).

use std::path::Path;

use anyhow::Context as _;
use std::sync::Arc;

use crate::Error;
use crate::storage::Location;

/// A Hugging Face tokenizer read from its `tokenizer.json` (byte-level BPE as GPT-2's and
/// Llama 3's, WordPiece, Unigram, ...), with what a language-model pipeline adds per
/// document: an end-of-document id and a bound on a document's length.
///
/// Encoding runs Hugging Face's own `tokenizers` crate, so the ids are the Python package's
/// (`Tokenizer.encode(text, add_special_tokens=False).ids`), then the end id. It is CPU work:
/// call it in [`map_parallel`](crate::Dataset::map_parallel) /
/// [`try_map_parallel`](crate::Dataset::try_map_parallel), on the pipeline's threads. Cloning
/// it is cheap (the vocabulary is shared).
///
/// ```
/// use streamload::Dataset;
/// use streamload::text::Tokenizer;
///
/// # tokio_test::block_on(async {
/// let tokenizer = Tokenizer::from_file("tests/data/tokenizer/byte_level.json")?
///     .end_token("<|endoftext|>")?;
/// let docs = Dataset::from_vec(vec!["a first document", "and a second"]);
/// let ids = docs.try_map_parallel(2, move |doc| tokenizer.encode(doc));
/// let ids: Vec<Vec<u32>> = ids.collect().await?;
/// assert_eq!(ids.len(), 2);
/// assert_eq!(ids[0].last(), Some(&0)); // `<|endoftext|>` is id 0 in this vocabulary
/// # anyhow::Ok(()) }).unwrap();
/// ```
#[derive(Clone)]
pub struct Tokenizer {
    inner: Arc<tokenizers::Tokenizer>,
    /// Where it was read from, for errors.
    source: Arc<str>,
    end: Option<u32>,
    bound: Option<Bound>,
}

/// A bound on the ids of one document (the end id included).
#[derive(Clone, Copy, Debug)]
enum Bound {
    /// Longer documents are cut to their first ids (then the end id).
    Truncate(usize),
    /// A longer document is an error.
    Error(usize),
}

impl std::fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokenizer")
            .field("source", &self.source)
            .field("vocab_size", &self.vocab_size())
            .field("end", &self.end)
            .field("bound", &self.bound)
            .finish()
    }
}

impl Tokenizer {
    /// Reads a `tokenizer.json` from a local file.
    ///
    /// # Errors
    ///
    /// When the file cannot be read or is not a tokenizer (naming the file and why).
    pub fn from_file(path: impl AsRef<Path>) -> anyhow::Result<Tokenizer> {
        let path = path.as_ref();
        let bytes = std::fs::read(path)
            .map_err(|e| Error::InvalidArgument(format!("reading {}: {e}", path.display())))?;
        Tokenizer::parse(&bytes, &path.display().to_string())
    }

    /// Reads a `tokenizer.json` from a local path or an object store URL (`s3://`, `gs://`,
    /// `az://`, `https://`), as the file readers do.
    ///
    /// # Errors
    ///
    /// As [`from_file`](Tokenizer::from_file); a missing object or a permanent fault of the
    /// store fails at once.
    pub async fn open(location: impl Into<Location>) -> anyhow::Result<Tokenizer> {
        let location = location.into();
        let bytes = super::read_all(&location)
            .await
            .with_context(|| format!("reading the tokenizer {location}"))?;
        Tokenizer::parse(&bytes, &location.to_string())
    }

    /// Reads a `tokenizer.json` from its bytes.
    ///
    /// # Errors
    ///
    /// When they are not a tokenizer.
    pub fn from_bytes(bytes: &[u8]) -> anyhow::Result<Tokenizer> {
        Tokenizer::parse(bytes, "(bytes)")
    }

    fn parse(bytes: &[u8], source: &str) -> anyhow::Result<Tokenizer> {
        let inner = tokenizers::Tokenizer::from_bytes(bytes).map_err(|e| {
            Error::InvalidArgument(format!("{source}: not a tokenizer.json that parses: {e}"))
        })?;
        Ok(Tokenizer {
            inner: Arc::new(inner),
            source: source.into(),
            end: None,
            bound: None,
        })
    }

    /// Appends `token`'s id to every document (`<|endoftext|>`, `</s>`, ...).
    ///
    /// # Errors
    ///
    /// When the vocabulary has no such token.
    pub fn end_token(self, token: &str) -> anyhow::Result<Tokenizer> {
        let id = self.token_to_id(token).ok_or_else(|| {
            Error::InvalidArgument(format!("{}: no token {token:?}", self.source))
        })?;
        Ok(self.end_id(id))
    }

    /// Appends `id` to every document.
    pub fn end_id(mut self, id: u32) -> Tokenizer {
        self.end = Some(id);
        self
    }

    /// Cuts a document to its first `max_ids` ids, the end id included (its first
    /// `max_ids - 1` tokens, then the end id), as a tokenizer's truncation with an end token
    /// does. Without it (or [`max_ids`](Tokenizer::max_ids)) documents are not bounded.
    pub fn truncate(mut self, max_ids: usize) -> Tokenizer {
        self.bound = Some(Bound::Truncate(max_ids));
        self
    }

    /// Refuses a document of more than `max_ids` ids (the end id included): its
    /// [`encode`](Tokenizer::encode) is an error saying how long it is, never a silent cut.
    pub fn max_ids(mut self, max_ids: usize) -> Tokenizer {
        self.bound = Some(Bound::Error(max_ids));
        self
    }

    /// The id of `token`, if the vocabulary (or its added tokens) has it.
    pub fn token_to_id(&self, token: &str) -> Option<u32> {
        self.inner.token_to_id(token)
    }

    /// How many ids the vocabulary has, its added tokens included.
    pub fn vocab_size(&self) -> usize {
        self.inner.get_vocab_size(true)
    }

    /// The ids of `text` (no special tokens added but the end id), bounded as set.
    ///
    /// # Errors
    ///
    /// When the tokenizer fails on it, or it is longer than [`max_ids`](Tokenizer::max_ids).
    pub fn encode(&self, text: impl AsRef<str>) -> anyhow::Result<Vec<u32>> {
        let text = text.as_ref();
        let encoding = self.inner.encode_fast(text, false).map_err(|e| {
            anyhow::anyhow!(
                "{}: tokenizing a text of {} bytes: {e}",
                self.source,
                text.len()
            )
        })?;
        let tokens = encoding.get_ids();
        let end = usize::from(self.end.is_some());
        let keep = match self.bound {
            Some(Bound::Truncate(max)) => tokens.len().min(max.saturating_sub(end)),
            Some(Bound::Error(max)) if tokens.len() + end > max => {
                return Err(Error::InvalidArgument(format!(
                    "{}: a document of {} ids (end id included) is longer than max_ids {max} \
                     (it starts {:?})",
                    self.source,
                    tokens.len() + end,
                    text.chars().take(40).collect::<String>(),
                ))
                .into());
            }
            _ => tokens.len(),
        };
        let mut ids = Vec::with_capacity(keep + end);
        ids.extend_from_slice(&tokens[..keep]);
        if let Some(id) = self
            .end
            .filter(|_| !matches!(self.bound, Some(Bound::Truncate(0))))
        {
            ids.push(id);
        }
        Ok(ids)
    }

    /// The text of `ids` (the tokenizer's decoder; special tokens left out).
    ///
    /// # Errors
    ///
    /// When an id is outside the vocabulary.
    pub fn decode(&self, ids: &[u32]) -> anyhow::Result<String> {
        self.inner
            .decode(ids, true)
            .map_err(|e| anyhow::anyhow!("{}: decoding {} ids: {e}", self.source, ids.len()))
    }
}
