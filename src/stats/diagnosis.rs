//! The bottleneck: which stage limits throughput, and what to do about it.
//!
//! The diagnosis reads the figures of a [`View`] as shares of the epoch's time (0 to 1,
//! measurement noise clamped), and applies [`RULES`], a table read top to bottom: the first
//! rule that some stage meets names the bottleneck (among the stages that meet it, the one
//! with the highest figure). Before the table, one question about the pipeline as a whole:
//! does the consumer spend most of its time inside the pipeline at all? If not, the consumer
//! is the bottleneck. After it, when no stage is saturated, the busiest one is named.
//!
//! The thresholds leave wide margins: a saturated stage shows 90% or more on a loaded
//! machine, an idle one little, so that identical runs give the same verdict.

use std::fmt;

use super::{Row, View};

/// The consumer spends less than this share of its time inside the pipeline (polling or
/// waiting on it): the pipeline keeps up, the consumer is the bottleneck.
const CONSUMER_BOUND: f64 = 0.25;

/// What a stage does, as far as the diagnosis is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// `from_generator`: the user's iterator on a thread of its own.
    Generator,
    /// Runs the user's function on workers of its own (`map_parallel`, `map_async`).
    Parallel,
    /// Reads files or objects (a file dataset's reader).
    Reader,
    /// Runs the user's function inline, on the task that polls it.
    UserFunction,
    /// Anything else, run inline.
    Other,
}

/// The stages that read files or objects.
const READERS: [&str; 4] = ["tfrecord", "text_line", "fixed_length_record", "csv"];

/// The stages that run a user's function inline on their consumer's task.
const USER_FUNCTIONS: [&str; 6] = [
    "map",
    "filter",
    "scan",
    "take_while",
    "random_map",
    "flat_map",
];

/// One stage's figures, as shares of the epoch's time per copy and per worker (0..=1).
#[derive(Debug, Clone)]
pub(super) struct Stage {
    /// How the report names it (inner stages say so).
    pub(super) name: String,
    pub(super) kind: Kind,
    /// Its own work on the task that polls it.
    pub(super) own: f64,
    /// Its workers' average busy share (`map_parallel`, a generator's thread); 0 without.
    pub(super) workers: f64,
    /// How many workers or readers it runs.
    pub(super) parallelism: u64,
    /// How long its consumer waited on it (for a reader: on storage).
    pub(super) wait: f64,
}

/// A share of `whole`, per copy, clamped to 0..=1: sampled timings can overshoot a little
/// (a sampled poll stands for many; a worker's call may straddle the snapshot), and a
/// share above 1 would only say the measurement is noisy.
pub(super) fn share(part: std::time::Duration, whole: std::time::Duration, copies: u64) -> f64 {
    if whole.is_zero() {
        return 0.0;
    }
    (part.as_secs_f64() / whole.as_secs_f64() / copies.max(1) as f64).clamp(0.0, 1.0)
}

impl Stage {
    pub(super) fn of(row: &Row, view: &View) -> Stage {
        let s = &row.snap;
        let kind = if s.name == "from_generator" {
            Kind::Generator
        } else if s.name == "map_parallel" || s.name == "map_async" {
            Kind::Parallel
        } else if READERS.contains(&s.name) {
            Kind::Reader
        } else if USER_FUNCTIONS.contains(&s.name) {
            Kind::UserFunction
        } else {
            Kind::Other
        };
        let name = if s.nested {
            format!("{} (inside interleave)", s.display_name())
        } else {
            s.display_name()
        };
        Stage {
            name,
            kind,
            own: share(s.busy, view.wall, row.copies),
            workers: share(s.worker_busy, view.wall, row.copies * s.parallelism.max(1)),
            parallelism: s.parallelism,
            wait: share(s.wait, view.wall, row.copies),
        }
    }
}

