//! The autotuner: chooses [`AUTOTUNE`](crate::AUTOTUNE) parallelism and buffer sizes while an
//! epoch runs, from the epoch's own statistics, within a CPU budget and a memory budget.
//!
//! Stages built with `AUTOTUNE` register a [`Knob`] (the value they read whenever they decide
//! how much to run or hold); stages that buffer register a gauge of their fill. The epoch
//! starts one tuning task at its first poll (it is aborted when the epoch is dropped), which
//! every [`TICK`]:
//! - samples every buffer's fill (the report's averages);
//! - estimates the memory the buffers hold: each buffered element is costed at its stage's
//!   bytes per element, known where a reader counts bytes and otherwise carried down the
//!   pipeline (a stage's output is taken to be as large as its input: bytes in, bytes out);
//! - **parallelism** (`map_parallel`, `random_map`): adds a worker while the consumer waits on
//!   the stage, its workers are busy at least [`BUSY_TO_GROW`] and one more busy worker fits
//!   in the CPU budget (counted in cores the autotuned stages keep busy, so a cheap stage's
//!   idle workers cost nothing); takes one from the least busy stage while they keep more
//!   cores busy than the budget; takes one away while they are busy less than
//!   [`BUSY_TO_SHRINK`] for [`IDLE_TICKS_TO_SHRINK`] ticks (the stage is not the bottleneck,
//!   so its cores serve better elsewhere);
//! - **buffers** (`prefetch`): doubles a buffer (quadruples it when the consumer waits more
//!   than half the time) while its consumer waits on it *and* its
//!   producer found it full (so the producer keeps up on average, and a deeper buffer absorbs
//!   the bursts and fewer hand-overs cost less), as long as the buffers, each counted at its
//!   limit, stay within the memory budget; halves the largest autotuned buffer while what the
//!   buffers hold is over the budget.
//!
//! Buffers given a fixed size are contracts, as in tf.data: they count against the budget but
//! are never shrunk (the report says when the buffers held more than the budget). After a
//! change a parallel stage waits [`COOLDOWN`] ticks, so each decision is judged on
//! statistics it produced.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::stats::{StageCounters, StageSnapshot, Stats};

/// How often the tuner looks at the statistics.
pub(crate) const TICK: Duration = Duration::from_millis(50);
/// Worker utilisation at or above which a parallel stage that its consumer waits on grows.
const BUSY_TO_GROW: f64 = 0.80;
/// Worker utilisation below which a parallel stage gives a worker back.
const BUSY_TO_SHRINK: f64 = 0.45;
/// Consecutive quiet ticks before a parallel stage gives a worker back.
const IDLE_TICKS_TO_SHRINK: u32 = 2;
/// Share of a tick the consumer must have waited for the stage to count as a bottleneck.
const WAITED: f64 = 0.02;
/// Ticks a parallelism knob waits after a change before it changes again.
const COOLDOWN: u32 = 3;
/// How far past the CPU budget the busy cores may go before a worker is taken away (busy
/// time is measured, so a little over is noise).
const CPU_SLACK: f64 = 0.25;
/// The largest buffer the tuner gives a prefetch, in elements.
pub(crate) const MAX_BUFFER: usize = 1024;
/// The buffer an autotuned prefetch starts with.
pub(crate) const INITIAL_BUFFER: usize = 2;

/// What a knob sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KnobKind {
    /// Calls at once (`map_parallel`'s workers).
    Parallelism,
    /// Elements a buffer holds (`prefetch`).
    Buffer,
}

/// One autotuned value, read by its stage whenever it decides how much to run or hold.
#[derive(Debug)]
pub(crate) struct Knob {
    kind: KnobKind,
    value: AtomicUsize,
    min: usize,
    max: usize,
    stage: Arc<StageCounters>,
    state: Mutex<KnobState>,
}

/// The tuner's memory of a knob: the counters at the last tick, and its cooldown.
#[derive(Debug, Default)]
struct KnobState {
    wait: Duration,
    worker_busy: Duration,
    full_events: u64,
    cooldown: u32,
    /// Consecutive ticks the stage's workers were busy less than [`BUSY_TO_SHRINK`].
    idle_ticks: u32,
}

