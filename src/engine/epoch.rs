//! One pass over a recipe: [`Epoch`], the stream [`Dataset::iter`] returns, with its
//! statistics, tuner task, checkpoint and refusal.

use std::fmt;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};
use std::task::{Context, Poll};

use futures::stream::{FusedStream, Stream};

use super::ctx::{Ctx, Refusal};
use super::plan::Dataset;
use super::resume::BoxStream;
use crate::checkpoint::{Checkpoint, ENDED, State};
use crate::runtime::{self, Task, Tuner};
use crate::stats::Stats;

/// [`StreamExt::next`](futures::StreamExt::next). Dropping it stops all work it spawned.
#[must_use = "streams do nothing unless polled"]
pub struct Epoch<T> {
    /// `None` once a refused resume ended it (its tasks stopped).
    stream: Option<BoxStream<T>>,
    stats: Stats,
    tuner: TunerState,
    done: bool,
    /// The recipe's fingerprint, the epoch's number and its unseeded stages' seeds, for
    /// checkpoints.
    fingerprint: u64,
    epoch: u64,
    seeds: Arc<std::sync::Mutex<std::collections::BTreeMap<u64, u64>>>,
    /// The resume was refused (a file changed since the checkpoint): the epoch ended there,
    /// and has no position to save.
    refused: bool,
    /// Where its stages record a refused resume.
    refusal: Refusal,
    /// The files it opened.
    files: crate::checkpoint::opened::Ledger,
}

/// The epoch's tuning task: started at the first poll if any stage asked for it, aborted when
/// the epoch is dropped.
enum TunerState {
    Idle(Tuner),
    Running(#[allow(dead_code)] Task<()>), // held only to abort the task on drop
    Off,
}

impl<T> Epoch<T> {
    /// A live view of this epoch's per-stage counters; `Display` prints the report.
    ///
    /// ```
    /// use futures::StreamExt;
    /// use streamload::Dataset;
    /// # tokio_test::block_on(async {
    /// let mut epoch = Dataset::range(0, 10).filter(|x| x % 2 == 0).iter();
    /// while let Some(x) = epoch.next().await { x?; }
    /// let stages = epoch.stats().snapshot();
    /// let count = |name| stages.iter().find(|s| s.name == name).map(|s| s.elements);
    /// assert_eq!((count("range"), count("filter")), (Some(10), Some(5)));
    /// println!("{}", epoch.stats()); // the report, ending with the bottleneck
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    pub fn stats(&self) -> Stats {
        self.stats.clone()
    }

    /// The position of this epoch after the last element it yielded, to go on from later with
    /// [`Dataset::iter_from`] (in this process or another).
    ///
    /// The checkpoint holds positions, not elements: a source's byte offset or index, a
    /// shuffle's random state and the positions of the elements in its buffer (a few bytes
    /// each), a batch's start. What stages read or computed ahead of the consumer is not in
    /// it; it is made again after the restore. The epoch goes on unchanged after a
    /// checkpoint. See the guide's [table of what each operation
    /// saves](crate::guide::checkpoints).
    ///
    /// # Errors
    ///
    /// [`Error::NotResumable`](crate::Error) naming the first stage that cannot save its
    /// position (a plain generator, a `from_stream`, an operation not made resumable yet).
    pub fn checkpoint(&mut self) -> anyhow::Result<Checkpoint> {
        if self.refused {
            return Err(crate::Error::Checkpoint(
                "this epoch's resume was refused: it has no position to save".into(),
            )
            .into());
        }
        let state = match self.stream.as_mut() {
            Some(stream) if !self.done => stream.as_mut().save()?,
            _ => State::new(ENDED),
        };
        let seeds = self.seeds.lock().unwrap_or_else(PoisonError::into_inner);
        Ok(Checkpoint {
            fingerprint: self.fingerprint,
            epoch: self.epoch,
            state,
            seeds: seeds.iter().map(|(&k, &v)| (k, v)).collect(),
            files: self.files.save(),
        })
    }
}

impl<T> fmt::Debug for Epoch<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Epoch")
            .field("done", &self.done)
            .finish_non_exhaustive()
    }
}

