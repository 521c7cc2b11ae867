//! Saved state: `[index of the first element of the oldest window not yet passed on (or of
//! the next element, when none)]`, then every element from there on as `engine::Hold` saves
//! them (a mark is taken before each window's first element): a restore hands them back and
//! fills the windows anew (none of them was complete).

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use futures::stream::Stream;

use crate::checkpoint::{Prov, State};
use crate::engine::Resumable;
use crate::engine::replayed;
use crate::engine::{Cardinality, Ctx, Hold, Input, Members, Operation, Replay, Start};

const STAGE: &str = "window";

pub(crate) fn cardinality(
    input: Cardinality,
    size: u64,
    shift: u64,
    stride: u64,
    drop_remainder: bool,
) -> Cardinality {
    input.map_finite(|n| {
        if drop_remainder {
            let first = (size - 1).saturating_mul(stride).saturating_add(1);
            if n < first {
                0
            } else {
                (n - first) / shift + 1
            }
        } else {
            n.div_ceil(shift)
        }
    })
}

/// The [`window`](crate::Dataset::window) operation.
#[derive(Hash)]
pub(crate) struct Window {
    pub(crate) size: usize,
    pub(crate) shift: usize,
    pub(crate) stride: usize,
    pub(crate) drop_remainder: bool,
}

impl<T: Clone + Send + 'static> Operation<T> for Window {
    type Out = Vec<T>;
    type Stream = WindowStream<T>;
    const NAME: &'static str = "window";

    fn cardinality(&self, input: Cardinality) -> Cardinality {
        let Window {
            size,
            shift,
            stride,
            drop_remainder,
        } = *self;
        cardinality(
            input,
            size as u64,
            shift as u64,
            stride as u64,
            drop_remainder,
        )
    }

    fn open(&self, ctx: &Ctx, input: Input<'_, T>, _: Start<'_>) -> anyhow::Result<Self::Stream> {
        let Window {
            size,
            shift,
            stride,
            drop_remainder,
        } = *self;
        // Fresh, or restored at the first element of the oldest window held.
        let start = ctx.restoring().map(|s| s.word(0)).transpose()?.unwrap_or(0);
        let hold = Hold::of(ctx, input.dataset(), false, STAGE, 1)?;
        let mut window = WindowStream::new(hold, size, shift, stride, drop_remainder);
        window.index = start;
        window.elems_start = start;
        Ok(window)
    }

    /// Each saved window (the group of its members' positions) made again; a member shared
    /// by overlapping windows is read once and copied.
    fn replay(&self, _: &Ctx, input: Input<'_, T>, provs: &Arc<[Prov]>) -> Replay<Vec<T>> {
        replayed(Members::new(provs, STAGE, Some(T::clone), |m| {
            input.replay(m)
        }))
    }
}

/// A window still filling.
struct Open<T> {
    /// Index of its first input element.
    start: u64,
    items: Vec<T>,
    /// Positions taken so far, error elements included.
    taken: usize,
    /// The first error element among them: the window is then that error.
    error: Option<anyhow::Error>,
}

impl<T> Open<T> {
    fn finish(self) -> Finished<T> {
        Finished {
            start: self.start,
            taken: self.taken,
            window: match self.error {
                Some(e) => Err(e),
                None => Ok(self.items),
            },
        }
    }
}

/// A window complete (or cut short by the end), waiting to be yielded.
struct Finished<T> {
    start: u64,
    taken: usize,
    window: anyhow::Result<Vec<T>>,
}

/// Stream for the [`window`](crate::Dataset::window) method.
///
/// As in tf.data, an error element takes its position in every window that would hold it, and
/// each such window is yielded as that error, in its place (the first window gets the error
/// itself, later ones an error with its message).
#[must_use = "streams do nothing unless polled"]
pub(crate) struct WindowStream<T> {
    /// The input; a mark is taken before each window's first element (see [`Hold`]).
    hold: Hold<T>,
    size: usize,
    shift: u64,
    stride: u64,
    drop_remainder: bool,
    /// Index of the next input element.
    index: u64,
    /// Windows still filling, oldest first.
    open: VecDeque<Open<T>>,
    /// Finished windows waiting to be yielded.
    done: VecDeque<Finished<T>>,
    ended: bool,
    /// Record the elements' positions (the hold keeps them): those of the elements from
    /// `elems_start` on, while a window holds them.
    record: bool,
    elems: VecDeque<Prov>,
    elems_start: u64,
    /// The last window's members' positions, when recorded.
    last: Option<Prov>,
}

impl<T> Unpin for WindowStream<T> {}

impl<T> WindowStream<T> {
    pub(crate) fn new(
        hold: Hold<T>,
        size: usize,
        shift: usize,
        stride: usize,
        drop_remainder: bool,
    ) -> Self {
        WindowStream {
            record: hold.recording(),
            hold,
            size,
            shift: shift as u64,
            stride: stride as u64,
            drop_remainder,
            index: 0,
            open: VecDeque::new(),
            done: VecDeque::new(),
            ended: false,
            elems: VecDeque::new(),
            elems_start: 0,
            last: None,
        }
    }
}

