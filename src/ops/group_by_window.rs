//! Saved state: `[1 once the input has ended (else 0), m: the elements of the window whose
//! reduced dataset is being read (0: none), their m offsets among the elements held
//! (`Hold::offsets`)]`, then the windows' elements as `engine::Hold` saves them (a mark is
//! taken every 32 elements); input 1: the reduced dataset's state. After a restore the hold
//! hands the elements back: those at the m offsets make the window being read again (its
//! reduced dataset restored), the others go into their windows.

use std::collections::{BTreeMap, VecDeque};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use futures::stream::Stream;

use crate::Error;
use crate::checkpoint::{Prov, State};
use crate::engine::hold::{Group, MARK_EVERY};
use crate::engine::{
    BoxStream, Cardinality, Ctx, Dataset, Input, Members, Operation, Start, Unkeyed, error_stream,
};
use crate::engine::{Hold, Replay};
use crate::engine::{Resumable, unsupported};
use crate::runtime::catch_panic;

const STAGE: &str = "group_by_window";

/// The user functions of a [`group_by_window`](crate::Dataset::group_by_window_with) stage.
pub(crate) struct Funcs<KF, RF, WF> {
    pub(crate) key: KF,
    pub(crate) reduce: RF,
    pub(crate) window_size: WF,
}

/// The [`group_by_window`](crate::Dataset::group_by_window) operation: its window size is
/// keyed (`None` for [`group_by_window_with`](crate::Dataset::group_by_window_with), whose
/// size comes from a function).
pub(crate) struct GroupByWindow<KF, RF, WF> {
    pub(crate) window_size: Option<usize>,
    pub(crate) funcs: Unkeyed<Arc<Funcs<KF, RF, WF>>>,
}

crate::engine::keyed_fields!(impl[KF, RF, WF] GroupByWindow<KF, RF, WF> { keyed: [window_size], unkeyed: [funcs] });

impl<T, K, U, KF, RF, WF> Operation<T> for GroupByWindow<KF, RF, WF>
where
    T: Clone + Send + Sync + 'static,
    K: Ord + Clone + Send + Sync + 'static,
    U: Send + 'static,
    KF: Fn(&T) -> K + Send + Sync + 'static,
    RF: Fn(K, Dataset<T>) -> Dataset<U> + Send + Sync + 'static,
    WF: Fn(&K) -> usize + Send + Sync + 'static,
{
    type Out = U;
    type Stream = Windows<T, K, U, KF, RF, WF>;
    const NAME: &'static str = "group_by_window";

    fn cardinality(&self, _: Cardinality) -> Cardinality {
        Cardinality::Unknown
    }

    /// Fresh, or restored: see [`build`].
    fn open(&self, ctx: &Ctx, input: Input<'_, T>, _: Start<'_>) -> anyhow::Result<Self::Stream> {
        build(ctx, input.dataset(), &self.funcs)
    }

    /// Each position is its reduced dataset's element's, keyed by the group of the window's
    /// elements' positions: the windows are made again from their members (as batches are)
    /// and reduced again, as an interleave replays its inner datasets.
    fn replay(&self, ctx: &Ctx, input: Input<'_, T>, _: &Arc<[Prov]>) -> Replay<U> {
        let (input, funcs, nested) = (input.dataset(), &self.funcs, ctx.nested().fresh());
        let windows = |ctx: &Ctx| -> BoxStream<Vec<T>> {
            let replay = |members| input.build(&ctx.with_replay(members));
            match ctx
                .replaying()
                .map(|provs| Members::new(provs, STAGE, None, replay))
            {
                Some(Ok(windows)) => Box::pin(windows),
                Some(Err(e)) => error_stream(e),
                None => error_stream(unsupported(STAGE, "not in replay")),
            }
        };
        let reduce_funcs = Arc::clone(funcs);
        let reduce = Arc::new(move |window: Vec<T>| {
            // A saved window is never empty; were it, the panic is caught as an error.
            let key = (reduce_funcs.key)(&window[0]);
            (reduce_funcs.reduce)(key, crate::source::from_iter::from_vec(window))
        });
        Some(Ok(crate::ops::interleave::replay_with(
            ctx, &windows, &reduce, nested, STAGE,
        )))
    }
}

