//! The context every stage of one epoch is built with ([`Ctx`]): options, statistics, tuner,
//! what to restore or replay, the epoch's seeds, refusal and ledger of opened files.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError};

use crate::checkpoint::{Prov, State};
use crate::hash::mix64;
use crate::options::Options;
use crate::runtime::{Budget, Knob, KnobKind, Tuner};
use crate::stats::{StageCounters, Stats};

/// registry (later also its checkpoint state).
#[derive(Debug, Clone)]
pub(crate) struct Ctx {
    pub(super) options: Arc<Options>,
    pub(super) stats: Stats,
    /// 0 for the top-level pipeline; for datasets built inside a stage (interleave's inner
    /// datasets), that stage's scope id.
    pub(super) scope: u64,
    /// The stage being built: the consumer of the stages built with this context.
    pub(super) current: Option<Arc<StageCounters>>,
    /// The epoch's autotuner: stages built with `AUTOTUNE` register their knobs here.
    pub(super) tuner: Tuner,
    /// How the stage being built is counted.
    pub(super) counting: Counting,
    /// The state to restore the stage being built from (a checkpoint's), if any.
    pub(super) restore: Option<Arc<State>>,
    /// Replay: the stage being built yields exactly the elements at these positions, in
    /// this order (to refill a buffer after a restore), if any.
    pub(super) replay: Option<Arc<[Prov]>>,
    /// A stage downstream holds elements by position: stages that move elements between
    /// tasks carry each one's position along.
    pub(super) provenance: bool,
    /// Which epoch of the recipe this is, and which repetition of a `repeat` (mixed in):
    /// random stages key their draws by it.
    pub(super) epoch: u64,
    /// The seeds unseeded random stages drew (from OS entropy when their recipe was built),
    /// by depth: one table for the epoch, saved with its checkpoints and restored from them,
    /// so a stage built after a restore (a later repetition, a replay) draws as before.
    pub(super) seeds: Arc<std::sync::Mutex<std::collections::BTreeMap<u64, u64>>>,
    /// `seeds` was restored from a checkpoint.
    pub(super) restored_seeds: bool,
    /// The next stage built with this context is plumbing the user did not write
    /// ([`Dataset::hidden`]), or has a name the user gave it ([`Dataset::named`]).
    pub(super) hide_next: bool,
    pub(super) label_next: Option<Arc<str>>,
    /// The epoch's refused resume, once a stage yielded one (see [`Refusal`]).
    pub(super) refusal: Refusal,
    /// The files the epoch opened, and what the ones of the checkpoint it resumes from were.
    pub(super) files: crate::checkpoint::opened::Ledger,
}

/// The first refused resume ([`Error::Checkpoint`](crate::Error)) any stage of an epoch
/// yielded, shared by all of them: the epoch yields it and ends, even where a stage between
/// that one and the consumer would drop or hold the error element (a window no element of
/// which is at its place, a shard, a bucket refilling).
pub(crate) type Refusal = Arc<std::sync::OnceLock<String>>;

/// Records `item` in `refusal` if it refuses a resume.
#[inline]
pub(crate) fn note_refusal<T>(refusal: &Refusal, item: &Option<anyhow::Result<T>>) {
    if let Some(Err(e)) = item
        && let Some(crate::Error::Checkpoint(why)) = e.downcast_ref::<crate::Error>()
    {
        let _ = refusal.set(why.clone());
    }
}

/// How a stage's element and error counts are kept (its other statistics do not depend on it).
///
/// Counting every element in a wrapper costs a few instructions per element and stage, which
/// shows on pipelines of nanosecond elements (W1); the cheapest stages count otherwise. With
/// [`Options::stats_timing`] every stage is wrapped and timed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Counting {
    /// A wrapper counts what the stream yields.
    Wrapped,
    /// One output per input, in step (a synchronous `map`): the counts are its input's, and
    /// the stage records the errors it makes itself ([`Ctx::own_counters`]).
    ByInput,
    /// The stream counts itself through [`Ctx::own_counters`] (a `range` counts in laps).
    ByStage,
}

