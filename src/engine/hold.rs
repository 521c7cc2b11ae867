//! The one way a stage holds elements across a checkpoint ([`Hold`]): shuffle, batch and its
//! family, window, group_by_window, bucket_by_sequence_length, unique, prefetch, the parallel
//! maps and parallel_interleave's readers read their input through it.
//!
//! Every element a stage holds carries what makes it again, in one of two ways, chosen by the
//! input (as tf.data gives each buffered element its own checkpoint):
//! - **a mark and an index**, over a *small* input (one whose state is a few words, as its
//!   dataset answers: [`Answers`]): the hold takes marks of the input (its state before an
//!   element) and numbers the elements it reads. The stage keeps each held element's index;
//!   a checkpoint saves the mark before the oldest, `J` (how many were read since it) and the
//!   runs of offsets of those still held. A restore rebuilds the input from the mark, reads
//!   the `J` elements again and hands back those held, dropping the ones passed on before.
//! - **its position** ([`Prov`]), over an input that is not small (a shuffle, an interleave)
//!   or when the stage asks for positions: a checkpoint saves the held elements' positions
//!   (`held`, in the stage's order) and the input's state now; a restore replays those
//!   positions, then goes on with the input restored.
//!
//! Either way, after a restore the hold hands the held elements back first, in the order the
//! stage saved them, flagged [`again`](Hold::again), and then the input: the stage puts them
//! back where they belong with the code that placed them the first time.
//!
//! Saved words (appended to the stage's own): over a small input `[J, r, r runs (offset,
//! length)]`, with the mark as the stage's input state; otherwise none, with `held` and the
//! input's state now.

use std::collections::VecDeque;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use futures::stream::Stream;

use super::ctx::Ctx;
use super::plan::Answers;
use super::resume::{BoxStream, Resumable, unsupported};
use crate::checkpoint::{Prov, State};

/// A stage whose held elements are spread over its input (buckets, windows of several keys)
/// or that runs ahead of its consumer (prefetch, parallel_interleave's readers) has a mark
/// taken before one element in this many: a restore reads fewer than this many again.
pub(crate) const MARK_EVERY: u64 = 32;

/// What a hold hands back after a restore, before its input.
enum Again<T> {
    /// The held elements replayed from their saved positions (`n` of them read so far).
    Replay {
        stream: BoxStream<T>,
        provs: Arc<[Prov]>,
        n: usize,
    },
    /// The input restored from the mark: `left` elements still to read again, and the runs
    /// (offset, length, ascending) of those held at the checkpoint.
    Reread {
        left: u64,
        keep: VecDeque<(u64, u64)>,
    },
}

/// The elements of one group a stage holds (a bucket, a window), as a checkpoint places them:
/// their indices (held by marks) or positions.
#[derive(Default)]
pub(crate) struct Group {
    indices: Vec<u64>,
    provs: Vec<Prov>,
}

impl Group {
    /// The group was passed on: its members' positions (when recorded), and it is empty.
    pub(crate) fn take(&mut self) -> Vec<Prov> {
        self.indices.clear();
        std::mem::take(&mut self.provs)
    }

    /// How many elements it holds, as far as it keeps track.
    pub(crate) fn len(&self) -> usize {
        self.indices.len().max(self.provs.len())
    }

    /// The positions of its elements, when recorded.
    pub(crate) fn provs(&self) -> &[Prov] {
        &self.provs
    }
}

/// The elements a stage holds in an order of its own (a shuffle's buffer, a batch being
/// filled), each beside its position when the stage's [`Hold`] records them.
pub(crate) struct Held<T> {
    items: Vec<T>,
    /// The items' positions, when recorded; `None` also once the input could not say where
    /// one came from (no checkpoint can place them then: [`Hold::save`] says why).
    provs: Option<Vec<Prov>>,
}

impl<T> Held<T> {
    /// An empty buffer with room for `capacity` elements; `record`: keep their positions
    /// (grown as they come: most stages are never asked for them).
    pub(crate) fn new(capacity: usize, record: bool) -> Self {
        Held {
            items: Vec::with_capacity(capacity),
            provs: record.then(Vec::new),
        }
    }