/// The pipeline as a whole: what the verdicts quote beside the stage.
#[derive(Debug, Clone)]
pub(super) struct Pipeline {
    /// Share of the time the consumer spent inside the pipeline.
    pub(super) in_pipeline: f64,
    /// Cores the stages keep busy (clamped to the machine's), and the machine's.
    pub(super) cores_busy: f64,
    pub(super) cores: usize,
}

/// A row of the table: a condition on one stage's figures, and the verdict it leads to.
pub(super) struct Rule {
    /// What the rule diagnoses.
    pub(super) what: &'static str,
    /// The figure it judges a stage by (`None`: the rule does not apply to that stage).
    pub(super) figure: fn(&Stage) -> Option<f64>,
    /// The least figure that makes the stage the bottleneck.
    pub(super) at_least: f64,
    /// The verdict and the advice.
    pub(super) says: fn(&Stage, &Pipeline) -> String,
}

/// The diagnosis, read top to bottom (after the consumer check).
pub(super) const RULES: [Rule; 4] = [
    Rule {
        what: "a generator's thread is busy nearly all the time",
        figure: |s| (s.kind == Kind::Generator).then_some(s.workers),
        at_least: 0.6,
        says: |s, _| {
            format!(
                "{} is busy {:.0}% of its thread: the generator is the bottleneck (it runs on one thread); \
                 make it yield cheap items (paths, ids, raw bytes) and move its work into map_parallel",
                s.name,
                100.0 * s.workers
            )
        },
    },
    Rule {
        what: "a parallel stage's workers are busy nearly all the time",
        figure: |s| (s.kind == Kind::Parallel).then_some(s.workers),
        at_least: 0.7,
        says: |s, p| {
            let cores = p.cores as f64;
            if p.cores_busy >= 0.85 * cores {
                format!(
                    "{} is busy {:.0}% with {n}/{n} workers, and the stages keep {:.1} of {cores:.0} cores busy: \
                     CPU-bound; add cores or make the function cheaper",
                    s.name,
                    100.0 * s.workers,
                    p.cores_busy,
                    n = s.parallelism
                )
            } else {
                format!(
                    "{} is busy {:.0}% with {n}/{n} workers while cores are idle ({:.1} of {cores:.0} busy): \
                     raise its num_parallel_calls (or use AUTOTUNE)",
                    s.name,
                    100.0 * s.workers,
                    p.cores_busy,
                    n = s.parallelism
                )
            }
        },
    },
    Rule {
        what: "a stage's own work fills the task that polls it",
        figure: |s| (s.kind != Kind::Generator && s.kind != Kind::Parallel).then_some(s.own),
        at_least: 0.5,
        says: |s, _| {
            let busy = 100.0 * s.own;
            match s.kind {
                Kind::Reader => format!(
                    "{} is busy {busy:.0}% per reader: reading and decoding are CPU-bound; \
                     more parallel reads help only while cores are idle",
                    s.name
                ),
                Kind::UserFunction => format!(
                    "{} is busy {busy:.0}% on the task that polls it: its function runs one element at a time; \
                     move its work into map_parallel",
                    s.name
                ),
                _ => format!(
                    "{} is busy {busy:.0}% on the task that polls it: it is CPU-bound there; \
                     make it cheaper, or put a prefetch after it so it overlaps with what follows",
                    s.name
                ),
            }
        },
    },
    Rule {
        what: "a file reader waits on storage most of the time",
        figure: |s| (s.kind == Kind::Reader).then_some(s.wait),
        at_least: 0.5,
        says: |s, _| {
            format!(
                "{} waits {:.0}% of the time on storage (per reader): I/O-bound; read more files at once \
                 (num_parallel_reads, or the interleave's cycle_length)",
                s.name,
                100.0 * s.wait
            )
        },
    },
];

/// The bottleneck, and the rule that named it.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Verdict {
    /// The rule's `what`, or the check that came before or after the table.
    pub(super) rule: &'static str,
    /// The stage named, if any.
    pub(super) stage: Option<String>,
    pub(super) text: String,
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

