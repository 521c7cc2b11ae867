//! Saved state: while an epoch fills the cache, `[0, the epoch's number, 1 if the fill has met
//! no error yet]`, the input's state
//! and the input's state from before the fill's first element (input 1); once the cache is
//! filled, `[1, index of the next element, the number of the epoch that filled it]` and the
//! input's state from before that fill (input 0). The cached elements are not saved: a
//! restore in a process whose cache is empty fills it again from that state (the whole input
//! is read once more before the first element).
//!
//! Positions: while filling, the input's (keyed 0); reading, the position the element had
//! when the cache was filled, keyed by that fill's epoch and 1 (kept beside the cached
//! elements when positions are asked for): a replay reads it from the input again, as that
//! epoch, and needs no cached element.

use std::pin::Pin;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::task::{Context, Poll, ready};

use futures::stream::Stream;

use crate::checkpoint::{Prov, State};
use crate::engine::Unkeyed;
use crate::engine::error_stream;
use crate::engine::{BoxStream, Cardinality, Ctx, Dataset, Input, Operation, Replay, Start};
use crate::engine::{Resumable, Routed, replayed, unsupported};
use crate::runtime::Coop;

const STAGE: &str = "cache";

/// A recipe's cache, shared by its epochs.
struct Store<T> {
    filled: OnceLock<Filled<T>>,
    /// Where the next fill starts (the input's state, and the epoch): an epoch that filled
    /// the cache was restored from a checkpoint, so its elements from before the checkpoint
    /// are missing, and the epochs after it fill the cache as it would have.
    fill_from: Mutex<Option<(State, u64)>>,
}

/// The cached elements (and their positions, when recorded), the input's state their fill
/// started from, and its epoch.
struct Filled<T> {
    items: Arc<[T]>,
    provs: Option<Arc<[Prov]>>,
    start: Option<State>,
    epoch: u64,
}

/// The [`cache`](crate::Dataset::cache) operation: its store, shared by the recipe's epochs
/// (each `cache()` call makes its own).
pub(crate) struct Cache<T> {
    store: Unkeyed<Arc<Store<T>>>,
}

crate::engine::keyed_fields!(impl[T] Cache<T> { keyed: [], unkeyed: [store] });

impl<T> Cache<T> {
    pub(crate) fn new() -> Self {
        Cache {
            store: Unkeyed(Arc::new(Store {
                filled: OnceLock::new(),
                fill_from: Mutex::new(None),
            })),
        }
    }
}

impl<T: Clone + Send + Sync + 'static> Operation<T> for Cache<T> {
    type Out = T;
    type Stream = CacheStream<T>;
    const NAME: &'static str = STAGE;

    fn cardinality(&self, input: Cardinality) -> Cardinality {
        input
    }

    /// See [`build`]: the start is the context's.
    fn open(&self, ctx: &Ctx, input: Input<'_, T>, _: Start<'_>) -> anyhow::Result<Self::Stream> {
        let mode = build(ctx, input.dataset(), &self.store)?;
        let store = Arc::clone(&self.store);
        Ok(CacheStream { mode, store })
    }

    fn replay(&self, ctx: &Ctx, input: Input<'_, T>, provs: &Arc<[Prov]>) -> Replay<T> {
        replayed(replay(ctx, input.dataset(), provs))
    }
}

/// The cache of one epoch in replay: each position's last word says whether it is the
/// input's or an index in the cache.
fn replay<T: Send + 'static>(
    ctx: &Ctx,
    input: &Dataset<T>,
    provs: &Arc<[Prov]>,
) -> anyhow::Result<Routed<T>> {
    Routed::new(provs, 2, STAGE, |i, list| {
        if i == 0 {
            return input.build(&ctx.for_input(0).with_replay(list));
        }
        // Positions the elements had when the cache was filled, in that fill's epoch.
        let split: anyhow::Result<(Vec<u64>, Vec<Prov>)> = list
            .iter()
            .map(|p| p.split_key())
            .map(|r| {
                let (epoch, inner) = r?;
                Ok((epoch.single()?, inner))
            })
            .collect();
        match split {
            Ok((epochs, inners)) => match epochs.first() {
                Some(&epoch) if epochs.iter().all(|&e| e == epoch) => {
                    input.build(&ctx.fresh().with_epoch(epoch).with_replay(inners.into()))
                }
                _ => error_stream(unsupported(STAGE, "saved positions of two fills")),
            },
            Err(e) => error_stream(e),
        }
    })
}