    /// `x`, the element `hold` just handed out, joins the buffer.
    pub(crate) fn push<U>(&mut self, x: T, hold: &mut Hold<U>) {
        hold.keep(&mut self.provs);
        self.items.push(x);
    }

    /// Element `i` and its position (the last element takes its place).
    pub(crate) fn swap_remove(&mut self, i: usize) -> (T, Option<Prov>) {
        let prov = self.provs.as_mut().map(|provs| provs.swap_remove(i));
        (self.items.swap_remove(i), prov)
    }

    /// Every element, and the group of their positions (a batch and its position); the
    /// buffer is left empty with room for `capacity`.
    pub(crate) fn take_all(&mut self, capacity: usize) -> (Vec<T>, Option<Prov>) {
        let group = self.provs.as_mut().map(|p| Prov::group(std::mem::take(p)));
        (
            std::mem::replace(&mut self.items, Vec::with_capacity(capacity)),
            group,
        )
    }

    pub(crate) fn clear(&mut self) {
        self.items.clear();
        if let Some(provs) = self.provs.as_mut() {
            provs.clear();
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.items.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Whether the positions are kept.
    pub(crate) fn records(&self) -> bool {
        self.provs.is_some()
    }

    /// The positions, for [`Hold::save`].
    pub(crate) fn positions(&self) -> Option<Vec<Prov>> {
        self.provs.clone()
    }

    /// The elements themselves, for a stage filling them with nothing recorded
    /// ([`Hold::poll_fill`]).
    pub(crate) fn items_mut(&mut self) -> &mut Vec<T> {
        &mut self.items
    }
}

/// A stage's input, for a stage that holds elements: see the module doc.
pub(crate) struct Hold<T> {
    input: BoxStream<T>,
    done: bool,
    again: Option<Again<T>>,
    /// Take marks (held by marks, and the input can save its position).
    marking: bool,
    /// Keep the elements' positions (held by positions, or asked for downstream).
    record: bool,
    /// Whether the input is small, and whether elements are held by marks (a small input
    /// whose stage did not ask for positions).
    small: bool,
    /// Whether the input can save its position at all.
    resumable: bool,
    by_marks: bool,
    /// A mark is taken before one element in this many (when set), and before the next
    /// element when the stage asks ([`mark`](Hold::mark)).
    every: Option<u64>,
    want_mark: bool,
    /// How many elements (errors included) were read: the next one's index.
    read: u64,
    /// The marks taken, oldest first: the input's state before element `.0`.
    marks: VecDeque<(u64, State)>,
    /// Whether the element just handed out is one held at the checkpoint restored from.
    again_last: bool,
    /// An element added to a group had no position (see [`add_to`](Hold::add_to)).
    lost: bool,
    /// Where the element just handed out came from (when recorded).
    prov: Option<Prov>,
    stage: &'static str,
}

impl<T: Send + 'static> Hold<T> {
    /// The input of a stage built with `ctx` (fresh or restored: `state` is the stage's saved
    /// state, whose words from `at` are the hold's; in replay, the replayed elements in
    /// order). `positions`: the stage keeps its elements' positions whatever its input (a
    /// shuffle, whose order is not the input's).
    /// [`open`](Hold::open) over `dataset` (its stream built with the context given, its
    /// answers as the plan gives them).
    pub(crate) fn of(
        ctx: &Ctx,
        dataset: &crate::engine::Dataset<T>,
        positions: bool,
        stage: &'static str,
        at: usize,
    ) -> anyhow::Result<Self> {
        let answers = dataset.answers(ctx);
        Self::open(
            ctx,
            &|ctx| dataset.build(ctx),
            answers,
            positions,
            stage,
            at,
        )
    }

    pub(crate) fn open(
        ctx: &Ctx,
        input: &dyn Fn(&Ctx) -> BoxStream<T>,
        answers: Answers,
        positions: bool,
        stage: &'static str,
        at: usize,
    ) -> anyhow::Result<Self> {
        if ctx.replaying().is_some() {
            // A stage in replay passes the replayed elements on in order (a prefetch, a
            // shuffle): nothing to hand back, and each element's position is kept (the input
            // says where it comes from even when it cannot save itself).
            let input = input(&ctx.for_input(0));
            return Ok(Self::new(input, answers, positions, true, stage));
        }
        let ctx = if positions {
            ctx.with_provenance()
        } else {
            ctx.clone()
        };
        let provenance = ctx.provenance();
        let Some(state) = ctx.restoring() else {
            return Ok(Self::new(
                input(&ctx),
                answers,
                positions,
                provenance,
                stage,
            ));
        };
        let mut hold = Self::new(
            input(&ctx.for_input(0)),
            answers,
            positions,
            provenance,
            stage,
        );
        if !hold.by_marks {
            if !state.held.is_empty() {
                let provs: Arc<[Prov]> = state.held.clone().into();
                let replay = ctx.for_input(0).with_replay(Arc::clone(&provs));
                hold.again = Some(Again::Replay {
                    stream: input(&replay),
                    provs,
                    n: 0,
                });
            }
            return Ok(hold);
        }
        // The input was restored from the mark: what was read counts from there.
        let (left, runs) = (state.word(at)?, state.word(at + 1)?);
        let keep = (0..runs)
            .map(|i| {
                let at = at + 2 + 2 * i as usize;
                Ok((state.word(at)?, state.word(at + 1)?))
            })
            .collect::<anyhow::Result<VecDeque<_>>>()?;
        hold.marks.push_back((0, state.input_state(0)?.clone()));
        if left > 0 {
            hold.again = Some(Again::Reread { left, keep });
        }
        Ok(hold)
    }

    /// A hold over `input` that records nothing (an error in its stage's place).
    pub(crate) fn plain(input: BoxStream<T>, stage: &'static str) -> Self {
        Hold::new(input, Answers::PLAIN, false, false, stage)
    }

    /// A hold over `input` (whose dataset gives `answers`) with nothing to hand back: by
    /// positions when `positions` or the
    /// input is not small, otherwise by marks (positions kept too when `provenance`: a stage
    /// downstream asked for them).
    pub(crate) fn new(
        input: BoxStream<T>,
        answers: Answers,
        positions: bool,
        provenance: bool,
        stage: &'static str,
    ) -> Self {
        let Answers { small, resumable } = answers;
        let by_marks = small && !positions;
        Hold {
            marking: by_marks && resumable,
            resumable,
            record: !by_marks || provenance,
            small,
            by_marks,
            input,
            done: false,
            again: None,
            every: None,
            want_mark: false,
            read: 0,
            marks: VecDeque::new(),
            again_last: false,
            lost: false,
            prov: None,
            stage,
        }
    }
}

impl<T> Hold<T> {
    /// Marks before one element in `n` as well (for stages whose held elements are spread
    /// over the input: windows of several keys, buckets).
    pub(crate) fn marking_every(&mut self, n: u64) {
        self.every = Some(n);
    }

