//! Writing WebDataset shards.

use anyhow::Context as _;
use async_compression::tokio::write::GzipEncoder;
use tokio::io::{AsyncWrite, AsyncWriteExt, BufWriter};

use super::Sample;
use super::sample::{base_plus_ext, is_meta};
use super::tar::{BLOCK, DEFAULT_MAX_MEMBER, padding_len, pax_path, ustar_header};
use crate::error::Error;
use crate::storage::Location;

/// Where a shard's bytes go: a local file or an object (both buffered).
type Sink = Box<dyn AsyncWrite + Send + Unpin>;

/// The open shard's destination.
enum Out {
    Plain(Sink),
    // Boxed: the encoder's state is large beside a plain writer.
    Gzip(Box<GzipEncoder<Sink>>),
}

impl Out {
    async fn write_all(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        match self {
            Out::Plain(w) => w.write_all(bytes).await,
            Out::Gzip(w) => w.write_all(bytes).await,
        }
    }

    /// Completes the stream: the GZIP trailer, the buffered bytes, the upload of an object.
    async fn close(self) -> std::io::Result<()> {
        match self {
            Out::Plain(mut w) => w.shutdown().await,
            Out::Gzip(mut w) => w.shutdown().await,
        }
    }
}

struct Shard {
    out: Out,
    location: Location,
    samples: u64,
    bytes: u64,
}

/// Writes samples into numbered WebDataset tar shards (the `webdataset` package's
/// `ShardWriter`): a new shard is started when the current one holds `max_samples` samples,
/// or when the next sample would take it past `max_bytes` (a sample is never split, so a
/// single sample larger than `max_bytes` makes a shard of its own).
///
/// Shards are named by a pattern with one printf-style number (`%d`, `%06d`), counted from 0:
/// local paths, or objects of any store the [`storage`](crate::storage) layer reads (an
/// `s3://`, `gs://`, `az://`, `memory://` ... URL; uploaded as they are written, with one PUT
/// for a small shard and a multipart upload for a large one, complete once the shard is
/// closed). A pattern ending in `.gz` or `.tgz` writes GZIP-compressed shards. Members
/// are `KEY.EXT` in ustar format (a PAX header carries names over 100 bytes or not ASCII),
/// mode 0444, owner `bigdata`, as the Python `TarWriter` writes them, with modification time 0
/// (the same samples make the same bytes: shards are reproducible); both readers read them
/// back, sample for sample (checked in the tests against the Python package). Call
/// [`finish`](ShardWriter::finish) at the end: it closes the last shard.
///
/// ```
/// use streamload::format::{Sample, ShardWriter, WebDataset};
/// # tokio_test::block_on(async {
/// let dir = tempfile::tempdir()?;
/// let pattern = dir.path().join("part-%04d.tar.gz");
/// let mut writer = ShardWriter::new(pattern.to_str().unwrap())?.max_bytes(4096);
/// for i in 0..6 {
///     writer.write(&Sample::new(format!("s{i}")).with("bin", vec![i as u8; 1000])).await?;
/// }
/// let shards = writer.finish().await?;
/// // Each sample takes 512 + 1024 bytes of tar: two per shard.
/// assert_eq!(shards.len(), 3);
/// assert!(shards[2].to_string().ends_with("part-0002.tar.gz"));
/// let samples = WebDataset::new(&shards).build().collect().await?;
/// assert_eq!(samples[5].get("bin").unwrap()[..], [5u8; 1000]);
/// # anyhow::Ok(()) }).unwrap();
/// ```
pub struct ShardWriter {
    /// The pattern, split around its number: before, zero-padded width, after.
    before: String,
    width: usize,
    after: String,
    gzip: bool,
    max_samples: u64,
    max_bytes: u64,
    mtime: u64,
    shard: Option<Shard>,
    next: u64,
    written: Vec<Location>,
}

impl std::fmt::Debug for ShardWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShardWriter")
            .field(
                "pattern",
                &format!("{}%0{}d{}", self.before, self.width, self.after),
            )
            .field("max_samples", &self.max_samples)
            .field("max_bytes", &self.max_bytes)
            .field("written", &self.written)
            .finish_non_exhaustive()
    }
}