/// The stream of a group_by_window over these functions.
type Windows<T, K, U, KF, RF, WF> = GroupByWindowStream<T, K, U, Funcs<KF, RF, WF>>;

/// The group_by_window of one epoch: fresh, or restored (the window being read at the
/// checkpoint read again and its reduced dataset restored).
fn build<T, K, U, KF, RF, WF>(
    ctx: &Ctx,
    input: &Dataset<T>,
    funcs: &Arc<Funcs<KF, RF, WF>>,
) -> anyhow::Result<Windows<T, K, U, KF, RF, WF>>
where
    T: Clone + Send + Sync + 'static,
    K: Ord + Clone,
    U: Send + 'static,
    KF: Fn(&T) -> K + Send + Sync + 'static,
    RF: Fn(K, Dataset<T>) -> Dataset<U> + Send + Sync + 'static,
    WF: Fn(&K) -> usize + Send + Sync + 'static,
{
    // The reduced datasets are built afresh (the window being read at a checkpoint is
    // restored from its own saved state).
    let nested = ctx.nested().fresh();
    let (build, answers) = (|ctx: &Ctx| input.build(ctx), input.answers(ctx));
    let (mut hold, restoring) = match ctx.restoring() {
        None => (Hold::open(ctx, &build, answers, false, STAGE, 0)?, None),
        Some(state) => {
            // The input ends again where it had ended: `[ended]` says no more than that.
            state.word(0)?;
            let m = state.word(1)? as usize;
            let current = Restoring {
                left: m,
                offsets: (0..m)
                    .map(|i| state.word(2 + i))
                    .collect::<anyhow::Result<_>>()?,
                items: Vec::with_capacity(m),
                inner: (m > 0).then(|| state.input_state(1).cloned()).transpose()?,
            };
            let hold = Hold::open(ctx, &build, answers, false, STAGE, 2 + m)?;
            (hold, Some(current))
        }
    };
    hold.marking_every(MARK_EVERY);
    let mut gbw = GroupByWindowStream::new(hold, Arc::clone(funcs), nested, ctx.provenance());
    gbw.restoring = restoring;
    Ok(gbw)
}

/// A window still filling, with its elements as a checkpoint places them.
struct Window<T> {
    items: Vec<T>,
    members: Group,
}

/// After a restore: the window whose reduced dataset was being read, gathered again.
struct Restoring<T> {
    /// Its elements still to gather.
    left: usize,
    /// Their offsets among the elements held (see [`Hold::offsets`]).
    offsets: VecDeque<u64>,
    items: Vec<T>,
    /// The reduced dataset's saved state.
    inner: Option<State>,
}

/// Stream for the [`group_by_window`](crate::Dataset::group_by_window) and
/// [`group_by_window_with`](crate::Dataset::group_by_window_with) methods.
#[must_use = "streams do nothing unless polled"]
pub(crate) struct GroupByWindowStream<T, K, U, F> {
    hold: Hold<T>,
    funcs: Arc<F>,
    ctx: Ctx,
    windows: BTreeMap<K, Window<T>>,
    /// The reduced dataset being drained.
    current: Option<BoxStream<U>>,
    /// Its window's elements, as a checkpoint places them.
    current_members: Group,
    input_done: bool,
    /// After a restore: the window being read, gathered again.
    restoring: Option<Restoring<T>>,
    /// The last element yielded is an error of the input (`Some`), at its position there (if
    /// recorded): see `interleave::input_error_position`.
    input_error: Option<Option<Prov>>,
}

// Nothing is pinned in place: the input and the reduced datasets are boxed streams.
impl<T, K, U, F> Unpin for GroupByWindowStream<T, K, U, F> {}