    /// Take a mark before the next element (a group starts there).
    pub(crate) fn mark(&mut self) {
        self.want_mark = self.marking;
    }

    /// No element before index `oldest` is held any more: the marks only those needed are
    /// dropped.
    pub(crate) fn release(&mut self, oldest: u64) {
        while self.marks.get(1).is_some_and(|m| m.0 <= oldest) {
            self.marks.pop_front();
        }
    }

    /// Whether positions are kept ([`prov`](Hold::prov) answers).
    pub(crate) fn recording(&self) -> bool {
        self.record
    }

    /// The index of the element just handed out (the count of elements read before it).
    pub(crate) fn index(&self) -> u64 {
        self.read.wrapping_sub(1)
    }

    /// How many elements were read (the next one's index).
    pub(crate) fn count(&self) -> u64 {
        self.read
    }

    /// Whether the element just handed out is one held at the checkpoint restored from.
    pub(crate) fn again(&self) -> bool {
        self.again_last
    }

    /// The index of the first element it will hand out: after a restore over a small input,
    /// those before it are read again and dropped (they were passed on before the
    /// checkpoint); otherwise [`count`](Hold::count).
    pub(crate) fn resumes_at(&self) -> u64 {
        match &self.again {
            Some(Again::Reread { left, keep }) => keep.front().map_or(self.read + left, |r| r.0),
            _ => self.read,
        }
    }