pub(super) const NO_STAGES: &str = "no stages yet";
pub(super) const CONSUMER: &str = "the consumer spends most of its time outside the pipeline";
pub(super) const NOTHING_SATURATED: &str = "no stage is saturated";

/// The cores the stages keep busy: each stage's own time and its workers', clamped to the
/// machine's cores (the sum of sampled estimates may overshoot).
pub(super) fn cores_busy(view: &View) -> f64 {
    let secs = view.wall.as_secs_f64();
    if secs <= 0.0 {
        return 0.0;
    }
    let cpu: f64 = view
        .rows
        .iter()
        .map(|r| (r.snap.busy + r.snap.worker_busy).as_secs_f64())
        .sum();
    (cpu / secs).clamp(0.0, view.cores as f64)
}

/// Judges `view`.
pub(super) fn diagnose(view: &View) -> Verdict {
    if view.rows.is_empty() {
        return Verdict {
            rule: NO_STAGES,
            stage: None,
            text: NO_STAGES.into(),
        };
    }
    let pipeline = Pipeline {
        in_pipeline: view.in_pipeline.clamp(0.0, 1.0),
        cores_busy: cores_busy(view),
        cores: view.cores,
    };
    if pipeline.in_pipeline < CONSUMER_BOUND {
        return Verdict {
            rule: CONSUMER,
            stage: None,
            text: format!(
                "the consumer: it spent only {:.0}% of the time waiting on the pipeline, {:.0}% in its own work; \
                 the input pipeline keeps up",
                100.0 * pipeline.in_pipeline,
                100.0 * (1.0 - pipeline.in_pipeline)
            ),
        };
    }
    let stages: Vec<Stage> = view.rows.iter().map(|r| Stage::of(r, view)).collect();
    for rule in &RULES {
        let worst = stages
            .iter()
            .filter_map(|s| (rule.figure)(s).map(|f| (f, s)))
            .filter(|(f, _)| *f >= rule.at_least)
            .max_by(|a, b| a.0.total_cmp(&b.0));
        if let Some((_, s)) = worst {
            return Verdict {
                rule: rule.what,
                stage: Some(s.name.clone()),
                text: (rule.says)(s, &pipeline),
            };
        }
    }
    // Nothing saturated: name the busiest stage (its own share, or its workers').
    let busiest = stages
        .iter()
        .max_by(|a, b| a.own.max(a.workers).total_cmp(&b.own.max(b.workers)));
    let (name, busy) = busiest.map_or(("?".to_string(), 0.0), |s| {
        (s.name.clone(), s.own.max(s.workers))
    });
    Verdict {
        rule: NOTHING_SATURATED,
        stage: busiest.map(|s| s.name.clone()),
        text: format!(
            "no stage is saturated (the consumer waited on the pipeline {:.0}% of the time); the busiest is {name} at {:.0}%: \
             stages wait on each other, or on CPU taken by other work",
            100.0 * pipeline.in_pipeline,
            100.0 * busy
        ),
    }
}

#[cfg(test)]
pub(super) mod tests {
    //! Each rule of the table, on synthetic figures: one second of wall time, two cores.

    use std::time::Duration;

    use super::*;
    use crate::stats::{Row, StageSnapshot, View};

    /// A stage in a synthetic view; shares of one second.
    pub(crate) struct S {
        pub(crate) name: &'static str,
        pub(crate) consumer: Option<usize>,
        pub(crate) nested: bool,
        pub(crate) copies: u64,
        pub(crate) busy: f64,
        pub(crate) workers: f64,
        pub(crate) parallelism: u64,
        pub(crate) wait: f64,
    }

    pub(crate) const STAGE: S = S {
        name: "map",
        consumer: None,
        nested: false,
        copies: 1,
        busy: 0.0,
        workers: 0.0,
        parallelism: 0,
        wait: 0.0,
    };

