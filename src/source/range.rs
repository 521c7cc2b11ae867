//! `range` and `counter`.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::stream::{FusedStream, Stream};

use crate::checkpoint::{Prov, State};
use crate::engine::{BoxStream, Cardinality, Counting, Ctx, Dataset};
use crate::engine::{ReplaySource, Resumable, unsupported};
use crate::hash::mix64;
use crate::options::Options;
use crate::runtime::Coop;
use crate::stats::StageCounters;

pub(crate) fn dataset(start: i64, stop: i64, step: i64) -> Dataset<i64> {
    assert!(step != 0, "range: step must be a non-zero integer");
    let len = range_len(start, stop, step);
    let card = Cardinality::Finite(len);
    Dataset::stage_resumable(
        "range",
        card,
        Options::default(),
        0,
        Counting::ByStage,
        move |ctx| source(ctx, start, step, Some(len)),
    )
    .keyed(mix64(start as u64) ^ mix64(stop as u64 ^ 0x5707) ^ step as u64)
}

/// A range or counter for one epoch: fresh, restored, or replaying saved positions.
fn source(ctx: &Ctx, start: i64, step: i64, len: Option<u64>) -> BoxStream<i64> {
    let value = move |i: u64| start.wrapping_add((i as i64).wrapping_mul(step));
    if let Some(provs) = ctx.replaying() {
        let stage = if len.is_some() { "range" } else { "counter" };
        return Box::pin(ReplaySource::new(
            Arc::clone(provs),
            stage,
            move |i| match len {
                Some(n) if i >= n => Err(unsupported(stage, "a saved position is past its end")),
                _ => Ok(value(i)),
            },
        ));
    }
    let mut range = Range::new(start, step, len, ctx.own_counters());
    if let Some(state) = ctx.restoring() {
        match state.word(0) {
            Ok(done) => range.resume_at(done, value(done)),
            Err(e) => return crate::engine::error_stream(e),
        }
    }
    Box::pin(range)
}

pub(crate) fn counter(start: i64, step: i64) -> Dataset<i64> {
    let card = Cardinality::Infinite;
    if step == 0 {
        // The same number forever (as tf.data): the distance walked says nothing about how
        // many were yielded, so a wrapper counts them.
        return Dataset::stage_resumable(
            "counter",
            card,
            Options::default(),
            0,
            Counting::Wrapped,
            move |ctx| -> BoxStream<i64> {
                if let Some(provs) = ctx.replaying() {
                    return Box::pin(ReplaySource::new(Arc::clone(provs), "counter", move |_| {
                        Ok(start)
                    }));
                }
                let done = ctx.restoring().and_then(|s| s.word(0).ok()).unwrap_or(0);
                Box::pin(Constant {
                    value: start,
                    done,
                    coop: Coop::default(),
                })
            },
        )
        .keyed(mix64(start as u64));
    }
    Dataset::stage_resumable(
        "counter",
        card,
        Options::default(),
        0,
        Counting::ByStage,
        move |ctx| source(ctx, start, step, None),
    )
    .keyed(mix64(start as u64) ^ step as u64)
}

fn range_len(start: i64, stop: i64, step: i64) -> u64 {
    let (span, step) = if step > 0 {
        (i128::from(stop) - i128::from(start), i128::from(step))
    } else {
        (i128::from(start) - i128::from(stop), -i128::from(step))
    };
    if span <= 0 {
        0
    } else {
        ((span + step - 1) / step) as u64
    }
}

/// Stream for [`Dataset::range`] and [`Dataset::counter`].
#[derive(Debug)]
#[must_use = "streams do nothing unless polled"]
pub(crate) struct Range {
    next: i64,
    step: i64,
    /// Elements left; `None` counts forever.
    remaining: Option<u64>,
    coop: Coop,
    /// The stage's statistics, when the range counts itself: the elements yielded (worked
    /// out from where it stands) are added up at the end of every cooperation lap, at the end
    /// and when dropped, so yielding an element costs nothing more.
    counters: Option<Arc<StageCounters>>,
    start: i64,
    flushed: u64,
    /// Elements of the whole range before `start` (after a restore); with the distance
    /// walked from `start`, the position checkpoints save (nothing counted per element).
    base: u64,
    /// `range` or `counter`.
    stage: &'static str,
}