    /// Whether elements held at the checkpoint restored from are still to come.
    pub(crate) fn restoring(&self) -> bool {
        self.again.is_some()
    }

    /// Where the element just handed out came from, when recorded (`None` once the input
    /// could not say: [`save`](Hold::save) then says why).
    pub(crate) fn prov(&mut self) -> Option<Prov> {
        self.prov.take()
    }

    /// The position of the element just handed out joins `provs` (positions a stage keeps
    /// beside what it holds), when kept; `provs` becomes `None` when the input could not say
    /// where the element came from (no checkpoint can place them then: `save` says why).
    pub(crate) fn keep(&mut self, provs: &mut Option<Vec<Prov>>) {
        if let Some(list) = provs.as_mut() {
            match self.prov.take() {
                Some(p) => list.push(p),
                None => *provs = None,
            }
        }
    }

    pub(crate) fn is_small(&self) -> bool {
        self.small
    }

    /// The input itself, for a stage that turns out to keep nothing (`parallel_interleave`'s
    /// readers in nondeterministic order): only when nothing is to be handed back first
    /// (not [`restoring`](Hold::restoring)).
    pub(crate) fn into_input(self) -> BoxStream<T> {
        self.input
    }

    /// The stage it is the input of (named in its errors).
    pub(crate) fn stage(&self) -> &'static str {
        self.stage
    }

    pub(crate) fn resumable(&self) -> bool {
        self.resumable
    }

    pub(crate) fn is_terminated(&self) -> bool {
        self.done && self.again.is_none()
    }

    /// Where the input's last element came from.
    pub(crate) fn last_prov(&self) -> anyhow::Result<Prov> {
        match &self.again {
            Some(Again::Replay { stream, .. }) => stream.last_prov(),
            _ => self.input.last_prov(),
        }
    }

    /// The position of its stage's last element, `last` (the group of its members'
    /// positions, when recorded), or why there is none: the input's own reason when it
    /// cannot place its elements, else that the stage did not record `what` ("its batches").
    pub(crate) fn placed(&self, last: &Option<Prov>, what: &str) -> anyhow::Result<Prov> {
        if let Some(last) = last {
            return Ok(last.clone());
        }
        self.last_prov()?;
        let why = format!("the positions of {what} were not recorded");
        Err(unsupported(self.stage, &why))
    }

    pub(crate) fn size_hint(&self) -> (usize, Option<usize>) {
        if self.done {
            return (0, Some(0));
        }
        self.input.size_hint()
    }

    /// The next element: those held at the checkpoint restored from first, then the input's.
    pub(crate) fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Option<anyhow::Result<T>>> {
        if self.again.is_none() && !self.record && !self.want_mark && self.every.is_none() {
            // Nothing to keep per element (the common case: marks taken on request only).
            return self.poll_plain(cx);
        }
        if self.again.is_some()
            && let Some(item) = ready!(self.poll_again(cx))
        {
            return Poll::Ready(Some(item));
        }
        self.again_last = false;
        let item = ready!(self.poll_input(cx));
        if item.is_some() && self.record {
            self.prov = self.input.last_prov().ok();
            if self.prov.is_none() && matches!(item, Some(Ok(_))) {
                // The input cannot say where its elements come from (a nondeterministic
                // interleave): no checkpoint can place them, and it is not asked again.
                self.record = false;
            }
        }
        Poll::Ready(item)
    }