impl Knob {
    /// The value to use now.
    pub(crate) fn get(&self) -> usize {
        self.value.load(Ordering::Relaxed)
    }

    /// The largest value the tuner may set.
    pub(crate) fn max(&self) -> usize {
        self.max
    }

    fn set(&self, value: usize) {
        let value = value.clamp(self.min, self.max);
        self.value.store(value, Ordering::Relaxed);
        match self.kind {
            KnobKind::Parallelism => self.stage.set_parallelism(value),
            KnobKind::Buffer => self.stage.set_buffer_limit(value),
        }
    }
}

/// The budgets the tuner works within.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Budget {
    /// Workers the autotuned parallel stages may use together.
    pub(crate) cpu: usize,
    /// Bytes every buffer of the epoch may hold together.
    pub(crate) ram: u64,
}

/// An epoch's tuner: cheap to clone; the knobs and gauges its stages registered.
#[derive(Debug, Clone)]
pub(crate) struct Tuner {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    budget: Budget,
    knobs: Mutex<Vec<Arc<Knob>>>,
    /// Stages whose buffer fill is sampled.
    gauges: Mutex<Vec<Arc<StageCounters>>>,
    /// Whether the tuning task has anything to do.
    wanted: AtomicBool,
}

impl Tuner {
    pub(crate) fn new(budget: Budget) -> Self {
        Tuner {
            shared: Arc::new(Shared {
                budget,
                knobs: Mutex::default(),
                gauges: Mutex::default(),
                wanted: AtomicBool::new(false),
            }),
        }
    }

    pub(crate) fn budget(&self) -> Budget {
        self.shared.budget
    }

    /// A knob for `stage` (stages made afresh inside an interleave share their stage's knob).
    pub(crate) fn knob(
        &self,
        stage: &Arc<StageCounters>,
        kind: KnobKind,
        initial: usize,
        max: usize,
    ) -> Arc<Knob> {
        let mut knobs = self
            .shared
            .knobs
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(k) = knobs.iter().find(|k| Arc::ptr_eq(&k.stage, stage)) {
            return Arc::clone(k);
        }
        let max = max.max(1);
        let knob = Arc::new(Knob {
            kind,
            value: AtomicUsize::new(0),
            min: 1,
            max,
            stage: Arc::clone(stage),
            state: Mutex::default(),
        });
        knob.set(initial);
        stage.set_autotuned();
        knobs.push(Arc::clone(&knob));
        self.shared.wanted.store(true, Ordering::Relaxed);
        drop(knobs);
        self.gauge(stage);
        knob
    }

    /// Samples `stage`'s buffer fill while the epoch runs.
    pub(crate) fn gauge(&self, stage: &Arc<StageCounters>) {
        let mut gauges = self
            .shared
            .gauges
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if !gauges.iter().any(|g| Arc::ptr_eq(g, stage)) {
            gauges.push(Arc::clone(stage));
        }
        self.shared.wanted.store(true, Ordering::Relaxed);
    }

    /// Whether `stage` registered a knob or a gauge (the tuner needs its consumer's waits).
    pub(crate) fn watches(&self, stage: &Arc<StageCounters>) -> bool {
        self.shared
            .gauges
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .any(|g| Arc::ptr_eq(g, stage))
    }

    /// Whether any stage registered a knob or a gauge (else no task is needed).
    pub(crate) fn wanted(&self) -> bool {
        self.shared.wanted.load(Ordering::Relaxed)
    }

    /// The tuning loop; the epoch spawns it at its first poll and aborts it when dropped.
    pub(crate) async fn run(self, stats: Stats) {
        let mut interval = tokio::time::interval(TICK);
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        interval.tick().await;
        let mut last = Instant::now();
        loop {
            interval.tick().await;
            let now = Instant::now();
            let dt = now - last;
            last = now;
            self.tick(&stats, dt);
        }
    }