impl<T, K, U, KF, RF, WF> GroupByWindowStream<T, K, U, Funcs<KF, RF, WF>>
where
    T: Clone + Send + Sync + 'static,
    K: Ord + Clone,
    U: Send + 'static,
    KF: Fn(&T) -> K,
    RF: Fn(K, Dataset<T>) -> Dataset<U>,
    WF: Fn(&K) -> usize,
{
    /// `provenance`: a stage downstream asked for positions.
    pub(crate) fn new(
        hold: Hold<T>,
        funcs: Arc<Funcs<KF, RF, WF>>,
        ctx: Ctx,
        provenance: bool,
    ) -> Self {
        let small = hold.is_small();
        GroupByWindowStream {
            hold,
            funcs,
            // The reduced datasets say where their elements come from when asked, or when a
            // stage downstream holds them by position without asking (an input not small).
            ctx: if provenance || !small {
                ctx.with_provenance()
            } else {
                ctx
            },
            windows: BTreeMap::new(),
            current: None,
            current_members: Group::default(),
            input_done: false,
            restoring: None,
            input_error: None,
        }
    }

    /// Reduces a window; its dataset is read next (restored from `inner`, if given).
    fn reduce(&mut self, key: K, window: Window<T>, inner: Option<State>) -> anyhow::Result<()> {
        self.current_members = window.members;
        let reduce = &self.funcs.reduce;
        let ds = catch_panic(STAGE, || {
            Ok(reduce(
                key,
                crate::source::from_iter::from_vec(window.items),
            ))
        })?;
        let ctx = match inner {
            Some(inner) => self.ctx.with_restore(Some(inner)),
            None => self.ctx.clone(),
        };
        self.current = Some(ds.build(&ctx));
        Ok(())
    }

    /// The key of `x`.
    fn key(funcs: &Funcs<KF, RF, WF>, x: &T) -> anyhow::Result<K> {
        catch_panic(STAGE, || Ok((funcs.key)(x)))
    }

    /// Puts `x`, the element the hold just handed out, in its key's window, and reduces the
    /// window once it is full (unless it was held at the checkpoint: its window was not).
    fn add(&mut self, x: T) -> anyhow::Result<()> {
        let funcs = &*self.funcs;
        let key = Self::key(funcs, &x)?;
        let size = catch_panic(STAGE, || Ok((funcs.window_size)(&key)))?;
        if size == 0 {
            return Err(Error::InvalidArgument(
                "group_by_window: Window size must be greater than zero, but got 0.".into(),
            )
            .into());
        }
        let window = self.windows.entry(key.clone()).or_insert_with(|| Window {
            items: Vec::new(),
            members: Group::default(),
        });
        self.hold.add_to(&mut window.members);
        window.items.push(x);
        // `>=`: a window size function may answer less for a key than it did before.
        if window.items.len() >= size
            && !self.hold.again()
            && let Some(window) = self.windows.remove(&key)
        {
            self.reduce(key, window, None)?;
        }
        Ok(())
    }

    /// After a restore: an element held at the checkpoint, back in its window (or in the
    /// window that was being read).
    fn add_again(&mut self, x: T) -> anyhow::Result<()> {
        if let Some(current) = self.restoring.as_mut()
            && current.offsets.front() == Some(&self.hold.index())
        {
            current.offsets.pop_front();
            current.left -= 1;
            current.items.push(x);
            self.hold.add_to(&mut self.current_members);
            return Ok(());
        }
        self.add(x)
    }

    /// After a restore: once everything held is back, the window that was being read is
    /// reduced again, its dataset restored.
    fn restored(&mut self) -> anyhow::Result<()> {
        let Some(current) = self.restoring.take() else {
            return Ok(());
        };
        let Some(first) = current.items.first() else {
            return Ok(());
        };
        if current.left > 0 {
            return Err(Error::Checkpoint(
                "the window being read at the checkpoint could not be read again".into(),
            )
            .into());
        }
        let key = Self::key(&self.funcs, first)?;
        let members = std::mem::take(&mut self.current_members);
        let window = Window {
            items: current.items,
            members,
        };
        self.reduce(key, window, current.inner)
    }
}