    /// The next element held at the checkpoint restored from, and `None` once they are all
    /// back (for a stage that must know: the input's next element is not read).
    pub(crate) fn poll_again(&mut self, cx: &mut Context<'_>) -> Poll<Option<anyhow::Result<T>>> {
        self.again_last = false;
        let Some(Again::Replay { stream, provs, n }) = self.again.as_mut() else {
            return self.poll_reread(cx);
        };
        match ready!(stream.as_mut().poll_next(cx)) {
            Some(item) => {
                self.again_last = item.is_ok();
                if self.record {
                    self.prov = stream.last_prov().ok();
                }
                *n += 1;
                self.read += 1;
                Poll::Ready(Some(item))
            }
            None => {
                let short = *n != provs.len();
                self.again = None;
                Poll::Ready(short.then(|| {
                    Err(unsupported(
                        self.stage,
                        "replaying the elements it held gave fewer than it saved",
                    ))
                }))
            }
        }
    }

    /// Reads elements into `buf` until it holds `size`, for a stage that keeps nothing per
    /// element (a batch being filled): `Ready(None)` when full, `Ready(Some(Err))` at an error
    /// element, `Ready(Some(Ok(())))` when the input ended. Elements that need more (held
    /// ones handed back, a mark due, positions kept) go one by one through
    /// [`poll_next`](Hold::poll_next).
    #[inline]
    pub(crate) fn poll_fill(
        &mut self,
        cx: &mut Context<'_>,
        buf: &mut Vec<T>,
        size: usize,
    ) -> Poll<Option<anyhow::Result<()>>> {
        while buf.len() < size {
            if self.again.is_some() || self.record || self.want_mark || self.every.is_some() {
                match ready!(self.poll_next(cx)) {
                    Some(Ok(x)) => buf.push(x),
                    Some(Err(e)) => return Poll::Ready(Some(Err(e))),
                    None => return Poll::Ready(Some(Ok(()))),
                }
                continue;
            }
            if self.done {
                return Poll::Ready(Some(Ok(())));
            }
            // Nothing kept per element: the input's elements go straight into `buf`.
            loop {
                match ready!(self.input.as_mut().poll_next(cx)) {
                    Some(Ok(x)) => {
                        self.read += 1;
                        buf.push(x);
                        if buf.len() == size {
                            return Poll::Ready(None);
                        }
                    }
                    Some(Err(e)) => {
                        self.read += 1;
                        return Poll::Ready(Some(Err(e)));
                    }
                    None => {
                        self.done = true;
                        return Poll::Ready(Some(Ok(())));
                    }
                }
            }
        }
        Poll::Ready(None)
    }

    /// The input's next element, after a mark when one is due.
    fn poll_input(&mut self, cx: &mut Context<'_>) -> Poll<Option<anyhow::Result<T>>> {
        if self.marking
            && (self.want_mark || self.every.is_some_and(|n| self.read % n == 0))
            && self.marks.back().is_none_or(|m| m.0 != self.read)
        {
            self.want_mark = false;
            if let Ok(mark) = self.input.as_mut().save() {
                self.marks.push_back((self.read, mark));
            }
        }
        self.poll_plain(cx)
    }

    #[inline]
    fn poll_plain(&mut self, cx: &mut Context<'_>) -> Poll<Option<anyhow::Result<T>>> {
        if self.done {
            return Poll::Ready(None);
        }
        let item = ready!(self.input.as_mut().poll_next(cx));
        match item {
            Some(_) => self.read += 1,
            None => self.done = true,
        }
        Poll::Ready(item)
    }

