//! The bottleneck: which stage limits throughput, and why.

use std::time::Duration;

use super::StageSnapshot;
use super::report::{instances, percent};

pub(super) fn bottleneck(stages: &[StageSnapshot], wall: Duration) -> String {
    // The last stage: the one nothing consumes (the first built at the top level).
    let Some(last) = stages.iter().find(|s| s.consumer.is_none() && !s.nested) else {
        return "no stages yet".into();
    };
    let waited = percent(last.wait, wall);
    if waited < 10.0 {
        return format!(
            "the consumer: it waited on the pipeline only {waited:.0}% of the time, so the input pipeline keeps up"
        );
    }
    // All cores busy: the pipeline as a whole is CPU-bound, whatever stage is heaviest.
    let cores = crate::available_cores() as f64;
    let cpu: Duration = stages.iter().map(|s| s.busy + s.worker_busy).sum();
    let used = cpu.as_secs_f64() / wall.as_secs_f64().max(1e-9);
    if used >= 0.85 * cores {
        let heaviest = stages
            .iter()
            .max_by_key(|s| s.busy + s.worker_busy)
            .map_or_else(|| "?".to_string(), StageSnapshot::display_name);
        return format!(
            "CPU: the stages keep {used:.1} of {cores:.0} cores busy (heaviest: {heaviest}); the consumer waited {waited:.0}% of the time. Add cores, or make the heaviest stage cheaper"
        );
    }
    let mut worst: Option<(f64, String)> = None;
    let mut consider = |score: f64, why: String| {
        if worst.as_ref().is_none_or(|(s, _)| score > *s) {
            worst = Some((score, why));
        }
    };
    for s in stages {
        let name = if s.nested {
            format!("{} (inside interleave)", s.display_name())
        } else {
            s.display_name()
        };
        if s.parallelism > 0 && !s.worker_busy.is_zero() {
            let busy = percent(s.worker_busy, wall) / s.parallelism as f64;
            if busy >= 80.0 {
                consider(
                    busy,
                    format!(
                        "{name} is busy {busy:.0}% with {p}/{p} workers: CPU-bound; add cores or simplify the function",
                        p = s.parallelism
                    ),
                );
            }
        }
        let busy = percent(s.busy, wall);
        if busy >= 50.0 && s.nested {
            let copies = instances(s, stages);
            consider(
                busy / copies,
                format!(
                    "{name} is busy {busy:.0}% of a core across its {copies:.0} readers: reading and decoding are CPU-bound; more parallel reads help only while cores are idle"
                ),
            );
        } else if busy >= 50.0 {
            consider(
                busy,
                format!(
                    "{name} is busy {busy:.0}% on the task that polls it: move its work into map_parallel"
                ),
            );
        }
        if s.nested && s.depth == 0 {
            let wait = percent(s.wait, wall) / instances(s, stages);
            if wait >= 50.0 {
                consider(
                    wait,
                    format!("{name} waits {wait:.0}% on its source (storage): raise cycle_length"),
                );
            }
        }
    }
    if let Some((_, why)) = worst {
        return why;
    }
    // Nothing saturated: name the busiest stage (its own time, or its workers' average).
    let share = |s: &StageSnapshot| {
        let own = percent(s.busy, wall);
        let workers = percent(s.worker_busy, wall) / s.parallelism.max(1) as f64;
        own.max(workers)
    };
    match stages.iter().max_by(|a, b| share(a).total_cmp(&share(b))) {
        Some(s) => format!(
            "no stage is saturated (the consumer waited {waited:.0}% of the time); the busiest is {} at {:.0}%: \
             stages wait on each other or on CPU taken by other work; try prefetch or more parallelism",
            s.display_name(),
            share(s)
        ),
        None => "no stages yet".into(),
    }
}
