use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use futures::stream::{Fuse, Stream, StreamExt};
use pin_project::pin_project;

use crate::checkpoint::{Prov, State};
use crate::engine::{BoxStream, Cardinality, Ctx, Input, Operation, Start, error_stream};
use crate::engine::{Resumable, StageStream, unsupported};

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

/// The [`batch`](crate::Dataset::batch) operation: `size` elements at a time, the last
/// batch shorter unless `drop_remainder`.
#[derive(Hash)]
pub(crate) struct Batch {
    pub(crate) size: usize,
    pub(crate) drop_remainder: bool,
}

impl<T: Send + 'static> Operation<T> for Batch {
    type Out = Vec<T>;
    type Stream = BatchStream<BoxStream<T>, T>;
    const NAME: &'static str = STAGE;

    fn cardinality(&self, input: Cardinality) -> Cardinality {
        cardinality(input, self.size as u64, self.drop_remainder)
    }

    /// See [`build_with`]: the start is the context's.
    fn open(&self, ctx: &Ctx, input: Input<'_, T>, _: Start<'_>) -> anyhow::Result<Self::Stream> {
        let config = Config {
            sizes: Sizes::One(self.size),
            drop_remainder: self.drop_remainder,
            stage: STAGE,
        };
        let dataset = input.dataset();
        Ok(build_with(
            ctx,
            &|ctx: &Ctx| dataset.build(ctx),
            error_stream,
            config,
        ))
    }
}

/// How a batching stage groups its input.
pub(crate) struct Config {
    pub(crate) sizes: Sizes,
    pub(crate) drop_remainder: bool,
    /// The stage's name in its saved state (`batch`, `padded_batch`, `rebatch`, ...).
    pub(crate) stage: &'static str,
}

/// One batch size, or sizes taken in turn (`rebatch_sizes`; none of them 0).
#[derive(Clone)]
pub(crate) enum Sizes {
    One(usize),
    Cycle(Arc<[usize]>),
}

/// The batch stream of one epoch over the stream `input` makes for a context: fresh, restored,
/// or replaying saved batches (`on_error` makes an input that yields an error and ends).
///
/// Saved state (`[size index]` first when the sizes cycle): over a small input (see
/// `Resumable::is_small`), the input's state from before the batch being filled (its members
/// are read again after a restore); over an input that holds elements by position (a
/// shuffle), the positions of the members gathered so far (`held`) and the input's state now.
pub(crate) fn build_with<T, S>(
    ctx: &Ctx,
    input: &dyn Fn(&Ctx) -> S,
    on_error: fn(anyhow::Error) -> S,
    config: Config,
) -> BatchStream<S, T>
where
    T: Send + 'static,
    S: StageStream<T> + 'static,
{
    if let Some(provs) = ctx.replaying() {
        // Each saved batch is the group of its members' positions.
        let mut members = Vec::new();
        let mut sizes = VecDeque::new();
        for prov in provs.iter() {
            match prov {
                Prov::Group(group, w) if w.is_empty() => {
                    sizes.push_back(group.len());
                    members.extend(group.iter().cloned());
                }
                other => {
                    let e = unsupported(
                        config.stage,
                        &format!("saved batch is not a group: {other:?}"),
                    );
                    return BatchStream::new(on_error(e), config, ctx);
                }
            }
        }
        let config = Config {
            drop_remainder: false,
            ..config
        };
        let mut batch = BatchStream::new(
            input(&ctx.for_input(0).with_replay(members.into())),
            config,
            ctx,
        );
        batch.replay_sizes = Some(sizes);
        return batch;
    }
    let Some(state) = ctx.restoring() else {
        return BatchStream::new(input(ctx), config, ctx);
    };
    let cycling = matches!(config.sizes, Sizes::Cycle(_));
    let turn = match cycling.then(|| state.word(0)).transpose() {
        Ok(turn) => turn,
        Err(e) => return BatchStream::new(on_error(e), config, ctx),
    };
    let restored = input(&ctx.for_input(0));
    let mut batch = BatchStream::new(restored, config, ctx);
    if let (Some(turn), Some((sizes, i))) = (turn, batch.sizes.as_mut()) {
        *i = turn as usize % sizes.len();
        batch.size = sizes[*i];
    }
    if !state.held.is_empty() {
        // The members gathered before the checkpoint, read again at their positions.
        let refill: BoxStream<T> = Box::pin(input(
            &ctx.for_input(0).with_replay(state.held.clone().into()),
        ));
        batch.refill = Some(refill.fuse());
    }
    batch
}

