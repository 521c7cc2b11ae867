//! TFRecord indexes written while reading: [`IndexTarget`] and the reader's wrapper that
//! keeps each record's size and writes the index once the file has been read whole.

use std::fmt::Write as _;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use futures::future::BoxFuture;
use futures::stream::Stream;

use super::TFRecordFrames;
use crate::checkpoint::{Prov, State};
use crate::engine::Resumable;
use crate::storage::Location;

/// Where [`TFRecordDataset::write_index`](super::TFRecordDataset::write_index) writes the
/// index of each file it reads whole.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum IndexTarget {
    /// Beside each file, as `<file>.idx`: a local file, or for a URL the object `<url>.idx`
    /// in the same store (`s3://bucket/train-0.tfrecord.idx`). Where
    /// [`IndexedTFRecords::open`](super::IndexedTFRecords::open) and DALI look for it.
    Beside,
    /// Into this directory, as `<file name>.idx`: a local directory (which must exist), or
    /// a URL prefix (`s3://bucket/indexes`) under which the objects are put.
    Dir(Location),
}

impl IndexTarget {
    /// Where the index of `file` goes; `None` for a file without a name (a path ending in
    /// `..`, a URL ending in `/`).
    pub(crate) fn of(&self, file: &Location) -> Option<Location> {
        let beside = super::indexed::index_location(file);
        let name = match &beside {
            Location::Local(path) => path.file_name()?.to_os_string(),
            Location::Url(url) => {
                let last = url.path_segments()?.next_back()?;
                crate::storage::remote::percent_decode(last).into()
            }
        };
        if name.len() <= ".idx".len() {
            return None;
        }
        match self {
            IndexTarget::Beside => Some(beside),
            IndexTarget::Dir(Location::Local(dir)) => Some(Location::Local(dir.join(name))),
            IndexTarget::Dir(Location::Url(dir)) => {
                let mut url = dir.clone();
                let name = name.to_string_lossy();
                let path = format!("{}/{name}", dir.path().trim_end_matches('/'));
                url.set_path(&path);
                Some(Location::Url(url))
            }
        }
    }
}

/// The records of one file, as its [`TFRecordFrames`] reads them, keeping each frame's size;
/// once the file has ended after every record from offset 0 was read without an error or a
/// gap, the index (DALI's text, what [`TFRecordIndex`](super::TFRecordIndex) shows) is
/// written to `target`, and the stream ends when it is written (or yields the error of the
/// write, naming the index, then ends).
///
/// Saved state: the reader's (`[offset, record]`); a reader restored mid-file is built
/// without this wrapper, so writes no index.
#[must_use = "streams do nothing unless polled"]
pub(crate) struct IndexOnRead<B> {
    frames: TFRecordFrames<B>,
    /// Each record's framed size, in order (offsets follow: the records are contiguous from
    /// offset 0). Emptied, and no longer kept, once the file cannot be indexed.
    sizes: Vec<u32>,
    /// Where the next record must start.
    end: u64,
    /// Every record so far was read without an error, each right after the one before.
    whole: bool,
    target: Location,
    file: Arc<str>,
    writing: Option<BoxFuture<'static, anyhow::Result<()>>>,
    done: bool,
}

impl<B> IndexOnRead<B> {
    /// `frames` (which must start at offset 0), writing the index to `target`; `file` names
    /// the file in errors.
    pub(crate) fn new(frames: TFRecordFrames<B>, target: Location, file: &str) -> Self {
        IndexOnRead {
            frames,
            sizes: Vec::new(),
            end: 0,
            whole: true,
            target,
            file: file.into(),
            writing: None,
            done: false,
        }
    }

    /// Gives up indexing this file.
    fn abandon(&mut self) {
        self.whole = false;
        self.sizes = Vec::new();
    }

    /// The index's text: an `offset size` line per record.
    fn text(&self) -> String {
        let mut text = String::with_capacity(self.sizes.len() * 16);
        let mut offset = 0u64;
        for &size in &self.sizes {
            // Writing into a String cannot fail.
            let _ = writeln!(text, "{offset} {size}");
            offset += u64::from(size);
        }
        text
    }
}

/// Writes `text` to `target`, unless the same bytes are there already.
async fn write_index(target: Location, file: Arc<str>, text: String) -> anyhow::Result<()> {
    let text = Bytes::from(text);
    let len = text.len() as u64;
    if let Ok(there) = crate::storage::read_range(target.clone(), 0..len + 1).await
        && there == text
    {
        return Ok(());
    }
    crate::storage::put(&target, text)
        .await
        .map_err(|e| anyhow::anyhow!("tfrecord: writing the index {target} of {file}: {e:#}"))
}

impl<B> Stream for IndexOnRead<B>
where
    B: Stream<Item = std::io::Result<Bytes>> + Unpin,
{
    type Item = anyhow::Result<Bytes>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            if let Some(writing) = this.writing.as_mut() {
                let written = ready!(writing.as_mut().poll(cx));
                this.writing = None;
                this.done = true;
                return Poll::Ready(written.err().map(Err));
            }
            if this.done {
                return Poll::Ready(None);
            }
            match ready!(Pin::new(&mut this.frames).poll_next(cx)) {
                Some(Ok(record)) => {
                    if this.whole {
                        let (start, end) = this.frames.last_span();
                        match u32::try_from(end - start) {
                            Ok(size) if start == this.end => {
                                this.sizes.push(size);
                                this.end = end;
                            }
                            _ => this.abandon(),
                        }
                    }
                    return Poll::Ready(Some(Ok(record)));
                }
                Some(Err(e)) => {
                    this.abandon();
                    return Poll::Ready(Some(Err(e)));
                }
                None if this.whole => {
                    let text = this.text();
                    this.abandon();
                    let (target, file) = (this.target.clone(), Arc::clone(&this.file));
                    this.writing = Some(Box::pin(write_index(target, file, text)));
                }
                None => this.done = true,
            }
        }
    }
}

impl<B: Unpin> Resumable for IndexOnRead<B> {
    fn save(self: Pin<&mut Self>) -> anyhow::Result<State> {
        Pin::new(&mut self.get_mut().frames).save()
    }

    fn last_prov(&self) -> anyhow::Result<Prov> {
        self.frames.last_prov()
    }
}