impl<T, K, U, KF, RF, WF> Stream for GroupByWindowStream<T, K, U, Funcs<KF, RF, WF>>
where
    T: Clone + Send + Sync + 'static,
    K: Ord + Clone,
    U: Send + 'static,
    KF: Fn(&T) -> K,
    RF: Fn(K, Dataset<T>) -> Dataset<U>,
    WF: Fn(&K) -> usize,
{
    type Item = anyhow::Result<U>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if this.restoring.is_some() {
            // The elements held at the checkpoint, in their windows, then the window that was
            // being read.
            while let Some(item) = ready!(this.hold.poll_again(cx)) {
                if let Err(e) = item.and_then(|x| this.add_again(x)) {
                    return Poll::Ready(Some(Err(e)));
                }
            }
            if let Err(e) = this.restored() {
                return Poll::Ready(Some(Err(e)));
            }
        }
        loop {
            if let Some(current) = &mut this.current {
                match ready!(current.as_mut().poll_next(cx)) {
                    Some(item) => {
                        this.input_error = None;
                        return Poll::Ready(Some(item));
                    }
                    None => {
                        this.current = None;
                        this.current_members.take();
                        let groups = this.windows.values().map(|w| &w.members);
                        this.hold.release_groups(groups);
                    }
                }
            }
            if this.input_done {
                // Flush unfinished windows in ascending key order, as tf.data does.
                let Some((key, window)) = this.windows.pop_first() else {
                    return Poll::Ready(None);
                };
                if let Err(e) = this.reduce(key, window, None) {
                    return Poll::Ready(Some(Err(e)));
                }
                continue;
            }
            match ready!(this.hold.poll_next(cx)) {
                // An error of the input passes on at once, at its own position.
                Some(Err(e)) => {
                    this.input_error = Some(this.hold.prov());
                    return Poll::Ready(Some(Err(e)));
                }
                Some(Ok(x)) => {
                    if let Err(e) = this.add(x) {
                        this.input_error = Some(None);
                        return Poll::Ready(Some(Err(e)));
                    }
                }
                None => this.input_done = true,
            }
        }
    }
}

/// Saved state: see the module doc.
impl<T, K, U, F> Resumable for GroupByWindowStream<T, K, U, F> {
    fn save(self: Pin<&mut Self>) -> anyhow::Result<State> {
        let this = self.get_mut();
        if this.restoring.is_some() {
            return Err(unsupported(
                STAGE,
                "a checkpoint before its first element after a restore",
            ));
        }
        let groups =
            std::iter::once(&this.current_members).chain(this.windows.values().map(|w| &w.members));
        let offsets = match &this.current {
            Some(_) => this.hold.offsets(&this.current_members, groups.clone()),
            None => Vec::new(),
        };
        let state = State::new(STAGE)
            .words([u64::from(this.input_done), offsets.len() as u64])
            .words(offsets);
        let mut state = this.hold.save_groups(state, groups)?;
        if let Some(current) = this.current.as_mut() {
            state = state.input(current.as_mut().save()?);
        }
        Ok(state)
    }

    /// The reduced dataset's element's position, keyed by the group of its window's
    /// elements' positions.
    fn last_prov(&self) -> anyhow::Result<Prov> {
        if let Some(at) = &self.input_error {
            // Replayed as a window of it alone: the error again (the batch of the windows'
            // replay passes it on in the window's place).
            let window = at.as_ref().map(|p| Prov::group(vec![p.clone()]));
            return crate::ops::interleave::input_error_position(window.as_ref(), STAGE);
        }
        let current = self
            .current
            .as_ref()
            .ok_or_else(|| unsupported(STAGE, "no element yielded yet"))?;
        if !self.hold.recording() {
            self.hold.last_prov()?;
            return Err(unsupported(
                STAGE,
                "the positions of its windows' elements were not recorded",
            ));
        }
        current
            .last_prov()?
            .keyed(&Prov::group(self.current_members.provs().to_vec()))
    }
}