    pub(crate) fn view(in_pipeline: f64, stages: &[S]) -> View {
        let secs = Duration::from_secs_f64;
        View {
            wall: Duration::from_secs(1),
            cores: 2,
            in_pipeline,
            rows: stages
                .iter()
                .map(|s| Row {
                    snap: StageSnapshot {
                        name: s.name,
                        label: None,
                        depth: 0,
                        nested: s.nested,
                        consumer: s.consumer,
                        elements: 100,
                        errors: 0,
                        skipped: 0,
                        busy: secs(s.busy),
                        wait: secs(s.wait),
                        worker_busy: secs(s.workers),
                        parallelism: s.parallelism,
                        bytes: 0,
                        buffered: 0,
                        buffered_avg: 0.0,
                        buffer_limit: 0,
                        full_events: 0,
                        blocked: Duration::ZERO,
                        autotuned: false,
                    },
                    copies: s.copies,
                })
                .collect(),
        }
    }

    fn judge(in_pipeline: f64, stages: &[S]) -> Verdict {
        diagnose(&view(in_pipeline, stages))
    }

    #[test]
    fn a_consumer_that_seldom_waits_is_the_bottleneck() {
        // A busy map, but the consumer spends 95% of its time in its own work.
        let v = judge(
            0.05,
            &[S {
                busy: 0.04,
                ..STAGE
            }],
        );
        assert_eq!(v.rule, CONSUMER, "{v}");
        assert!(v.text.starts_with("the consumer"), "{v}");
    }

    #[test]
    fn a_busy_generator_thread_is_named_with_map_parallel_as_the_advice() {
        // Alone, and under a prefetch that waits on it (no stage is busy on a task).
        for stages in [
            vec![S {
                name: "from_generator",
                workers: 0.97,
                parallelism: 1,
                wait: 0.9,
                ..STAGE
            }],
            vec![
                S {
                    name: "prefetch",
                    wait: 0.9,
                    busy: 0.01,
                    ..STAGE
                },
                S {
                    name: "from_generator",
                    consumer: Some(0),
                    workers: 0.95,
                    parallelism: 1,
                    wait: 0.9,
                    ..STAGE
                },
            ],
        ] {
            let v = judge(0.9, &stages);
            assert_eq!(v.rule, RULES[0].what, "{v}");
            assert_eq!(v.stage.as_deref(), Some("from_generator"), "{v}");
            assert!(v.text.contains("move its work into map_parallel"), "{v}");
        }
    }

    #[test]
    fn a_cpu_bound_generator_inside_an_interleave_is_not_storage() {
        let v = judge(
            0.95,
            &[
                S {
                    name: "interleave",
                    wait: 0.95,
                    ..STAGE
                },
                S {
                    name: "from_generator",
                    consumer: Some(0),
                    nested: true,
                    workers: 1.0,
                    parallelism: 1,
                    wait: 1.0,
                    ..STAGE
                },
            ],
        );
        assert_eq!(v.rule, RULES[0].what, "{v}");
        assert_eq!(
            v.stage.as_deref(),
            Some("from_generator (inside interleave)"),
            "{v}"
        );
        assert!(!v.text.contains("storage"), "{v}");
    }

    #[test]
    fn saturated_workers_are_named_cpu_bound_or_short_of_workers() {
        let all_cores = judge(
            0.9,
            &[S {
                name: "map_parallel",
                workers: 1.96,
                parallelism: 2,
                ..STAGE
            }],
        );
        assert_eq!(all_cores.rule, RULES[1].what, "{all_cores}");
        assert!(all_cores.text.contains("CPU-bound"), "{all_cores}");
        assert!(all_cores.text.contains("2/2 workers"), "{all_cores}");
        // One worker busy of two cores: more workers would help.
        let idle_cores = judge(
            0.9,
            &[S {
                name: "map_parallel",
                workers: 0.98,
                parallelism: 1,
                ..STAGE
            }],
        );
        assert_eq!(idle_cores.rule, RULES[1].what, "{idle_cores}");
        assert!(
            idle_cores.text.contains("num_parallel_calls"),
            "{idle_cores}"
        );
    }

