//! For a stage that holds elements in several partial groups at once (`bucket_by_sequence_length`'s
//! buckets, `group_by_window`'s windows): what a checkpoint needs to fill them again.
//!
//! Over a small input, a mark of the input is taken before one element in [`MARK_EVERY`], and
//! each group keeps the mark taken last before its first element and its elements' indices.
//! The saved state is `[J, n, then n offsets]` with the mark of the oldest group as the input:
//! a restore reads the `J` elements after that mark again and keeps the `n` at those offsets
//! (counted from the mark; the others were passed on before the checkpoint). Over an input
//! that is not small, each group keeps its elements' positions, and the state lists them
//! (`held`) with the input's state now.

use std::collections::VecDeque;
use std::sync::Arc;

use super::{Resumable, unsupported};
use crate::checkpoint::{Prov, State};
use crate::engine::BoxStream;

/// A mark of a small input is taken before one element in this many.
pub(crate) const MARK_EVERY: u64 = 32;

/// The input's state before element `.0` (counted from the mark the count started from).
type Mark = Arc<(u64, State)>;

/// The elements of one group, as a checkpoint places them.
#[derive(Default)]
pub(crate) struct Members {
    /// The mark taken last before its first element (small inputs).
    mark: Option<Mark>,
    indices: Vec<u64>,
    /// Its elements' positions (inputs that are not small, or when asked for).
    pub(crate) provs: Vec<Prov>,
}

impl Members {
    pub(crate) fn is_empty(&self) -> bool {
        self.indices.is_empty() && self.provs.is_empty()
    }

    /// How many elements it holds (as far as it keeps track).
    pub(crate) fn len(&self) -> usize {
        self.indices.len().max(self.provs.len())
    }

    /// Its elements' offsets from the mark at `base` (see [`Held::save`]).
    pub(crate) fn offsets(&self, base: u64) -> impl Iterator<Item = u64> + '_ {
        self.indices.iter().map(move |i| i - base)
    }

    /// The group was passed on: its members' positions (when recorded), and it is empty.
    pub(crate) fn take(&mut self) -> Vec<Prov> {
        self.mark = None;
        self.indices.clear();
        std::mem::take(&mut self.provs)
    }
}

/// What to do with the element just read.
pub(crate) enum Step {
    /// A new element: group it (and pass a full group on).
    New(u64),
    /// After a restore, an element held at the checkpoint: group it again.
    Again(u64),
    /// After a restore, an element passed on before the checkpoint: drop it.
    Drop,
}

/// The stage's side: the count of elements read, the marks, and after a restore what is read
/// again.
pub(crate) struct Held {
    /// Take marks (the input is small and can save its position) / record positions (it is
    /// not small, or a stage downstream asked for them).
    marking: bool,
    pub(crate) record: bool,
    small: bool,
    read: u64,
    mark: Option<Mark>,
    /// After a restore over a small input: how many elements to read again, and the offsets
    /// (ascending) of those held at the checkpoint.
    again: Option<(u64, VecDeque<u64>)>,
    stage: &'static str,
}

impl Held {
    pub(crate) fn new(input: &impl Resumable, provenance: bool, stage: &'static str) -> Self {
        let small = input.is_small();
        Held {
            marking: small && input.resumable(),
            record: !small || provenance,
            small,
            read: 0,
            mark: None,
            again: None,
            stage,
        }
    }

    /// Goes on from a saved state whose words from `at` are `[J, n, offsets]` (over a small
    /// input: the input was restored from the mark).
    pub(crate) fn restore(&mut self, state: &State, at: usize) -> anyhow::Result<()> {
        if !self.small {
            return Ok(());
        }
        let (again, n) = (state.word(at)?, state.word(at + 1)?);
        let offsets = (0..n)
            .map(|i| state.word(at + 2 + i as usize))
            .collect::<anyhow::Result<VecDeque<u64>>>()?;
        if again > 0 {
            self.again = Some((again, offsets));
        }
        Ok(())
    }

    /// Before the input is polled for an element: a mark, when one is due.
    pub(crate) fn before<T>(&mut self, input: &mut BoxStream<T>) {
        if self.marking
            && self.read % MARK_EVERY == 0
            && self.mark.as_ref().is_none_or(|m| m.0 != self.read)
        {
            self.mark = input.as_mut().save().ok().map(|s| Arc::new((self.read, s)));
        }
    }

    /// The input yielded an element (or an error).
    pub(crate) fn read(&mut self) -> Step {
        let i = self.read;
        self.read += 1;
        let Some((left, offsets)) = self.again.as_mut() else {
            return Step::New(i);
        };
        *left -= 1;
        let kept = offsets.front() == Some(&i);
        if kept {
            offsets.pop_front();
        }
        if *left == 0 {
            self.again = None;
        }
        if kept { Step::Again(i) } else { Step::Drop }
    }

    /// Where the element `input` just yielded came from, when positions are recorded.
    pub(crate) fn prov_of(&self, input: &impl Resumable) -> Option<anyhow::Result<Prov>> {
        self.record.then(|| input.last_prov())
    }

    /// Element `index` joins `members`; `prov` is [`prov_of`](Held::prov_of)'s answer (when
    /// the input cannot say, no checkpoint can place the groups).
    pub(crate) fn add(
        &mut self,
        members: &mut Members,
        index: u64,
        prov: Option<anyhow::Result<Prov>>,
    ) {
        if members.is_empty() {
            members.mark = self.mark.clone();
        }
        if self.marking {
            members.indices.push(index);
        }
        match prov {
            Some(Ok(p)) if self.record => members.provs.push(p),
            Some(Err(_)) => self.record = false,
            _ => {}
        }
    }

    /// Whether it reads again what it held at the last restore (over a small input).
    pub(crate) fn reading_again(&self) -> bool {
        self.again.is_some()
    }

    /// The words `[J, n, offsets]` and the input's state (small inputs), or the positions of
    /// the groups' elements in their order and the input's state now; and the index of the
    /// mark the offsets count from.
    pub(crate) fn save<'a, T>(
        &self,
        groups: impl Iterator<Item = &'a Members> + Clone,
        input: &mut BoxStream<T>,
    ) -> anyhow::Result<(Vec<u64>, Vec<Prov>, State, u64)> {
        if self.again.is_some() {
            return Err(unsupported(
                self.stage,
                "a checkpoint while it reads again what it held at the last restore",
            ));
        }
        if !self.small {
            if !self.record {
                input.last_prov()?;
                return Err(unsupported(
                    self.stage,
                    "its input cannot say where its elements come from",
                ));
            }
            let held = groups.flat_map(|g| g.provs.iter().cloned()).collect();
            return Ok((Vec::new(), held, input.as_mut().save()?, 0));
        }
        let mut oldest: Option<&Mark> = None;
        for group in groups.clone().filter(|g| !g.is_empty()) {
            let mark = group.mark.as_ref().ok_or_else(|| {
                unsupported(
                    self.stage,
                    "its input could not save its position before a group",
                )
            })?;
            if oldest.is_none_or(|o| mark.0 < o.0) {
                oldest = Some(mark);
            }
        }
        let Some(oldest) = oldest else {
            return Ok((vec![0, 0], Vec::new(), input.as_mut().save()?, 0));
        };
        let mut offsets: Vec<u64> = groups.flat_map(|g| g.offsets(oldest.0)).collect();
        offsets.sort_unstable();
        let mut words = vec![self.read - oldest.0, offsets.len() as u64];
        words.extend(offsets);
        Ok((words, Vec::new(), oldest.1.clone(), oldest.0))
    }
}