fn invalid(message: String) -> anyhow::Error {
    Error::InvalidArgument(message).into()
}

impl ShardWriter {
    /// A writer of shards named by `pattern` (one `%d` or `%0Nd`: the shard's number), at most
    /// 100,000 samples and 3 GB per shard (the Python `ShardWriter`'s defaults).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] if the pattern has no number or more than one.
    pub fn new(pattern: &str) -> anyhow::Result<ShardWriter> {
        let bad = || {
            invalid(format!(
                "ShardWriter: the pattern {pattern:?} must hold exactly one %d or %0Nd \
                 (the shard number)"
            ))
        };
        let at = pattern.find('%').ok_or_else(bad)?;
        let rest = &pattern[at + 1..];
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if rest.as_bytes().get(digits) != Some(&b'd') {
            return Err(bad());
        }
        let width = if digits == 0 {
            0
        } else {
            rest[..digits].parse::<usize>().map_err(|_| bad())?.min(40)
        };
        let after = &rest[digits + 1..];
        if after.contains('%') {
            return Err(bad());
        }
        let gzip = after.ends_with(".gz") || after.ends_with(".tgz");
        Ok(ShardWriter {
            before: pattern[..at].to_string(),
            width,
            after: after.to_string(),
            gzip,
            max_samples: 100_000,
            max_bytes: 3_000_000_000,
            mtime: 0,
            shard: None,
            next: 0,
            written: Vec::new(),
        })
    }

    /// At most this many samples per shard (default 100,000).
    ///
    /// # Panics
    ///
    /// If `n` is 0.
    pub fn max_samples(mut self, n: u64) -> Self {
        assert!(n > 0, "ShardWriter: max_samples must be at least 1");
        self.max_samples = n;
        self
    }

    /// At most this many bytes of tar per shard, before compression (default 3 GB), unless
    /// one sample alone is larger.
    ///
    /// # Panics
    ///
    /// If `bytes` is 0.
    pub fn max_bytes(mut self, bytes: u64) -> Self {
        assert!(bytes > 0, "ShardWriter: max_bytes must be at least 1");
        self.max_bytes = bytes;
        self
    }

    /// The shards finished so far.
    pub fn shards(&self) -> &[Location] {
        &self.written
    }

    /// The member names of `sample` (`KEY.EXT`), checked to read back as this sample.
    fn names(sample: &Sample) -> anyhow::Result<Vec<String>> {
        let key = sample.key();
        if sample.is_empty() {
            return Err(invalid(format!(
                "ShardWriter: sample `{key}` has no fields (it would not be read back)"
            )));
        }
        let mut names = Vec::with_capacity(sample.len());
        for (ext, data) in sample.fields() {
            let name = format!("{key}.{ext}");
            let reads_back = !ext.is_empty()
                && ext.to_lowercase() == ext
                && ext != "__key__"
                && ext != "__url__"
                && !name.contains('\0')
                && !is_meta(&name)
                && base_plus_ext(&name) == Some((key, ext));
            if !reads_back {
                return Err(invalid(format!(
                    "ShardWriter: member `{name}` would not be read back as extension `{ext}` \
                     of sample `{key}` (a key's file name must be non-empty and hold no `.`, \
                     an extension must be non-empty, lower-case and hold no `/`, and names \
                     `__...__` are skipped by readers)"
                )));
            }
            if data.len() as u64 > DEFAULT_MAX_MEMBER {
                return Err(invalid(format!(
                    "ShardWriter: member `{name}` of {} bytes is larger than the {} bytes \
                     readers accept by default",
                    data.len(),
                    DEFAULT_MAX_MEMBER
                )));
            }
            names.push(name);
        }
        Ok(names)
    }

    /// Bytes of tar one member takes.
    fn member_bytes(name: &str, size: usize) -> u64 {
        let pax = if needs_pax(name) {
            let record = pax_path(name).len() as u64;
            BLOCK as u64 + record + padding_len(record) as u64
        } else {
            0
        };
        pax + (BLOCK + size + padding_len(size as u64)) as u64
    }

