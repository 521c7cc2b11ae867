//! `list_files`: the files matching a glob pattern, local or in an object store, listed
//! afresh each epoch.

use std::fmt;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use futures::future::BoxFuture;
use futures::stream::{FusedStream, Stream};
use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;

use crate::checkpoint::{Prov, State};
use crate::engine::{Cardinality, Ctx, Dataset, Source, Start};
use crate::engine::{Resumable, numbered, replaying};
use crate::hash::mix64;
use crate::runtime::Coop;
use crate::storage::{self, Location};

impl Dataset<Location> {
    /// The files matching a glob `pattern`, as a dataset of [`Location`]s (tf.data's
    /// `Dataset.list_files(file_pattern, shuffle, seed)`).
    ///
    /// The pattern is a local glob (`data/train-*.tfrecord`) or a URL whose path has glob
    /// characters (`s3://bucket/train/part-*.tfrecord`, `memory://test/*.txt`); it is listed
    /// through [`storage::glob`] at the start of every epoch, so files added between epochs
    /// are seen, as in tf.data.
    ///
    /// `shuffle` is the seed of the file order:
    /// - `None`: the files come sorted (by path, as TensorFlow sorts), the same every epoch
    ///   (tf.data's `shuffle=False`).
    /// - `Some(seed)`: the whole list is shuffled, in a different order each epoch, and the
    ///   same sequence of orders on every run with the same seed (tf.data's `shuffle=True`
    ///   with a `seed`, which reshuffles each iteration). Pass `Some(rand::random())` for
    ///   tf.data's unseeded shuffle.
    ///
    /// One `Option<u64>` rather than tf.data's two arguments, because its only other case,
    /// shuffling without a seed, is a seed drawn at random; and it is off unless asked, unlike
    /// tf.data's default, so a pipeline reads its files in a stable, reproducible order (what
    /// a reader of the code expects of a function named `list_files`). The seed is mixed with
    /// the epoch number and drives a ChaCha8 RNG, as [`shuffle`](Dataset::shuffle) does.
    ///
    /// The synchronous, local-only [`format::list_files`](crate::format::list_files) returns
    /// the sorted paths as a `Vec` instead.
    ///
    /// # Examples
    ///
    /// Listing shards and reading them, two at a time, with
    /// [`parallel_interleave`](Dataset::parallel_interleave) (or
    /// [`interleave`](Dataset::interleave), which reads them on the consumer's task):
    ///
    /// ```
    /// use streamload::format::{Compression, TFRecordDataset, TFRecordWriter};
    /// use streamload::{AUTOTUNE, Dataset};
    /// # tokio_test::block_on(async {
    /// let dir = tempfile::tempdir()?;
    /// for shard in 0..3 {
    ///     let file = tokio::fs::File::create(dir.path().join(format!("train-{shard}.tfrecord"))).await?;
    ///     let mut writer = TFRecordWriter::new(file, Compression::None);
    ///     writer.write(format!("shard {shard}").as_bytes()).await?;
    ///     writer.finish().await?;
    /// }
    /// let pattern = format!("{}/train-*.tfrecord", dir.path().display());
    ///
    /// let files = Dataset::list_files(&pattern, None);
    /// let names: Vec<String> = files.map(|f| f.to_string()).collect().await?;
    /// assert!(names[0].ends_with("train-0.tfrecord") && names[2].ends_with("train-2.tfrecord"));
    ///
    /// let records = Dataset::list_files(&pattern, Some(42))
    ///     .parallel_interleave(2, 1, AUTOTUNE, |f| TFRecordDataset::new([f]).build());
    /// let mut got = records.collect().await?;
    /// got.sort();
    /// assert_eq!(got, ["shard 0", "shard 1", "shard 2"]);
    ///
    /// let nothing = Dataset::list_files(&format!("{}/*.csv", dir.path().display()), None);
    /// assert!(nothing.collect().await.unwrap_err().to_string().contains("No files matched pattern"));
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    ///
    /// # Ordering
    ///
    /// Sorted without a seed; with one, a permutation of the sorted list drawn from the seed
    /// and the epoch number (deterministic for a given seed and listing): the number of the
    /// recipe's [`iter`](Dataset::iter) (inside a [`repeat`](Dataset::repeat), of its
    /// repetition), so an epoch resumed from a checkpoint has the order it had.
    ///
    /// # Checkpoints
    ///
    /// A [checkpoint](crate::Epoch::checkpoint) saves the index of the next file in the
    /// epoch's order, and how many files the listing found and a hash of their names. A
    /// resumed epoch lists the files again and refuses a listing that changed since
    /// ([`Error::Checkpoint`](crate::Error::Checkpoint), naming the pattern, as the epoch's
    /// first element); a stage downstream that holds files by position gets them again by
    /// index.
    ///
    /// # Errors
    ///
    /// The first element of an epoch is an error, and the epoch ends there, when the pattern
    /// is invalid, the listing fails (naming the pattern or URL), or nothing matches
    /// (TensorFlow's "No files matched pattern: PATTERN").
    ///
    /// # Cancellation
    ///
    /// Dropping the epoch drops the listing in flight (a local listing runs on a blocking
    /// thread, which finishes its directory walk and drops the result).
    pub fn list_files(pattern: &str, shuffle: Option<u64>) -> Dataset<Location> {
        Dataset::from_source(ListFilesSource {
            pattern: pattern.into(),
            shuffle,
        })
    }
}