impl Range {
    fn new(start: i64, step: i64, len: Option<u64>, counters: Option<Arc<StageCounters>>) -> Self {
        Range {
            next: start,
            step,
            remaining: len,
            coop: Coop::default(),
            counters,
            start,
            flushed: 0,
            base: 0,
            stage: if len.is_some() { "range" } else { "counter" },
        }
    }

    /// Goes on after `done` elements, at `next`.
    fn resume_at(&mut self, done: u64, next: i64) {
        self.next = next;
        self.start = next;
        self.base = done;
        if let Some(left) = self.remaining.as_mut() {
            *left = left.saturating_sub(done);
        }
    }

    /// The elements yielded since `start`: the distance walked, in u64 (exact for any range;
    /// a counter wraps after 2^64 steps, which no epoch reaches). A step of 0 is a
    /// [`Constant`].
    fn walked(&self) -> u64 {
        if self.step > 0 {
            self.next.wrapping_sub(self.start) as u64 / self.step as u64
        } else {
            self.start.wrapping_sub(self.next) as u64 / self.step.unsigned_abs().max(1)
        }
    }

    /// Elements of the whole range yielded (its saved position).
    fn done(&self) -> u64 {
        self.base.wrapping_add(self.walked())
    }

    #[cold]
    #[inline(never)]
    fn flush(&mut self) {
        if let Some(counters) = &self.counters {
            let yielded = self.walked();
            counters.add_elements(yielded.saturating_sub(self.flushed));
            self.flushed = yielded;
        }
    }
}

impl Drop for Range {
    fn drop(&mut self) {
        self.flush();
    }
}

impl Stream for Range {
    type Item = anyhow::Result<i64>;

    #[inline]
    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if let Some(left) = this.remaining.as_mut() {
            if *left == 0 {
                this.flush();
                return Poll::Ready(None);
            }
            *left -= 1;
        }
        let Poll::Ready(lapped) = this.coop.poll_lap(cx) else {
            if let Some(left) = this.remaining.as_mut() {
                *left += 1;
            }
            return Poll::Pending;
        };
        let x = this.next;
        this.next = x.wrapping_add(this.step);
        if lapped {
            this.flush();
        }
        Poll::Ready(Some(Ok(x)))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        match self.remaining {
            Some(n) => (n as usize, Some(n as usize)),
            None => (usize::MAX, None),
        }
    }
}

impl Resumable for Range {
    fn save(self: Pin<&mut Self>) -> anyhow::Result<State> {
        Ok(State::new(self.stage).words([self.done()]))
    }

    fn last_prov(&self) -> anyhow::Result<Prov> {
        Ok(Prov::at(self.done().wrapping_sub(1)))
    }
}

/// A `counter` with a step of 0: the same number forever, counting what it yielded (its
/// saved position).
struct Constant {
    value: i64,
    done: u64,
    coop: Coop,
}

impl Stream for Constant {
    type Item = anyhow::Result<i64>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        let Poll::Ready(_) = this.coop.poll_lap(cx) else {
            return Poll::Pending;
        };
        this.done += 1;
        Poll::Ready(Some(Ok(this.value)))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (usize::MAX, None)
    }
}

impl Resumable for Constant {
    fn save(self: Pin<&mut Self>) -> anyhow::Result<State> {
        Ok(State::new("counter").words([self.done]))
    }

    fn last_prov(&self) -> anyhow::Result<Prov> {
        Ok(Prov::at(self.done.wrapping_sub(1)))
    }
}

impl FusedStream for Range {
    fn is_terminated(&self) -> bool {
        self.remaining == Some(0)
    }
}

#[cfg(test)]
mod tests {
    use super::range_len;

    #[test]
    fn lengths_match_tf() {
        assert_eq!(range_len(0, 5, 1), 5);
        assert_eq!(range_len(2, 12, 3), 4);
        assert_eq!(range_len(3, -4, -2), 4);
        assert_eq!(range_len(10, 0, -3), 4);
        assert_eq!(range_len(5, 5, 1), 0);
        assert_eq!(range_len(5, 0, 1), 0);
        assert_eq!(range_len(i64::MIN, i64::MAX, i64::MAX), 3);
    }
}