    /// After a restore over a small input: the elements since the mark, those held kept.
    fn poll_reread(&mut self, cx: &mut Context<'_>) -> Poll<Option<anyhow::Result<T>>> {
        loop {
            if let Some(Again::Reread { left: 0, .. }) = self.again {
                self.again = None;
            }
            if self.again.is_none() {
                return Poll::Ready(None);
            }
            // The next element; a pending poll changes nothing.
            let Some(item) = ready!(self.poll_input(cx)) else {
                self.again = None;
                return Poll::Ready(Some(Err(unsupported(
                    self.stage,
                    "reading again what it held gave fewer elements than it saved",
                ))));
            };
            let Some(Again::Reread { left, keep }) = self.again.as_mut() else {
                return Poll::Ready(Some(item));
            };
            let i = self.read - 1;
            let kept = keep.front().is_some_and(|&(at, n)| at <= i && i < at + n);
            if keep.front().is_some_and(|&(at, n)| i + 1 >= at + n) {
                keep.pop_front();
            }
            *left -= 1;
            match item {
                // A refused restore (a file changed since the checkpoint) goes to the
                // consumer at once.
                Err(e) if crate::error::is_refusal(&e) => {
                    self.again = None;
                    return Poll::Ready(Some(Err(e)));
                }
                item if kept => {
                    self.again_last = true;
                    if self.record {
                        self.prov = self.input.last_prov().ok();
                    }
                    return Poll::Ready(Some(item));
                }
                // Passed on before the checkpoint.
                _ => {}
            }
        }
    }

    /// The element just handed out joins `group`.
    pub(crate) fn add_to(&mut self, group: &mut Group) {
        if self.by_marks {
            group.indices.push(self.index());
        }
        if self.record {
            match self.prov.take() {
                Some(p) => group.provs.push(p),
                // The input cannot say where this element comes from: no checkpoint can
                // place the groups.
                None => self.lost = true,
            }
        }
    }

    /// The position of the element just handed out as a group of it alone, when recorded: an
    /// error that a grouping stage passes on in a group's place (made again, it is that error
    /// again).
    pub(crate) fn alone(&mut self) -> Option<Prov> {
        self.prov.take().map(|p| Prov::group(vec![p]))
    }

    /// `group` is passed on: its position (the group of its members' positions), when
    /// recorded. It is left empty.
    pub(crate) fn passed(&self, group: &mut Group) -> Option<Prov> {
        let provs = group.take();
        self.record.then(|| Prov::group(provs))
    }

