use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use futures::stream::{Fuse, Stream, StreamExt};
use pin_project::pin_project;

use crate::checkpoint::{Prov, Resumable, State, unsupported};
use crate::dataset::{BoxStream, Cardinality, Ctx, Dataset, error_stream};

const STAGE: &str = "batch";

pub(crate) fn cardinality(input: Cardinality, size: u64, drop_remainder: bool) -> Cardinality {
    input.map_finite(|n| {
        if drop_remainder {
            n / size
        } else {
            n.div_ceil(size)
        }
    })
}

/// The batch stream of one epoch: fresh, restored, or replaying saved batches.
///
/// Saved state: over a small input (see `Resumable::is_small`), the input's state from before
/// the batch being filled (its members are read again after a restore); over an input that
/// holds elements by position (a shuffle), the positions of the members gathered so far
/// (`held`) and the input's state now.
pub(crate) fn build<T: Send + 'static>(
    ctx: &Ctx,
    input: &Dataset<T>,
    size: usize,
    drop_remainder: bool,
) -> Batch<BoxStream<T>, T> {
    if let Some(provs) = ctx.replaying() {
        // Each saved batch is the group of its members' positions.
        let mut members = Vec::new();
        let mut sizes = VecDeque::new();
        for prov in provs.iter() {
            match prov {
                Prov::Group(group, words) if words.is_empty() => {
                    sizes.push_back(group.len());
                    members.extend(group.iter().cloned());
                }
                other => {
                    let e = unsupported(STAGE, &format!("saved batch is not a group: {other:?}"));
                    return Batch::new(error_stream(e), size, drop_remainder, ctx);
                }
            }
        }
        let mut batch = Batch::new(
            input.build(&ctx.for_input(0).with_replay(members.into())),
            size,
            false,
            ctx,
        );
        batch.replay_sizes = Some(sizes);
        return batch;
    }
    let Some(state) = ctx.restoring() else {
        return Batch::new(input.build(ctx), size, drop_remainder, ctx);
    };
    // Over an input that is not small, the members gathered before the checkpoint are read
    // again at their positions first (a small input is restored from the batch's mark).
    let restored = if input.is_small() {
        input.build(&ctx.for_input(0))
    } else {
        crate::checkpoint::resumed_input(ctx, input, state)
    };
    Batch::new(restored, size, drop_remainder, ctx)
}

/// Stream for the [`batch`](crate::Dataset::batch) method, and the last step of
/// [`rebatch`](crate::Dataset::rebatch) and [`rebatch_sizes`](crate::Dataset::rebatch_sizes).
#[pin_project(project = BatchProj)]
#[must_use = "streams do nothing unless polled"]
pub(crate) struct Batch<St, T> {
    #[pin]
    input: Fuse<St>,
    buf: Vec<T>,
    /// The size of the batch being filled.
    size: usize,
    /// The sizes taken in turn (`rebatch_sizes`), and the index of the current one; `None`
    /// for one size.
    sizes: Option<(Arc<[usize]>, usize)>,
    drop_remainder: bool,
    /// The input's state before the first member of the batch being filled (small inputs).
    mark: Option<State>,
    /// Take marks (the input is small and can save its position).
    marking: bool,
    /// The members' positions, beside `buf` (inputs that are not small, or when a stage
    /// downstream asked for positions).
    provs: Option<Vec<Prov>>,
    /// The last batch's members' positions, when recorded.
    last: Option<Prov>,
    /// In replay: the sizes of the batches to make again.
    replay_sizes: Option<VecDeque<usize>>,
}

impl<St: Stream + Resumable, T> Batch<St, T> {
    /// A batch that keeps no marks or positions (inside stages that do not save theirs).
    pub(crate) fn plain(input: St, size: usize, drop_remainder: bool) -> Self {
        Batch {
            marking: false,
            input: input.fuse(),
            buf: Vec::with_capacity(size.min(4096)),
            size,
            sizes: None,
            drop_remainder,
            mark: None,
            provs: None,
            last: None,
            replay_sizes: None,
        }
    }

    pub(crate) fn new(input: St, size: usize, drop_remainder: bool, ctx: &Ctx) -> Self {
        let small = input.is_small();
        // Nothing is recorded over an input that cannot be saved.
        let record = (!small || ctx.provenance()) && input.resumable();
        Batch {
            marking: small && input.resumable(),
            input: input.fuse(),
            buf: Vec::with_capacity(size.min(4096)),
            size,
            sizes: None,
            drop_remainder,
            mark: None,
            provs: record.then(Vec::new),
            last: None,
            replay_sizes: None,
        }
    }