    #[test]
    fn a_heavy_inline_map_is_named_even_when_the_consumer_never_waits_pending() {
        // No prefetch: the consumer runs the map inside its `next()` (the wait is 0), and the
        // time in the pipeline says so.
        let v = judge(
            0.9,
            &[
                S {
                    name: "map",
                    busy: 0.87,
                    ..STAGE
                },
                S {
                    name: "range",
                    consumer: Some(0),
                    busy: 0.01,
                    ..STAGE
                },
            ],
        );
        assert_eq!(v.rule, RULES[2].what, "{v}");
        assert_eq!(v.stage.as_deref(), Some("map"), "{v}");
        assert!(v.text.contains("move its work into map_parallel"), "{v}");
    }

    #[test]
    fn readers_are_named_storage_bound_or_cpu_bound() {
        let waiting = judge(
            0.95,
            &[S {
                name: "tfrecord",
                wait: 0.9,
                busy: 0.05,
                ..STAGE
            }],
        );
        assert_eq!(waiting.rule, RULES[3].what, "{waiting}");
        assert!(waiting.text.contains("storage"), "{waiting}");
        // Eight readers at once, waiting 7.2 s in all over one second: 90% each.
        let parallel = judge(
            0.95,
            &[S {
                name: "tfrecord",
                copies: 8,
                parallelism: 4,
                wait: 7.2,
                ..STAGE
            }],
        );
        assert!(parallel.text.contains("waits 90%"), "{parallel}");
        let decoding = judge(
            0.95,
            &[S {
                name: "tfrecord",
                busy: 0.9,
                wait: 0.05,
                ..STAGE
            }],
        );
        assert_eq!(decoding.rule, RULES[2].what, "{decoding}");
        assert!(decoding.text.contains("CPU-bound"), "{decoding}");
    }

    #[test]
    fn with_nothing_saturated_the_busiest_stage_is_named() {
        let v = judge(
            0.6,
            &[
                S {
                    name: "batch",
                    busy: 0.45,
                    ..STAGE
                },
                S {
                    name: "map_parallel",
                    consumer: Some(0),
                    workers: 0.8,
                    parallelism: 2,
                    ..STAGE
                },
            ],
        );
        // Its own 45% against the workers' 40% each.
        assert_eq!(v.rule, NOTHING_SATURATED, "{v}");
        assert_eq!(v.stage.as_deref(), Some("batch"), "{v}");
        assert!(v.text.contains("batch at 45%"), "{v}");
    }

    #[test]
    fn figures_past_their_bounds_are_clamped() {
        // 2.6 cores busy on a 2-core machine, one worker at 107%: noise, not news.
        let v = view(
            0.9,
            &[
                S {
                    name: "map_parallel",
                    workers: 1.07,
                    parallelism: 1,
                    ..STAGE
                },
                S {
                    name: "map",
                    consumer: Some(0),
                    busy: 1.53,
                    ..STAGE
                },
            ],
        );
        assert_eq!(cores_busy(&v), 2.0);
        let stages: Vec<Stage> = v.rows.iter().map(|r| Stage::of(r, &v)).collect();
        assert_eq!(stages[0].workers, 1.0);
        assert_eq!(stages[1].own, 1.0);
        let verdict = diagnose(&v);
        assert!(verdict.text.contains("2.0 of 2 cores"), "{verdict}");
        assert!(verdict.text.contains("busy 100%"), "{verdict}");
    }

    #[test]
    fn no_stages_no_verdict() {
        assert_eq!(judge(0.0, &[]).rule, NO_STAGES);
    }
}