    /// A group was passed on: the marks only the elements before every group's first are
    /// dropped.
    pub(crate) fn release_groups<'a>(&mut self, groups: impl Iterator<Item = &'a Group>) {
        let oldest = groups.filter_map(|g| g.indices.first().copied()).min();
        self.release(oldest.unwrap_or(self.read));
    }

    /// The offsets `group`'s elements are saved at among all those held (in `groups`): from
    /// the mark a checkpoint now saves (held by marks), or their places in the order
    /// [`save_groups`](Hold::save_groups) saves them (by positions; `group` first). After a
    /// restore, [`index`](Hold::index) numbers the elements handed back the same way.
    pub(crate) fn offsets<'a>(
        &self,
        group: &Group,
        groups: impl Iterator<Item = &'a Group>,
    ) -> Vec<u64> {
        if !self.by_marks {
            return (0..group.len() as u64).collect();
        }
        let oldest = groups.filter_map(|g| g.indices.first().copied()).min();
        let base = oldest
            .and_then(|o| self.marks.iter().rev().find(|m| m.0 <= o))
            .map_or(0, |m| m.0);
        group.indices.iter().map(|i| i - base).collect()
    }

    /// [`save`](Hold::save) for a stage whose held elements are in `groups`.
    pub(crate) fn save_groups<'a>(
        &mut self,
        state: State,
        groups: impl Iterator<Item = &'a Group> + Clone,
    ) -> anyhow::Result<State> {
        let mut indices: Vec<u64> = groups
            .clone()
            .flat_map(|g| g.indices.iter().copied())
            .collect();
        indices.sort_unstable();
        let lost = self.lost;
        self.save(state, indices.into_iter(), || {
            (!lost).then(|| groups.flat_map(|g| g.provs.iter().cloned()).collect())
        })
    }

    /// `state` (the stage's own words) followed by the hold's: the held elements are those at
    /// `indices` (ascending, over a small input) or at `provs` (in the stage's order, over an
    /// input that is not small; `None` when the stage could not place one of them). After a
    /// restore, the elements still to be handed back are held too (saved after the stage's).
    pub(crate) fn save(
        &mut self,
        state: State,
        indices: impl Iterator<Item = u64>,
        provs: impl FnOnce() -> Option<Vec<Prov>>,
    ) -> anyhow::Result<State> {
        if !self.by_marks {
            let Some(mut held) = provs().filter(|_| self.record) else {
                // Name the stage that cannot place its elements, when it says so.
                self.input.last_prov()?;
                return Err(unsupported(
                    self.stage,
                    "its input cannot say where its elements come from",
                ));
            };
            if let Some(Again::Replay { provs, n, .. }) = &self.again {
                held.extend(provs.get(*n..).unwrap_or_default().iter().cloned());
            }
            return Ok(state.held(held).input(self.input.as_mut().save()?));
        }
        let mut runs: Vec<(u64, u64)> = Vec::new();
        let mut end = self.read;
        let pending = match &self.again {
            Some(Again::Reread { left, keep }) => {
                end += left;
                // The front run may be handed back in part already (those are the stage's).
                let read = self.read;
                Some(keep.iter().filter_map(move |&(at, n)| {
                    let from = at.max(read);
                    (from < at + n).then_some((from, at + n - from))
                }))
            }
            _ => None,
        };
        for i in indices {
            match runs.last_mut() {
                Some((at, n)) if *at + *n == i => *n += 1,
                _ => runs.push((i, 1)),
            }
        }
        runs.extend(pending.into_iter().flatten());
        if runs.is_empty() && end == self.read {
            return Ok(state.words([0, 0]).input(self.input.as_mut().save()?));
        }
        let oldest = runs.first().map_or(self.read, |r| r.0);
        let (base, mark) = self
            .marks
            .iter()
            .rev()
            .find(|m| m.0 <= oldest)
            .ok_or_else(|| {
                unsupported(
                    self.stage,
                    "its input could not save its position before an element it holds",
                )
            })?;
        let mut words = vec![end - base, runs.len() as u64];
        words.extend(runs.iter().flat_map(|&(at, n)| [at - base, n]));
        Ok(state.words(words).input(mark.clone()))
    }
}

#[cfg(test)]
mod tests {
    use futures::future::poll_fn;

    use super::*;
    use crate::engine::{Opaque, ReplaySource};

    #[tokio::test]
    async fn a_held_buffer_keeps_each_elements_position_beside_it() -> anyhow::Result<()> {
        let provs: Arc<[Prov]> = [10, 11, 12].map(Prov::at).into();
        let source = ReplaySource::new(Arc::clone(&provs), "source", |i| Ok(i * 2));
        let mut hold = Hold::new(Box::pin(source), Answers::PLAIN, true, true, "shuffle");
        let mut held = Held::new(4, true);
        while let Some(x) = poll_fn(|cx| hold.poll_next(cx)).await {
            held.push(x?, &mut hold);
        }
        assert_eq!(held.positions(), Some(provs.to_vec()));
        assert_eq!(held.swap_remove(0), (20, Some(Prov::at(10))));
        // The last element took the first's place, with its position.
        let (items, group) = held.take_all(4);
        assert_eq!(items, [24, 22]);
        assert_eq!(group, Some(Prov::group(vec![Prov::at(12), Prov::at(11)])));
        assert!(held.is_empty());
        Ok(())
    }

    #[tokio::test]
    async fn a_held_buffer_over_an_input_that_cannot_say_keeps_no_position() {
        let input = futures::stream::iter([anyhow::Ok(1u64), Ok(2)]);
        let input = Box::pin(Opaque::new(input, "source"));
        let mut hold = Hold::new(input, Answers::PLAIN, true, true, "shuffle");
        let mut held = Held::new(2, true);
        while let Some(Ok(x)) = poll_fn(|cx| hold.poll_next(cx)).await {
            held.push(x, &mut hold);
        }
        assert!(!held.records());
        assert_eq!(held.positions(), None);
        assert_eq!(held.swap_remove(0), (1, None));
    }
}