    /// One look at the statistics, and the decisions it leads to.
    pub(crate) fn tick(&self, stats: &Stats, dt: Duration) {
        let gauges: Vec<Arc<StageCounters>> = self
            .shared
            .gauges
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        for g in &gauges {
            g.sample_buffered();
        }
        let knobs: Vec<Arc<Knob>> = self
            .shared
            .knobs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let stages = stats.raw_snapshot();
        let per_element = bytes_per_element(&stages);
        // What the buffers hold now, and what they may come to hold (a buffer with a limit
        // counts at its limit): growth must fit in the budget at the limit, not at today's fill.
        let (memory, reserved) =
            stages
                .iter()
                .zip(&per_element)
                .fold((0.0f64, 0.0f64), |(held, reserved), (s, bpe)| {
                    (
                        held + s.buffered as f64 * bpe,
                        reserved + s.buffered.max(s.buffer_limit) as f64 * bpe,
                    )
                });
        stats.set_memory(memory as u64);
        let budget = self.shared.budget;
        let over = memory > budget.ram as f64;
        if over {
            // Give memory back: halve the autotuned buffer that holds the most bytes.
            let largest = knobs
                .iter()
                .filter(|k| k.kind == KnobKind::Buffer && k.get() > k.min)
                .max_by(|a, b| {
                    let bytes = |k: &Knob| k.get() as f64 * per_element[k.stage.index()];
                    bytes(a).total_cmp(&bytes(b))
                });
            if let Some(k) = largest {
                k.set(k.get() / 2);
            }
        }
        let secs = dt.as_secs_f64().max(1e-6);
        // What each knob's stage did since the last tick.
        let observed: Vec<Option<Observed>> = knobs
            .iter()
            .map(|knob| {
                let s = stages.get(knob.stage.index())?;
                let mut st = knob.state.lock().unwrap_or_else(PoisonError::into_inner);
                let seen = Observed {
                    waited: s.wait.saturating_sub(st.wait).as_secs_f64() / secs,
                    utilisation: s.worker_busy.saturating_sub(st.worker_busy).as_secs_f64()
                        / secs
                        / knob.get() as f64,
                    full: s.full_events.saturating_sub(st.full_events),
                };
                st.wait = s.wait;
                st.worker_busy = s.worker_busy;
                st.full_events = s.full_events;
                Some(seen)
            })
            .collect();
        // The cores the autotuned parallel stages keep busy: a worker that idles costs little,
        // so the budget bounds what they use, not how many threads exist.
        let mut busy_cores: f64 = knobs
            .iter()
            .zip(&observed)
            .filter(|(k, _)| k.kind == KnobKind::Parallelism)
            .filter_map(|(k, o)| o.as_ref().map(|o| o.utilisation * k.get() as f64))
            .sum();
        let cpu = budget.cpu as f64;
        if busy_cores > cpu + CPU_SLACK {
            // Over the budget: take a worker from the least busy stage that can give one.
            let idlest = knobs
                .iter()
                .zip(&observed)
                .filter(|(k, _)| k.kind == KnobKind::Parallelism && k.get() > k.min)
                .filter_map(|(k, o)| o.as_ref().map(|o| (k, o.utilisation)))
                .min_by(|a, b| a.1.total_cmp(&b.1));
            if let Some((k, utilisation)) = idlest {
                busy_cores -= utilisation;
                k.set(k.get() - 1);
            }
        }
        let mut spare_ram = (budget.ram as f64 - reserved).max(0.0);
        for (knob, seen) in knobs.iter().zip(observed) {
            let Some(seen) = seen else { continue };
            let mut st = knob.state.lock().unwrap_or_else(PoisonError::into_inner);
            if st.cooldown > 0 {
                st.cooldown -= 1;
                continue;
            }
            let value = knob.get();
            let next = match knob.kind {
                KnobKind::Parallelism => {
                    if seen.waited > WAITED
                        && seen.utilisation >= BUSY_TO_GROW
                        && busy_cores + 1.0 <= cpu + CPU_SLACK
                        && value < knob.max
                    {
                        busy_cores += 1.0;
                        value + 1
                    } else if seen.utilisation < BUSY_TO_SHRINK && value > knob.min {
                        // One quiet tick may be noise (a descheduled consumer); two are not.
                        st.idle_ticks += 1;
                        if st.idle_ticks >= IDLE_TICKS_TO_SHRINK {
                            st.idle_ticks = 0;
                            value - 1
                        } else {
                            value
                        }
                    } else {
                        st.idle_ticks = 0;
                        value
                    }
                }
                KnobKind::Buffer => {
                    // A consumer that waits most of the time: grow faster.
                    let factor = if seen.waited > 0.5 { 4 } else { 2 };
                    let grow = (value * factor).min(knob.max);
                    let cost = (grow - value) as f64 * per_element[knob.stage.index()];
                    if !over
                        && seen.waited > WAITED
                        && seen.full > 0
                        && grow > value
                        && cost <= spare_ram
                    {
                        spare_ram -= cost;
                        grow
                    } else {
                        value
                    }
                }
            };
            if next != value {
                knob.set(next);
                // A buffer's new size shows at its next chunk; a worker's only once it has
                // taken work, so parallelism waits longer before judging its change.
                st.cooldown = match knob.kind {
                    KnobKind::Parallelism => COOLDOWN,
                    KnobKind::Buffer => 0,
                };
            }
        }
    }
}