/// A fresh id for a stage or a scope (never 0).
pub(crate) fn next_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

impl Ctx {
    pub(crate) fn new(options: Options) -> Self {
        let timing = options.stats_timing == Some(true);
        let budget = options.budget();
        let tuner = Tuner::new(budget);
        Ctx {
            options: Arc::new(options),
            stats: Stats::new(timing, budget),
            scope: 0,
            current: None,
            tuner,
            counting: Counting::Wrapped,
            restore: None,
            replay: None,
            provenance: false,
            epoch: 0,
            seeds: Arc::default(),
            restored_seeds: false,
            hide_next: false,
            label_next: None,
            refusal: Refusal::default(),
            files: Default::default(),
        }
    }

    /// The files this epoch opened (see [`Ledger`](crate::checkpoint::opened::Ledger)).
    pub(crate) fn files(&self) -> &crate::checkpoint::opened::Ledger {
        &self.files
    }

    /// The state to restore the stage being built from.
    pub(crate) fn restoring(&self) -> Option<&State> {
        self.restore.as_deref()
    }

    /// Where the stage being built starts: replaying, restored, or fresh.
    pub(crate) fn start(&self) -> super::op::Start<'_> {
        match (&self.replay, &self.restore) {
            (Some(provs), _) => super::op::Start::Replay(provs),
            (None, Some(state)) => super::op::Start::Restore(state),
            (None, None) => super::op::Start::Fresh,
        }
    }

    /// The positions the stage being built must yield, in replay.
    pub(crate) fn replaying(&self) -> Option<&Arc<[Prov]>> {
        self.replay.as_ref()
    }

    /// Whether a stage downstream holds elements by position.
    pub(crate) fn provenance(&self) -> bool {
        self.provenance
    }

    /// The epoch number random stages key their draws by.
    pub(crate) fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The context to build input `i` of the stage being built with: restored from input
    /// `i` of its saved state; replaying the same positions.
    pub(crate) fn for_input(&self, i: usize) -> Ctx {
        let restore = self.restore.as_ref().map(|s| {
            Arc::new(
                s.inputs
                    .get(i)
                    .cloned()
                    .unwrap_or_else(|| State::new("(missing)")),
            )
        });
        Ctx {
            restore,
            ..self.clone()
        }
    }

    /// This context, restoring the stage being built from `state` (or from nothing).
    pub(crate) fn with_restore(&self, state: Option<State>) -> Ctx {
        Ctx {
            restore: state.map(Arc::new),
            ..self.clone()
        }
    }

    /// This context, replaying `provs`. The saved state stays in reach (a replaying stage
    /// takes its seed from it), but replay comes first: a stage in replay restores nothing.
    pub(crate) fn with_replay(&self, provs: Arc<[Prov]>) -> Ctx {
        Ctx {
            replay: Some(provs),
            // What is replayed is held again by position.
            provenance: true,
            ..self.clone()
        }
    }

    /// This context, neither restoring nor replaying.
    pub(crate) fn fresh(&self) -> Ctx {
        Ctx {
            restore: None,
            replay: None,
            ..self.clone()
        }
    }

    /// This context, with positions asked for.
    pub(crate) fn with_provenance(&self) -> Ctx {
        Ctx {
            provenance: true,
            ..self.clone()
        }
    }

    /// This context for the inputs of a stage that merges several (zip, concatenate, the
    /// samplers): when they are not all small, a stage downstream may hold the merged
    /// elements by position, and an input that is small on its own must then place its
    /// elements too.
    pub(crate) fn for_merged(&self, all_small: bool) -> Ctx {
        if all_small || self.provenance {
            self.clone()
        } else {
            self.with_provenance()
        }
    }

    /// This context for repetition `n` of a `repeat`: the first is the epoch itself (as in
    /// tf.data, a dataset's first repetition draws what the dataset alone draws), the others
    /// derive from (epoch, n).
    pub(crate) fn repetition(&self, n: u64) -> Ctx {
        let epoch = match n {
            0 => self.epoch,
            n => mix64(self.epoch ^ mix64(n.wrapping_add(0x4E9E_A7ED))),
        };
        Ctx {
            epoch,
            ..self.clone()
        }
    }

    /// This context for epoch `epoch` as numbered by [`Ctx::epoch`] (a cache fills its
    /// store again as the epoch that started the fill).
    pub(crate) fn with_epoch(&self, epoch: u64) -> Ctx {
        Ctx {
            epoch,
            ..self.clone()
        }
    }

    /// The statistics a stage counted [`ByInput`](Counting::ByInput) or
    /// [`ByStage`](Counting::ByStage) must update itself (`None` when a wrapper counts it).
    pub(crate) fn own_counters(&self) -> Option<Arc<StageCounters>> {
        match self.counting {
            Counting::Wrapped => None,
            Counting::ByInput | Counting::ByStage => self.current.clone(),
        }
    }

    /// An autotuned value for the stage being built (`None` outside a stage).
    pub(crate) fn knob(&self, kind: KnobKind, initial: usize, max: usize) -> Option<Arc<Knob>> {
        let stage = self.current.as_ref()?;
        Some(self.tuner.knob(stage, kind, initial, max))
    }

    /// Samples the buffer fill of the stage being built while the epoch runs.
    pub(crate) fn gauge(&self) {
        if let Some(stage) = &self.current {
            self.tuner.gauge(stage);
        }
    }

    /// The budgets autotuned stages work within.
    pub(crate) fn budget(&self) -> Budget {
        self.tuner.budget()
    }

    /// The statistics of the stage being built, for operations that report gauges of their
    /// own (workers, parallelism).
    pub(crate) fn stage_counters(&self) -> Option<&StageCounters> {
        self.current.as_deref()
    }

    /// A handle on the statistics of the stage being built, for streams that report later.
    pub(crate) fn stats_handle(&self) -> Option<Arc<StageCounters>> {
        self.current.clone()
    }

    /// The context for datasets the stage being built builds inside itself (interleave's
    /// inner datasets, one per input element): their stages count in one row per (depth,
    /// name) within the stage, however many are built, in any epoch.
    pub(crate) fn nested(&self) -> Ctx {
        Ctx {
            scope: self.current.as_ref().map_or(0, |c| c.inner_scope()),
            ..self.clone()
        }
    }

    /// This context, building a stage that is plumbing the user did not write
    /// ([`Dataset::hidden`](super::Dataset::hidden)).
    pub(crate) fn hiding(&self) -> Ctx {
        Ctx {
            hide_next: true,
            ..self.clone()
        }
    }

    /// This context, building a stage the user named ([`Dataset::named`](super::Dataset::named)).
    pub(crate) fn labelled(&self, label: Arc<str>) -> Ctx {
        Ctx {
            label_next: Some(label),
            ..self.clone()
        }
    }

    pub(crate) fn options(&self) -> &Options {
        &self.options
    }

    /// The seed a random stage uses: its own, else one derived from the global seed and the
    /// stage's depth in the pipeline, else `fallback` (drawn from OS entropy when the recipe was
    /// built).
    pub(crate) fn seed_for(&self, own: Option<u64>, depth: u64, fallback: u64) -> u64 {
        own.or_else(|| self.options.seed.map(|g| mix64(g ^ mix64(depth))))
            .unwrap_or_else(|| {
                // A fresh epoch records the seed it drew; a restored one (its table preloaded)
                // draws what the checkpointed epoch drew at that depth. (Two unseeded random
                // stages at one depth, branches of a zip, resume with the first one's seed:
                // give such stages seeds.)
                let mut seeds = self.seeds.lock().unwrap_or_else(PoisonError::into_inner);
                if self.restored_seeds {
                    *seeds.entry(depth).or_insert(fallback)
                } else {
                    seeds.entry(depth).or_insert(fallback);
                    fallback
                }
            })
    }
}
