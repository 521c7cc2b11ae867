//! A rank's dataset: the units it reads this epoch (a source stage, `distribute`), each read
//! through the source and tagged, then cut or padded to the plan's count.
//!
//! Saved state of the `distribute` stage: `[index of the next unit in the epoch's list]`;
//! a unit's position is its index in that list. The list is made again from the plan and
//! the epoch number, so a restored epoch reads what the interrupted one would have.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::stream::Stream;

use super::{Distributed, Plan, Remainder, ShardPolicy, ShardSource, assign};
use crate::checkpoint::{Prov, ReplaySource, Resumable, State, unsupported};
use crate::dataset::{BoxStream, Cardinality, Counting, Dataset};
use crate::options::Options;
use crate::runtime::Coop;

const STAGE: &str = "distribute";

/// This rank's units in `epoch`, each with whether it is read as padding: the shard, then
/// as many passes over it again as padding needs (the count cuts the last one short).
fn listing(plan: &Plan, epoch: u64) -> Vec<(usize, bool)> {
    let units = plan.rank_units(epoch);
    let sizes = assign::sizes(&plan.dist, plan.policy, &plan.units, &plan.shards);
    let own = match plan.policy {
        ShardPolicy::Element => sizes.get(plan.dist.rank).copied().unwrap_or(0),
        _ => sizes
            .get(plan.shard_of(plan.dist.rank, epoch))
            .copied()
            .unwrap_or(0),
    };
    let passes = match plan.dist.remainder {
        Remainder::Pad if own > 0 && plan.target > own => (plan.target - own).div_ceil(own),
        _ => 0,
    };
    let mut out: Vec<(usize, bool)> = units.iter().map(|&u| (u, false)).collect();
    for _ in 0..passes {
        out.extend(units.iter().map(|&u| (u, true)));
    }
    out
}

pub(super) fn dataset<S: ShardSource>(
    plan: Arc<Plan>,
    source: Arc<S>,
) -> Dataset<Distributed<S::Item>> {
    let key = plan.key();
    let list_plan = Arc::clone(&plan);
    let list = Dataset::stage_resumable(
        STAGE,
        Cardinality::Unknown,
        Options::default(),
        0,
        Counting::Wrapped,
        move |ctx| -> BoxStream<(usize, bool)> {
            let items: Arc<[(usize, bool)]> = listing(&list_plan, ctx.epoch()).into();
            if let Some(provs) = ctx.replaying() {
                return Box::pin(ReplaySource::new(Arc::clone(provs), STAGE, move |i| {
                    usize::try_from(i)
                        .ok()
                        .and_then(|i| items.get(i).copied())
                        .ok_or_else(|| unsupported(STAGE, "a saved position is past its end"))
                }));
            }
            let next = match ctx.restoring().map(|s| s.word(0)).transpose() {
                Ok(next) => next.unwrap_or(0),
                Err(e) => return crate::dataset::error_stream(e),
            };
            Box::pin(Units {
                items,
                next: usize::try_from(next).unwrap_or(usize::MAX),
                coop: Coop::default(),
            })
        },
    )
    .keyed(key);
    let read_plan = Arc::clone(&plan);
    let tagged = list.flat_map(move |(u, padded)| {
        let unit = read_plan.units[u];
        source
            .read(unit)
            .enumerate(0)
            .map(move |(i, item)| Distributed {
                item,
                padded,
                file: unit.file,
                record: unit.start + i as u64,
            })
    });
    let mine = if plan.policy == ShardPolicy::Element {
        // Every rank reads everything and keeps the elements whose index in the whole
        // dataset is its rank modulo the world size (`shard`, per pass).
        let mut offsets = Vec::with_capacity(plan.counts.len());
        let mut at = 0u64;
        for &n in plan.counts.iter() {
            offsets.push(at);
            at += n;
        }
        let (w, r) = (plan.dist.world_size as u64, plan.dist.rank as u64);
        tagged.filter(move |d| (offsets.get(d.file).copied().unwrap_or(0) + d.record) % w == r)
    } else {
        tagged
    };
    mine.take(plan.target as i64)
        .assert_cardinality(plan.target)
}

/// Stream of the `distribute` stage: the epoch's units in order.
#[must_use = "streams do nothing unless polled"]
struct Units {
    items: Arc<[(usize, bool)]>,
    next: usize,
    coop: Coop,
}

impl Unpin for Units {}

impl Stream for Units {
    type Item = anyhow::Result<(usize, bool)>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        std::task::ready!(this.coop.poll_proceed(cx));
        let item = this.items.get(this.next).copied();
        if item.is_some() {
            this.next += 1;
        }
        Poll::Ready(item.map(Ok))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.items.len().saturating_sub(self.next);
        (n, Some(n))
    }
}

impl Resumable for Units {
    fn save(self: Pin<&mut Self>) -> anyhow::Result<State> {
        Ok(State::new(STAGE).words([self.next as u64]))
    }

    fn last_prov(&self) -> anyhow::Result<Prov> {
        Ok(Prov::at(self.next.wrapping_sub(1) as u64))
    }
}