    /// Appends one sample, in a new shard if the current one is full.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`], with nothing written, for a sample that would not read
    /// back as itself: no fields, a key whose file name is empty or holds a `.`, an extension
    /// that is empty, upper-case or holds a `/`, a `__...__` name readers skip, or a member
    /// over 2 GiB. Otherwise the file system's or the store's errors, naming the shard.
    pub async fn write(&mut self, sample: &Sample) -> anyhow::Result<()> {
        let names = Self::names(sample)?;
        let size: u64 = names
            .iter()
            .zip(sample.fields())
            .map(|(name, (_, data))| Self::member_bytes(name, data.len()))
            .sum();
        if let Some(shard) = &self.shard
            && (shard.samples >= self.max_samples || shard.bytes + size > self.max_bytes)
        {
            self.close().await?;
        }
        if self.shard.is_none() {
            self.open().await?;
        }
        let mtime = self.mtime;
        let Some(shard) = self.shard.as_mut() else {
            return Err(anyhow::anyhow!("ShardWriter: no shard open"));
        };
        for (name, (_, data)) in names.iter().zip(sample.fields()) {
            write_member(&mut shard.out, name, data, mtime)
                .await
                .with_context(|| format!("writing {name} to {}", shard.location))?;
        }
        shard.samples += 1;
        shard.bytes += size;
        Ok(())
    }

    async fn open(&mut self) -> anyhow::Result<()> {
        let location = Location::parse(&format!(
            "{}{:0width$}{}",
            self.before,
            self.next,
            self.after,
            width = self.width
        ));
        self.next += 1;
        let sink: Sink = match &location {
            Location::Local(path) => {
                let file = tokio::fs::File::create(path)
                    .await
                    .with_context(|| format!("creating {location}"))?;
                Box::new(BufWriter::with_capacity(1 << 20, file))
            }
            Location::Url(url) => Box::new(
                crate::storage::remote::create(url)
                    .with_context(|| format!("creating {location}"))?,
            ),
        };
        let out = if self.gzip {
            Out::Gzip(Box::new(GzipEncoder::new(sink)))
        } else {
            Out::Plain(sink)
        };
        self.shard = Some(Shard {
            out,
            location,
            samples: 0,
            bytes: 0,
        });
        Ok(())
    }

    async fn close(&mut self) -> anyhow::Result<()> {
        if let Some(mut shard) = self.shard.take() {
            let name = shard.location.to_string();
            // The end of the archive: two zero blocks.
            shard
                .out
                .write_all(&[0u8; 2 * BLOCK])
                .await
                .with_context(|| format!("writing {name}"))?;
            shard
                .out
                .close()
                .await
                .with_context(|| format!("closing {name}"))?;
            self.written.push(shard.location);
        }
        Ok(())
    }

    /// Closes the last shard; returns the shards written, in order.
    ///
    /// # Errors
    ///
    /// The file system's or the store's errors, naming the shard.
    ///
    /// # Cancellation
    ///
    /// A writer dropped without `finish` leaves its last shard incomplete: a local file cut
    /// short (readers report it as truncated), an object never completed (not created).
    pub async fn finish(mut self) -> anyhow::Result<Vec<Location>> {
        self.close().await?;
        Ok(std::mem::take(&mut self.written))
    }
}

/// Whether a member name needs a PAX `path`: longer than ustar's 100 bytes, or not ASCII.
fn needs_pax(name: &str) -> bool {
    name.len() > 100 || !name.is_ascii()
}

async fn write_member(out: &mut Out, name: &str, data: &[u8], mtime: u64) -> std::io::Result<()> {
    let mut short = name.as_bytes();
    if needs_pax(name) {
        let record = pax_path(name);
        out.write_all(&ustar_header(
            b"././@PaxHeader",
            record.len() as u64,
            b'x',
            mtime,
        ))
        .await?;
        out.write_all(&record).await?;
        out.write_all(&[0u8; BLOCK][..padding_len(record.len() as u64)])
            .await?;
        // The ustar name: as much of the name as fits, at a character boundary.
        let mut end = name.len().min(100);
        while !name.is_char_boundary(end) {
            end -= 1;
        }
        short = &name.as_bytes()[..end];
    }
    out.write_all(&ustar_header(short, data.len() as u64, b'0', mtime))
        .await?;
    out.write_all(data).await?;
    out.write_all(&[0u8; BLOCK][..padding_len(data.len() as u64)])
        .await
}