/// Stream for the [`batch`](crate::Dataset::batch) method, and the batching step of
/// [`padded_batch`](crate::Dataset::padded_batch), [`ragged_batch`](crate::Dataset::ragged_batch),
/// [`rebatch`](crate::Dataset::rebatch) and [`rebatch_sizes`](crate::Dataset::rebatch_sizes).
#[pin_project(project = BatchProj)]
#[must_use = "streams do nothing unless polled"]
pub(crate) struct BatchStream<St, T> {
    #[pin]
    input: Fuse<St>,
    buf: Vec<T>,
    /// The size of the batch being filled.
    size: usize,
    /// The sizes taken in turn (`rebatch_sizes`), and the index of the current one; `None`
    /// for one size.
    sizes: Option<(Arc<[usize]>, usize)>,
    drop_remainder: bool,
    stage: &'static str,
    /// The input's state before the first member of the batch being filled (small inputs).
    mark: Option<State>,
    /// Take marks (the input is small and can save its position).
    marking: bool,
    /// The members' positions, beside `buf` (inputs that are not small, or when a stage
    /// downstream asked for positions); `None` also once the input could not say.
    provs: Option<Vec<Prov>>,
    /// The last batch's members' positions, when recorded.
    last: Option<Prov>,
    /// After a restore: the members saved by position, read again before anything else.
    refill: Option<Fuse<BoxStream<T>>>,
    /// In replay: the sizes of the batches to make again.
    replay_sizes: Option<VecDeque<usize>>,
}