impl<T> Stream for Epoch<T> {
    type Item = anyhow::Result<T>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.done {
            return Poll::Ready(None);
        }
        if let TunerState::Idle(tuner) = &self.tuner {
            let tuner = tuner.clone();
            self.tuner = if tuner.wanted() {
                // No runtime: the stages report that themselves; they run untuned.
                match runtime::spawn("autotune", tuner.run(self.stats.clone())) {
                    Ok(task) => TunerState::Running(task),
                    Err(_) => TunerState::Off,
                }
            } else {
                TunerState::Off
            };
        }
        let Some(stream) = self.stream.as_mut() else {
            return Poll::Ready(None);
        };
        let mut item = std::task::ready!(stream.as_mut().poll_next(cx));
        let mut refused = matches!(&item, Some(Err(e)) if crate::error::is_refusal(e));
        if !refused && let Some(why) = self.refusal.get() {
            // A stage refused the resume, and what stands between it and the consumer did
            // not pass the refusal on (yet): it comes now, in place of this item.
            item = Some(Err(crate::Error::Checkpoint(why.clone()).into()));
            refused = true;
        }
        if item.is_none() || refused {
            // A refused resume ends the epoch: nothing after it is trusted. Dropping the
            // stream stops its tasks.
            self.done = true;
            self.refused = refused;
            self.tuner = TunerState::Off;
            if refused {
                self.stream = None;
            }
        }
        Poll::Ready(item)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        match &self.stream {
            Some(stream) if !self.done => stream.size_hint(),
            _ => (0, Some(0)),
        }
    }
}

impl<T> FusedStream for Epoch<T> {
    fn is_terminated(&self) -> bool {
        self.done
    }
}

impl<T: Send + 'static> Dataset<T> {
    /// Builds epoch number `epoch` of this recipe, restored from `restore` if given.
    pub(crate) fn start(&self, epoch: u64, restore: Option<&Checkpoint>) -> Epoch<T> {
        let mut ctx = Ctx::new(self.options().clone());
        ctx.epoch = epoch;
        let ctx = match restore {
            Some(checkpoint) => {
                let (state, seeds) = (checkpoint.state.clone(), &checkpoint.seeds);
                ctx.files.restore(&checkpoint.files);
                ctx.seeds
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .extend(seeds.iter().copied());
                ctx.restored_seeds = true;
                ctx.with_restore(Some(state))
            }
            None => ctx,
        };
        Epoch {
            stream: Some(self.build(&ctx)),
            stats: ctx.stats,
            tuner: TunerState::Idle(ctx.tuner),
            done: false,
            fingerprint: self.fingerprint(),
            epoch,
            seeds: ctx.seeds,
            refused: false,
            refusal: ctx.refusal,
            files: ctx.files,
        }
    }

    /// The number of the next epoch [`Dataset::iter`] starts.
    pub(crate) fn next_epoch(&self) -> u64 {
        self.node().epochs.fetch_add(1, Ordering::Relaxed)
    }

    /// The epoch `checkpoint` saved, going on from it ([`Dataset::iter_from`]).
    pub(crate) fn resume(&self, checkpoint: &Checkpoint) -> anyhow::Result<Epoch<T>> {
        if checkpoint.fingerprint != self.fingerprint() {
            return Err(crate::Error::Checkpoint(format!(
                "it was taken from another recipe (fingerprint {:016x}, this recipe's is {:016x}): \
                 resume with the dataset built the same way",
                checkpoint.fingerprint,
                self.fingerprint()
            ))
            .into());
        }
        self.node()
            .epochs
            .fetch_max(checkpoint.epoch.saturating_add(1), Ordering::Relaxed);
        if checkpoint.state.stage == ENDED {
            let mut epoch = self.start(checkpoint.epoch, None);
            epoch.done = true;
            return Ok(epoch);
        }
        Ok(self.start(checkpoint.epoch, Some(checkpoint)))
    }
}