/// What a knob's stage did in the last tick.
#[derive(Debug)]
struct Observed {
    /// Share of the tick its consumer waited on it.
    waited: f64,
    /// Its workers' busy time over the tick, per worker.
    utilisation: f64,
    /// Times its producer found the buffer full.
    full: u64,
}

/// Each stage's bytes per element: counted where a reader counts bytes, else carried down from
/// its inputs (bytes in = bytes out), else nothing known (0).
fn bytes_per_element(stages: &[StageSnapshot]) -> Vec<f64> {
    // Stages are registered consumers first, so inputs come later in the list: walk it
    // backwards and every stage's inputs are done before it.
    let mut bytes = vec![0.0f64; stages.len()];
    for (i, s) in stages.iter().enumerate().rev() {
        if s.bytes > 0 {
            bytes[i] = s.bytes as f64;
        } else {
            bytes[i] = stages
                .iter()
                .enumerate()
                .filter(|(_, input)| input.consumer == Some(i))
                .map(|(j, _)| bytes[j])
                .sum();
        }
    }
    stages
        .iter()
        .zip(bytes)
        .map(|(s, b)| {
            if s.elements == 0 {
                0.0
            } else {
                b / s.elements as f64
            }
        })
        .collect()
}

/// The machine's physical memory in bytes (Linux: /proc/meminfo), if it can be read.
pub(crate) fn physical_memory() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stage(bytes: u64, elements: u64, consumer: Option<usize>) -> StageSnapshot {
        StageSnapshot {
            name: "s",
            label: None,
            depth: 0,
            nested: false,
            consumer,
            elements,
            errors: 0,
            skipped: 0,
            busy: Duration::ZERO,
            wait: Duration::ZERO,
            worker_busy: Duration::ZERO,
            parallelism: 0,
            bytes,
            buffered: 0,
            buffered_avg: 0.0,
            buffer_limit: 0,
            full_events: 0,
            blocked: Duration::ZERO,
            autotuned: false,
        }
    }

    #[test]
    fn bytes_flow_down_the_pipeline() {
        // batch(4) <- map <- reader (1000 records of 100 bytes).
        let stages = [
            stage(0, 250, None),
            stage(0, 1000, Some(0)),
            stage(100_000, 1000, Some(1)),
        ];
        let bpe = bytes_per_element(&stages);
        assert_eq!(bpe, vec![400.0, 100.0, 100.0]);
    }

    #[test]
    fn physical_memory_is_read_on_linux() {
        if cfg!(target_os = "linux") {
            assert!(physical_memory().is_some_and(|b| b > 1 << 20));
        }
    }
}