impl<St: Stream + Resumable, T> BatchStream<St, T> {
    pub(crate) fn new(input: St, config: Config, ctx: &Ctx) -> Self {
        let small = input.is_small();
        let record = !small || ctx.provenance();
        let (size, sizes) = match config.sizes {
            Sizes::One(n) => (n, None),
            Sizes::Cycle(sizes) => (sizes[0], Some((sizes, 0))),
        };
        BatchStream {
            marking: small && input.resumable(),
            input: input.fuse(),
            buf: Vec::with_capacity(size.min(4096)),
            size,
            sizes,
            drop_remainder: config.drop_remainder,
            stage: config.stage,
            mark: None,
            provs: record.then(Vec::new),
            last: None,
            refill: None,
            replay_sizes: None,
        }
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

impl<St, T> Stream for BatchStream<St, T>
where
    St: Stream<Item = anyhow::Result<T>> + Resumable,
{
    type Item = anyhow::Result<Vec<T>>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let mut this = self.project();
        if let Some(refill) = this.refill {
            // The members gathered before the checkpoint come first.
            loop {
                match ready!(refill.poll_next_unpin(cx)) {
                    Some(Ok(x)) => {
                        if let Some(provs) = this.provs.as_mut() {
                            match refill.get_ref().last_prov() {
                                Ok(p) => provs.push(p),
                                Err(_) => *this.provs = None,
                            }
                        }
                        this.buf.push(x);
                    }
                    Some(Err(e)) => return Poll::Ready(Some(Err(e))),
                    None => break,
                }
            }
            *this.refill = None;
        }
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
            if this.provs.is_none() {
                // No positions recorded (the common case): gather until the batch is full,
                // with nothing else done per element.
                loop {
                    match ready!(this.input.as_mut().poll_next(cx)) {
                        Some(Ok(x)) => {
                            this.buf.push(x);
                            if this.buf.len() == size {
                                break;
                            }
                        }
                        Some(Err(e)) => return Poll::Ready(Some(Err(failed(&mut this, e)))),
                        None => return Poll::Ready(ended(&mut this)),
                    }
                }
                continue;
            }
            match ready!(this.input.as_mut().poll_next(cx)) {
                Some(Ok(x)) => {
                    if let Some(provs) = this.provs.as_mut() {
                        match this.input.get_ref().last_prov() {
                            Ok(p) => provs.push(p),
                            // The input cannot say where its elements come from: no
                            // checkpoint can place this batch (`save` says why).
                            Err(_) => *this.provs = None,
                        }
                    }
                    this.buf.push(x);
                }
                Some(Err(e)) => return Poll::Ready(Some(Err(failed(&mut this, e)))),
                None => return Poll::Ready(ended(&mut this)),
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

/// An error element: as tf.data's batch, it fails the batch being filled, and the elements
/// gathered into it are lost with it.
fn failed<St: Resumable, T>(this: &mut BatchProj<'_, St, T>, e: anyhow::Error) -> anyhow::Error {
    this.buf.clear();
    if let Some(provs) = this.provs.as_mut() {
        provs.clear();
        // The error passes on in a batch's place, at its own position: as a batch of it
        // alone, made again it is that error again.
        *this.last = this
            .input
            .get_ref()
            .last_prov()
            .ok()
            .map(|p| Prov::group(vec![p]));
    }
    if let Some(sizes) = this.replay_sizes.as_mut() {
        sizes.pop_front();
    }
    *this.mark = None;
    e
}

/// The input ended: the last, partial batch unless dropped.
fn ended<St, T>(this: &mut BatchProj<'_, St, T>) -> Option<anyhow::Result<Vec<T>>> {
    if this.buf.is_empty() || *this.drop_remainder {
        this.buf.clear();
        return None;
    }
    let n = this.buf.len();
    Some(Ok(take_batch(this, n)))
}

/// Hands over the gathered batch (and its members' positions, when recorded).
fn take_batch<St, T>(this: &mut BatchProj<'_, St, T>, capacity: usize) -> Vec<T> {
    *this.mark = None;
    if let Some((sizes, i)) = this.sizes {
        *i = (*i + 1) % sizes.len();
        *this.size = sizes[*i];
    }
    *this.last = this
        .provs
        .as_mut()
        .map(|provs| Prov::group(std::mem::take(provs)));
    std::mem::replace(this.buf, Vec::with_capacity(capacity.min(4096)))
}

/// Saved state: see [`build_with`].
impl<St: Resumable, T> Resumable for BatchStream<St, T> {
    fn save(self: Pin<&mut Self>) -> anyhow::Result<State> {
        let this = self.project();
        let stage = *this.stage;
        if this.refill.is_some() {
            return Err(unsupported(
                stage,
                "a checkpoint before the first batch after a restore",
            ));
        }
        let turn = this.sizes.as_ref().map(|(_, i)| *i as u64);
        let state = State::new(stage).words(turn);
        let input = this.input.get_pin_mut();
        if !input.is_small() {
            let Some(held) = this.provs.clone() else {
                // Name the stage that cannot place its elements, when it says so.
                input.last_prov()?;
                return Err(unsupported(
                    stage,
                    "its input cannot say where its elements come from",
                ));
            };
            return Ok(state.held(held).input(input.save()?));
        }
        let from = match this.mark {
            _ if this.buf.is_empty() => input.save()?,
            Some(mark) => mark.clone(),
            None => {
                return Err(unsupported(
                    stage,
                    "its input could not save its position before the batch being filled",
                ));
            }
        };
        Ok(state.input(from))
    }

    fn last_prov(&self) -> anyhow::Result<Prov> {
        if self.last.is_none() {
            // Name the stage that cannot place its elements, when it says so.
            self.input.get_ref().last_prov()?;
        }
        self.last.clone().ok_or_else(|| {
            unsupported(self.stage, "the positions of its batches were not recorded")
        })
    }

    fn is_small(&self) -> bool {
        self.input.get_ref().is_small()
    }

    fn resumable(&self) -> bool {
        self.input.get_ref().resumable()
    }
}
