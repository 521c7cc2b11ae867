//! A rank's dataset: the units it reads this epoch (a source stage, `distribute`), each read
//! through the source and tagged, then cut or padded to the plan's count.
//!
//! Saved state of the `distribute` stage: `[index of the next unit in the epoch's list]`;
//! a unit's position is its index in that list. The list is made again from the plan and
//! the epoch number, so a restored epoch reads what the interrupted one would have.

use std::sync::Arc;

use super::{Distributed, Plan, Remainder, ShardPolicy, ShardSource, assign};
use crate::engine::{BoxStream, Cardinality, Ctx, Dataset, Source, Start};

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

/// This rank's units of each epoch (see [`listing`]): the source of the `distribute` stage.
struct Listing(Arc<Plan>);

impl std::hash::Hash for Listing {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.key().hash(state);
    }
}

impl Source for Listing {
    type Out = (usize, bool);
    type Stream = BoxStream<(usize, bool)>;
    const NAME: &'static str = STAGE;

    fn cardinality(&self) -> Cardinality {
        Cardinality::Unknown
    }

    /// The start is the context's.
    fn open(&self, ctx: &Ctx, _: Start<'_>) -> anyhow::Result<Self::Stream> {
        let items: Arc<[(usize, bool)]> = listing(&self.0, ctx.epoch()).into();
        Ok(crate::source::from_iter::list(ctx, items, STAGE))
    }
}

pub(super) fn dataset<S: ShardSource>(
    plan: Arc<Plan>,
    source: Arc<S>,
) -> Dataset<Distributed<S::Item>> {
    let list = Dataset::from_source(Listing(Arc::clone(&plan)));
    let read_plan = Arc::clone(&plan);
    let tagged = list.flat_map(move |(u, padded)| {
        let unit = read_plan.units[u];
        let plan = Arc::clone(&read_plan);
        source.read(unit).enumerate(0).map(move |(i, item)| {
            let record = unit.start + i as u64;
            Distributed {
                item,
                padded,
                file: unit.file,
                record,
                offset: plan.offsets.get(&(unit.file, record)).copied().unwrap_or(0),
            }
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