/// [`Dataset::list_files`]: its pattern and shuffle seed are its parameters.
#[derive(Hash)]
struct ListFilesSource {
    pattern: Arc<str>,
    shuffle: Option<u64>,
}

impl Source for ListFilesSource {
    type Out = Location;
    type Stream = ListFiles;
    const NAME: &'static str = STAGE;

    fn cardinality(&self) -> Cardinality {
        Cardinality::Unknown
    }

    /// Fresh; restored (the listing is checked against the saved one); or in replay (the
    /// files at the saved indices of the listing).
    fn open(&self, ctx: &Ctx, start: Start<'_>) -> anyhow::Result<ListFiles> {
        // The order of epoch `ctx.epoch()`: a restored epoch draws the same one.
        let order = self.shuffle.map(|seed| {
            let epoch = ctx.epoch();
            ChaCha8Rng::seed_from_u64(mix64(seed ^ mix64(epoch.wrapping_add(0x5EED))))
        });
        let mut files = ListFiles::new(Arc::clone(&self.pattern), order);
        // In replay, the saved state (when in reach) still says what the listing was.
        let state = ctx
            .restoring()
            .filter(|state| ctx.replaying().is_none() || state.stage == STAGE);
        if let Some(state) = state {
            let (next, listing) = restored(state)?;
            files.next = next;
            files.listing = listing;
            files.check = listing;
        }
        if let Start::Replay(provs) = start {
            files.next = 0;
            files.picks = Some(Arc::clone(provs));
        }
        Ok(files)
    }
}

const STAGE: &str = "list_files";

/// A restored `list_files`' next index and its listing's size and hash.
fn restored(state: &State) -> anyhow::Result<(usize, Option<(u64, u64)>)> {
    let next = usize::try_from(state.word(0)?).map_err(|_| state.malformed())?;
    let listing = match (state.words.get(1), state.words.get(2)) {
        (Some(&n), Some(&hash)) => Some((n, hash)),
        _ => None,
    };
    Ok((next, listing))
}

/// A listing's hash: of its files' sort keys, in sorted order.
fn listing_hash(files: &[Location]) -> u64 {
    files.iter().fold(0xCBF2_9CE4_8422_2325u64, |h, file| {
        let h = sort_key(file)
            .iter()
            .fold(h, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01B3));
        mix64(h)
    })
}

fn sort_key(file: &Location) -> &[u8] {
    match file {
        Location::Local(path) => path.as_os_str().as_encoded_bytes(),
        Location::Url(url) => url.as_str().as_bytes(),
    }
}

/// Stream for [`Dataset::list_files`].
///
/// Saved state: `[next, files, hash]`, the index in the epoch's order of the next file, and
/// how many files the listing found and their hash (once listed); a file's position is its
/// index. A restored epoch lists again, checks that the same files are found, orders them
/// as the epoch did and goes on at `next`; in replay, it yields the files at the saved
/// indices.
#[must_use = "streams do nothing unless polled"]
pub(crate) struct ListFiles {
    phase: Phase,
    coop: Coop,
    /// The index in the epoch's order of the next file.
    next: usize,
    /// The listing's size and hash, once listed.
    listing: Option<(u64, u64)>,
    /// What the listing must be (a restored epoch's).
    check: Option<(u64, u64)>,
    /// In replay: the indices to yield, in order (`next` counts them).
    picks: Option<Arc<[Prov]>>,
}

enum Phase {
    /// Not listed yet: the pattern, and the RNG that shuffles the list (if any).
    Start(Arc<str>, Option<ChaCha8Rng>),
    Listing(
        Arc<str>,
        Option<ChaCha8Rng>,
        BoxFuture<'static, anyhow::Result<Vec<Location>>>,
    ),
    /// Listed, in the epoch's order.
    Files(Vec<Location>),
    Done,
}

impl ListFiles {
    fn new(pattern: Arc<str>, order: Option<ChaCha8Rng>) -> Self {
        ListFiles {
            phase: Phase::Start(pattern, order),
            coop: Coop::default(),
            next: 0,
            listing: None,
            check: None,
            picks: None,
        }
    }
}