    /// Batches of `sizes[0]`, `sizes[1]`, ..., then `sizes[0]` again (none of them 0).
    pub(crate) fn cycling(input: St, sizes: Arc<[usize]>, drop_remainder: bool) -> Self {
        let mut batch = Self::plain(input, sizes[0], drop_remainder);
        batch.sizes = Some((sizes, 0));
        batch
    }

    /// The smallest and largest batch sizes.
    fn size_range(&self) -> (usize, usize) {
        match &self.sizes {
            Some((sizes, _)) => sizes
                .iter()
                .fold((usize::MAX, 0), |(lo, hi), &n| (lo.min(n), hi.max(n))),
            None => (self.size, self.size),
        }
    }
}

impl<St, T> Stream for Batch<St, T>
where
    St: Stream<Item = anyhow::Result<T>> + Resumable,
{
    type Item = anyhow::Result<Vec<T>>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let mut this = self.project();
        let size = match this.replay_sizes.as_mut() {
            Some(sizes) => match sizes.front() {
                Some(&n) => n,
                None => return Poll::Ready(None),
            },
            None => *this.size,
        };
        loop {
            if this.buf.len() == size && size > 0 {
                if let Some(sizes) = this.replay_sizes.as_mut() {
                    sizes.pop_front();
                }
                return Poll::Ready(Some(Ok(take_batch(&mut this, size))));
            }
            if this.buf.is_empty() && *this.marking && this.mark.is_none() {
                // Where this batch starts: restored from here, its members are read again.
                *this.mark = this.input.as_mut().get_pin_mut().save().ok();
            }
            match ready!(this.input.as_mut().poll_next(cx)) {
                Some(Ok(x)) => {
                    if let Some(provs) = this.provs.as_mut() {
                        match this.input.get_ref().last_prov() {
                            Ok(p) => provs.push(p),
                            Err(e) => return Poll::Ready(Some(Err(e))),
                        }
                    }
                    this.buf.push(x);
                }
                Some(Err(e)) => {
                    // As tf.data's batch: an error element fails the batch being filled, and
                    // the elements gathered into it are lost with it.
                    this.buf.clear();
                    if let Some(provs) = this.provs.as_mut() {
                        provs.clear();
                    }
                    *this.mark = None;
                    return Poll::Ready(Some(Err(e)));
                }
                None => {
                    if this.buf.is_empty() || *this.drop_remainder {
                        this.buf.clear();
                        return Poll::Ready(None);
                    }
                    let n = this.buf.len();
                    return Poll::Ready(Some(Ok(take_batch(&mut this, n))));
                }
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let (lo, hi) = self.input.size_hint();
        let pending = self.buf.len();
        // Each batch takes between the smallest and the largest size.
        let (smallest, largest) = self.size_range();
        let lo = if self.drop_remainder {
            (lo + pending) / largest
        } else {
            (lo + pending).div_ceil(largest)
        };
        let hi = hi.map(|h| (h + pending).div_ceil(smallest));
        (lo, hi)
    }
}

/// Hands over the gathered batch (and its members' positions, when recorded).
fn take_batch<St, T>(this: &mut BatchProj<'_, St, T>, capacity: usize) -> Vec<T> {
    *this.mark = None;
    if let Some((sizes, i)) = this.sizes {
        *i = (*i + 1) % sizes.len();
        *this.size = sizes[*i];
    }
    if let Some(provs) = this.provs.as_mut() {
        *this.last = Some(Prov::Group(
            std::mem::take(provs),
            smallvec::SmallVec::new(),
        ));
    }
    std::mem::replace(this.buf, Vec::with_capacity(capacity.min(4096)))
}

impl<St: Resumable, T> Resumable for Batch<St, T> {
    fn save(self: Pin<&mut Self>) -> anyhow::Result<State> {
        let this = self.project();
        let input = this.input.get_pin_mut();
        if !input.is_small() {
            // The members gathered so far, then what a restored input has still to replay.
            let mut held = this.provs.clone().unwrap_or_default();
            held.extend(input.pending());
            return Ok(State::new(STAGE).held(held).input(input.save()?));
        }
        let from = match this.mark {
            Some(mark) if !this.buf.is_empty() => mark.clone(),
            _ => input.save()?,
        };
        Ok(State::new(STAGE).input(from))
    }

    fn last_prov(&self) -> anyhow::Result<Prov> {
        self.last
            .clone()
            .ok_or_else(|| unsupported(STAGE, "the positions of its batches were not recorded"))
    }

    fn is_small(&self) -> bool {
        self.input.get_ref().is_small()
    }

    fn resumable(&self) -> bool {
        self.input.get_ref().resumable()
    }
}