/// The cache of one epoch: reading the filled cache, or filling it (afresh, or from the
/// start of a restored fill); or restored (filling, or reading at an index, after filling
/// the cache again if it is empty).
fn build<T: Clone + Send + Sync + 'static>(
    ctx: &Ctx,
    input: &Dataset<T>,
    store: &Arc<Store<T>>,
) -> anyhow::Result<Mode<T>> {
    let record = !input.is_small() || ctx.provenance();
    if let Some(state) = ctx.restoring() {
        if state.word(0)? == 1 {
            return read_at(ctx, input, store, state, record);
        }
        // Filling: go on with the input; the elements from before the checkpoint are not
        // here, so this epoch leaves no cache. If its input ends (the fill would have been
        // whole), the next epoch fills it as this one would have; if the epoch stops first
        // (a `take` downstream), no epoch would have filled it, and the next fills afresh.
        let epoch = state.word(1)?;
        // Whether the fill had met no error before the checkpoint: one that had leaves no
        // cache nor a start to fill it from, restored or not.
        let clean = state.word(2)? == 1;
        let start = state.inputs.get(1).cloned();
        // As the fill ran: in its epoch (a fill that went on from an earlier epoch's start,
        // after a restore, draws as that epoch did).
        return Ok(Mode::Fill {
            input: input.build(&ctx.for_input(0).with_epoch(epoch)),
            items: Vec::new(),
            provs: None,
            clean: false,
            resumed: clean,
            start,
            epoch,
        });
    }
    if let Some(filled) = store.filled.get() {
        return Ok(reading(filled, 0));
    }
    let from = lock(&store.fill_from).clone();
    let (mut upstream, epoch) = match from {
        Some((start, epoch)) => {
            let ctx = ctx.fresh().with_epoch(epoch).with_restore(Some(start));
            (input.build(&ctx), epoch)
        }
        None => (input.build(ctx), ctx.epoch()),
    };
    // Where the fill starts (once per epoch), so a checkpoint taken after it can fill the
    // cache again elsewhere.
    let start = if input.is_resumable() {
        upstream.as_mut().save().ok()
    } else {
        None
    };
    Ok(Mode::Fill {
        input: upstream,
        items: Vec::new(),
        provs: (record && input.is_resumable()).then(Vec::new),
        clean: true,
        resumed: false,
        start,
        epoch,
    })
}

/// Reading the filled cache from index `state.word(1)`: from the store when it holds the
/// fill `state` names, else after filling it again from that fill's start.
fn read_at<T: Clone + Send + Sync + 'static>(
    ctx: &Ctx,
    input: &Dataset<T>,
    store: &Arc<Store<T>>,
    state: &State,
    record: bool,
) -> anyhow::Result<Mode<T>> {
    let (next, start, epoch) = (state.word(1)?, state.input_state(0)?, state.word(2)?);
    let next = usize::try_from(next).unwrap_or(usize::MAX);
    if let Some(filled) = store.filled.get()
        && filled.start.as_ref() == Some(start)
        && filled.epoch == epoch
    {
        return Ok(reading(filled, next));
    }
    let mut ctx = ctx
        .fresh()
        .with_epoch(epoch)
        .with_restore(Some(start.clone()));
    if record {
        ctx = ctx.with_provenance();
    }
    Ok(Mode::Load {
        input: input.build(&ctx),
        items: Vec::new(),
        provs: record.then(Vec::new),
        start: start.clone(),
        epoch,
        next,
    })
}

fn reading<T>(filled: &Filled<T>, next: usize) -> Mode<T> {
    Mode::Read {
        items: Arc::clone(&filled.items),
        provs: filled.provs.clone(),
        next,
        start: filled.start.clone(),
        epoch: filled.epoch,
        coop: Coop::default(),
    }
}