impl<T: Clone> Stream for WindowStream<T> {
    type Item = anyhow::Result<Vec<T>>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            if let Some(w) = this.done.pop_front() {
                // The elements before the next window's first are no longer needed.
                let keep_from = match (this.done.front(), this.open.front()) {
                    (Some(next), _) => next.start,
                    (None, Some(next)) => next.start,
                    (None, None) => this.index,
                };
                this.hold
                    .release(this.hold.count() - (this.index - keep_from));
                if this.record {
                    this.last = members(&this.elems, this.elems_start, &w, this.stride);
                    while this.elems_start < keep_from && this.elems.pop_front().is_some() {
                        this.elems_start += 1;
                    }
                }
                return Poll::Ready(Some(w.window));
            }
            if this.ended {
                return Poll::Ready(None);
            }
            let j = this.index;
            let starts = j % this.shift == 0;
            if starts {
                // Where this window starts: restored from here, it is filled again.
                this.hold.mark();
            }
            let item = ready!(this.hold.poll_next(cx));
            if this.record && item.is_some() {
                record(&mut this.elems, &mut this.record, this.hold.prov());
            }
            match item {
                // A refused resume takes no place in a window: it goes on at once.
                Some(Err(e)) if crate::error::is_refusal(&e) => {
                    return Poll::Ready(Some(Err(e)));
                }
                Some(item) => {
                    this.index += 1;
                    if starts {
                        this.open.push_back(Open {
                            start: j,
                            items: Vec::with_capacity(this.size.min(4096)),
                            taken: 0,
                            error: None,
                        });
                    }
                    let (size, stride) = (this.size, this.stride);
                    let wants = |w: &Open<T>| (j - w.start) % stride == 0 && w.taken < size;
                    let takers = this.open.iter().filter(|w| wants(w)).count();
                    match item {
                        Ok(x) => {
                            let mut x = Some(x);
                            let mut given = 0;
                            for w in this.open.iter_mut().filter(|w| wants(w)) {
                                given += 1;
                                w.taken += 1;
                                // Clone for all windows but the last, which takes the element.
                                let item = if given == takers { x.take() } else { x.clone() };
                                w.items.extend(item);
                            }
                        }
                        Err(e) => {
                            let message = format!("{e:#}");
                            let mut e = Some(e);
                            for w in this.open.iter_mut().filter(|w| wants(w)) {
                                w.taken += 1;
                                if w.error.is_none() {
                                    w.error = Some(
                                        e.take()
                                            .unwrap_or_else(|| anyhow::anyhow!(message.clone())),
                                    );
                                }
                            }
                        }
                    }
                    while this.open.front().is_some_and(|w| w.taken == size) {
                        if let Some(w) = this.open.pop_front() {
                            this.done.push_back(w.finish());
                        }
                    }
                    if this.record && this.open.is_empty() && this.done.is_empty() {
                        // No window holds an element: no position is needed.
                        this.elems.clear();
                        this.elems_start = this.index;
                    }
                }
                None => {
                    this.ended = true;
                    let open = std::mem::take(&mut this.open);
                    if !this.drop_remainder {
                        this.done
                            .extend(open.into_iter().filter(|w| w.taken > 0).map(Open::finish));
                    }
                }
            }
        }
    }
}

/// Records an element's position (or, when the input cannot say, stops recording: no
/// checkpoint can place the windows then, and `save` says so).
fn record(elems: &mut VecDeque<Prov>, on: &mut bool, prov: Option<Prov>) {
    match prov {
        Some(p) => elems.push_back(p),
        None => {
            *on = false;
            elems.clear();
        }
    }
}

/// The positions of a finished window's members, from the recorded elements.
fn members<T>(
    elems: &VecDeque<Prov>,
    elems_start: u64,
    w: &Finished<T>,
    stride: u64,
) -> Option<Prov> {
    // A window that is an error has its members' positions too: made again from them, it is
    // that error again.
    let first = w.start.checked_sub(elems_start)?;
    (0..w.taken as u64)
        .map(|k| {
            elems
                .get(usize::try_from(first + k * stride).ok()?)
                .cloned()
        })
        .collect::<Option<Vec<_>>>()
        .map(Prov::group)
}

impl<T> Resumable for WindowStream<T> {
    fn save(self: Pin<&mut Self>) -> anyhow::Result<State> {
        let this = self.get_mut();
        // Every element from the oldest window's first on is held.
        let start = match (this.done.front(), this.open.front()) {
            (Some(w), _) => w.start,
            (None, Some(w)) => w.start,
            (None, None) => this.index,
        };
        let count = this.hold.count();
        let held = count - (this.index - start)..count;
        let skip = usize::try_from(start.saturating_sub(this.elems_start)).unwrap_or(usize::MAX);
        let (elems, record) = (&this.elems, this.record);
        let state = State::new(STAGE).words([start]);
        this.hold.save(state, held, || {
            record.then(|| elems.iter().skip(skip).cloned().collect())
        })
    }

    fn last_prov(&self) -> anyhow::Result<Prov> {
        self.hold.placed(&self.last, "its windows")
    }
}