impl fmt::Debug for ListFiles {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let phase = match &self.phase {
            Phase::Start(p, _) => format!("start {p:?}"),
            Phase::Listing(p, _, _) => format!("listing {p:?}"),
            Phase::Files(files) => format!("{} files left", files.len().saturating_sub(self.next)),
            Phase::Done => "done".to_string(),
        };
        f.debug_struct("ListFiles").field("phase", &phase).finish()
    }
}

// No field is pinned (the listing future is boxed).
impl Unpin for ListFiles {}

impl Stream for ListFiles {
    type Item = anyhow::Result<Location>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            if matches!(this.phase, Phase::Start(..)) {
                this.phase = match std::mem::replace(&mut this.phase, Phase::Done) {
                    Phase::Start(pattern, order) => {
                        let listed = Arc::clone(&pattern);
                        let listing = Box::pin(async move { storage::glob(&listed).await });
                        Phase::Listing(pattern, order, listing)
                    }
                    other => other,
                };
            }
            match &mut this.phase {
                Phase::Start(..) => {}
                Phase::Listing(pattern, order, listing) => {
                    let listed = ready!(listing.as_mut().poll(cx));
                    let result = match listed {
                        // `storage::glob` names the pattern in its errors, "No files matched
                        // pattern" among them.
                        Err(e) => Err(e),
                        // TensorFlow's `InvalidArgumentError`: typed, so callers (the
                        // Python package) can tell it apart.
                        Ok(files) if files.is_empty() => Err(crate::Error::InvalidArgument(
                            format!("No files matched pattern: {pattern}"),
                        )
                        .into()),
                        Ok(mut files) => {
                            // By the bytes of the path or URL, as TensorFlow sorts (`a-b/x`
                            // before `a/x`), so the permutation depends on the seed only.
                            files.sort_by(|a, b| sort_key(a).cmp(sort_key(b)));
                            let listing = (files.len() as u64, listing_hash(&files));
                            if let Some(rng) = order {
                                files.shuffle(rng);
                            }
                            Ok((files, listing))
                        }
                    };
                    let result = result.and_then(|(files, listing)| {
                        this.listing = Some(listing);
                        match this.check {
                            Some(then) if then != listing => {
                                Err(crate::Error::Checkpoint(format!(
                                    "the files matching {pattern} changed since the checkpoint \
                                     ({} files then, {} now, or other names)",
                                    then.0, listing.0
                                ))
                                .into())
                            }
                            _ => Ok(files),
                        }
                    });
                    match result {
                        Ok(files) => this.phase = Phase::Files(files),
                        Err(e) => {
                            this.phase = Phase::Done;
                            return Poll::Ready(Some(Err(e)));
                        }
                    }
                }
                Phase::Files(files) => {
                    ready!(this.coop.poll_proceed(cx));
                    let at = match &this.picks {
                        None => Some(this.next),
                        Some(picks) => match picks.get(this.next).map(Prov::single) {
                            None => None,
                            Some(Ok(i)) => Some(usize::try_from(i).unwrap_or(usize::MAX)),
                            Some(Err(e)) => {
                                this.phase = Phase::Done;
                                return Poll::Ready(Some(Err(e)));
                            }
                        },
                    };
                    let next = match at {
                        None => None,
                        Some(i) => match files.get(i) {
                            Some(file) => Some(Ok(file.clone())),
                            None if this.picks.is_none() => None,
                            None => Some(Err(crate::Error::Checkpoint(format!(
                                "a saved position names file {i} of a listing of {}",
                                files.len()
                            ))
                            .into())),
                        },
                    };
                    match &next {
                        Some(Ok(_)) => this.next += 1,
                        _ => this.phase = Phase::Done,
                    }
                    return Poll::Ready(next);
                }
                Phase::Done => return Poll::Ready(None),
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        match &self.phase {
            Phase::Start(..) | Phase::Listing(..) => (0, None),
            Phase::Files(files) => {
                let left = match &self.picks {
                    None => files.len().saturating_sub(self.next),
                    Some(picks) => picks.len().saturating_sub(self.next),
                };
                (left, Some(left))
            }
            Phase::Done => (0, Some(0)),
        }
    }
}

impl Resumable for ListFiles {
    fn save(self: Pin<&mut Self>) -> anyhow::Result<State> {
        if self.picks.is_some() {
            return Err(replaying(STAGE));
        }
        let listing = self.listing.or(self.check);
        Ok(State::new(STAGE)
            .words([self.next as u64])
            .words(listing.into_iter().flat_map(|(n, hash)| [n, hash])))
    }

    fn last_prov(&self) -> anyhow::Result<Prov> {
        numbered(STAGE, self.next as u64, self.picks.as_ref())
    }
}

impl FusedStream for ListFiles {
    fn is_terminated(&self) -> bool {
        matches!(self.phase, Phase::Done)
    }
}