/// Records the position of the element `input` just yielded (or, when it cannot say, stops:
/// its elements cannot be placed then).
fn record<T>(provs: &mut Option<Vec<Prov>>, input: &BoxStream<T>) {
    if let Some(list) = provs.as_mut() {
        match input.last_prov() {
            Ok(p) => list.push(p),
            Err(_) => *provs = None,
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

enum Mode<T> {
    /// Passing the input's elements on and keeping a copy, published only when the input
    /// ends without an error (and `clean`: this epoch saw all of them).
    Fill {
        input: BoxStream<T>,
        items: Vec<T>,
        /// The elements' positions (when asked for, or the input is not small).
        provs: Option<Vec<Prov>>,
        clean: bool,
        /// It goes on with a fill a checkpoint interrupted, with no error before nor since.
        resumed: bool,
        /// The input's state before the fill's first element, and the fill's epoch.
        start: Option<State>,
        epoch: u64,
    },
    /// Filling the cache again (a restore in a process whose cache is empty), before reading.
    Load {
        input: BoxStream<T>,
        items: Vec<T>,
        provs: Option<Vec<Prov>>,
        start: State,
        epoch: u64,
        /// The index to read on from.
        next: usize,
    },
    /// Reading the filled cache (its fill's start and epoch kept for checkpoints).
    Read {
        items: Arc<[T]>,
        provs: Option<Arc<[Prov]>>,
        next: usize,
        start: Option<State>,
        epoch: u64,
        coop: Coop,
    },
    /// Filling again to resume met an error: it was passed on, and the epoch ends.
    Failed,
}

/// Stream for the [`cache`](crate::Dataset::cache) method.
#[must_use = "streams do nothing unless polled"]
pub(crate) struct CacheStream<T> {
    mode: Mode<T>,
    store: Arc<Store<T>>,
}

// Nothing is pinned in place: the input is a boxed stream, the elements sit in vectors.
impl<T> Unpin for CacheStream<T> {}

impl<T: Clone + Send + Sync + 'static> Stream for CacheStream<T> {
    type Item = anyhow::Result<T>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            match &mut this.mode {
                Mode::Fill {
                    input,
                    items,
                    provs,
                    clean,
                    resumed,
                    start,
                    epoch,
                } => {
                    let item = ready!(input.as_mut().poll_next(cx));
                    match &item {
                        Some(Ok(x)) if *clean => {
                            items.push(x.clone());
                            record(provs, input);
                        }
                        Some(Ok(_)) => {}
                        Some(Err(_)) => {
                            *clean = false;
                            *resumed = false;
                            items.clear();
                        }
                        None if *clean => {
                            // Another epoch may have filled it first; both copies are complete.
                            let _ = this.store.filled.set(Filled {
                                items: std::mem::take(items).into(),
                                provs: provs.take().map(Into::into),
                                start: start.clone(),
                                epoch: *epoch,
                            });
                        }
                        None => {
                            if *resumed
                                && let Some(start) = start
                                && this.store.filled.get().is_none()
                            {
                                *lock(&this.store.fill_from) = Some((start.clone(), *epoch));
                            }
                        }
                    }
                    return Poll::Ready(item);
                }
                Mode::Load {
                    input,
                    items,
                    provs,
                    start,
                    epoch,
                    next,
                } => {
                    while let Some(item) = ready!(input.as_mut().poll_next(cx)) {
                        match item {
                            Ok(x) => {
                                items.push(x);
                                record(provs, input);
                            }
                            Err(e) => {
                                this.mode = Mode::Failed;
                                return Poll::Ready(Some(Err(e.context(
                                    "cache: filling the cache again to resume from a checkpoint",
                                ))));
                            }
                        }
                    }
                    let filled = Filled {
                        items: std::mem::take(items).into(),
                        provs: provs.take().map(Into::into),
                        start: Some(start.clone()),
                        epoch: *epoch,
                    };
                    this.mode = reading(&filled, *next);
                    let _ = this.store.filled.set(filled);
                }
                Mode::Read {
                    items, next, coop, ..
                } => {
                    ready!(coop.poll_proceed(cx));
                    let item = items.get(*next).cloned();
                    if item.is_some() {
                        *next += 1;
                    }
                    return Poll::Ready(item.map(Ok));
                }
                Mode::Failed => return Poll::Ready(None),
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        match &self.mode {
            Mode::Read { items, next, .. } => {
                let n = items.len().saturating_sub(*next);
                (n, Some(n))
            }
            Mode::Fill { input, .. } => input.size_hint(),
            _ => (0, None),
        }
    }
}

/// Saved state: see the module doc.
impl<T: Send + 'static> Resumable for CacheStream<T> {
    fn save(self: Pin<&mut Self>) -> anyhow::Result<State> {
        match &mut self.get_mut().mode {
            Mode::Fill {
                input,
                start,
                epoch,
                clean,
                resumed,
                ..
            } => {
                let state = State::new(STAGE)
                    .words([0, *epoch, u64::from(*clean || *resumed)])
                    .input(input.as_mut().save()?);
                Ok(match start {
                    Some(start) => state.input(start.clone()),
                    None => state,
                })
            }
            Mode::Read {
                next, start, epoch, ..
            } => {
                let start = start.clone().ok_or_else(|| {
                    unsupported(
                        STAGE,
                        "the state its input's fill started from could not be saved",
                    )
                })?;
                Ok(State::new(STAGE)
                    .words([1, *next as u64, *epoch])
                    .input(start))
            }
            _ => Err(unsupported(STAGE, "it ended with an error")),
        }
    }

    /// While filling, the input's position (tagged 0); reading, the index (tagged 1).
    fn last_prov(&self) -> anyhow::Result<Prov> {
        match &self.mode {
            Mode::Fill { input, .. } => input.last_prov()?.keyed(&Prov::at(0)),
            Mode::Read {
                provs, next, epoch, ..
            } => {
                let prov = provs
                    .as_ref()
                    .and_then(|p| p.get(next.checked_sub(1)?))
                    .ok_or_else(|| {
                        unsupported(STAGE, "the positions of its elements were not recorded")
                    })?;
                prov.clone().keyed(&Prov::at(*epoch))?.keyed(&Prov::at(1))
            }
            _ => Err(unsupported(STAGE, "no element yielded yet")),
        }
    }
}
