//! The report: [`Stats`]'s `Display`, one row per stage and the bottleneck.

use std::fmt;
use std::time::Duration;

use super::{StageSnapshot, Stats};

/// How many copies of `s` run at once: for the stages of datasets made inside another stage
/// (interleave's per-file readers), the readers that stage runs; else 1. Their waits add up
/// over the copies, so the report divides by this.
pub(super) fn instances(s: &StageSnapshot, stages: &[StageSnapshot]) -> f64 {
    let mut at = s;
    while at.nested {
        match at.consumer.and_then(|i| stages.get(i)) {
            Some(consumer) => at = consumer,
            None => return 1.0,
        }
    }
    if std::ptr::eq(at, s) {
        1.0
    } else {
        at.parallelism.max(1) as f64
    }
}

pub(super) fn percent(part: Duration, whole: Duration) -> f64 {
    if whole.is_zero() {
        0.0
    } else {
        100.0 * part.as_secs_f64() / whole.as_secs_f64()
    }
}

impl fmt::Display for Stats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let wall = self.elapsed();
        let stages = self.snapshot();
        writeln!(
            f,
            "{:<32} {:>12} {:>12} {:>9} {:>7} {:>7} {:>8} {:>14} {:>15} {:>6}",
            "stage (upstream first)",
            "elements",
            "per second",
            "MB/s",
            "busy%",
            "wait%",
            "blocked%",
            "workers",
            "buffer now/avg",
            "errors"
        )?;
        let secs = wall.as_secs_f64().max(1e-9);
        for s in stages.iter().rev() {
            let name = s.display_name();
            let name = if s.nested {
                format!("  inner {name}")
            } else {
                name
            };
            let auto = if s.autotuned { " auto" } else { "" };
            let workers = if s.parallelism == 0 {
                "-".to_string()
            } else if s.worker_busy.is_zero() {
                format!("{}{auto}", s.parallelism)
            } else {
                format!(
                    "{}@{:.0}%{auto}",
                    s.parallelism,
                    percent(s.worker_busy, wall) / s.parallelism as f64
                )
            };
            let buffer = match (s.buffer_limit, s.buffered, s.buffered_avg) {
                (0, 0, 0.0) => "-".to_string(),
                (0, now, avg) => format!("{now}/{avg:.0}"),
                (limit, now, avg) => format!("{now}/{avg:.0} of {limit}{auto}"),
            };
            let mb = if s.bytes == 0 {
                "-".to_string()
            } else {
                format!("{:.1}", s.bytes as f64 / 1e6 / secs)
            };
            writeln!(
                f,
                "{:<32} {:>12} {:>12.0} {:>9} {:>7.1} {:>7.1} {:>8.1} {:>14} {:>15} {:>6}",
                name,
                s.elements,
                s.elements as f64 / secs,
                mb,
                percent(s.busy, wall),
                percent(s.wait, wall) / instances(s, &stages),
                percent(s.blocked, wall) / s.parallelism.max(1) as f64,
                workers,
                buffer,
                s.errors
            )?;
        }
        let budget = self.registry.budget;
        let over = if self.peak_buffered_bytes() > budget.ram {
            " (over it: buffers of a fixed size are kept as given; make them smaller)"
        } else {
            ""
        };
        writeln!(
            f,
            "buffers: ~{:.1} MB held now, {:.1} MB at most, of a {:.0} MB budget{over}; autotuned stages may use {} cores",
            self.buffered_bytes() as f64 / 1e6,
            self.peak_buffered_bytes() as f64 / 1e6,
            budget.ram as f64 / 1e6,
            budget.cpu
        )?;
        writeln!(f, "bottleneck: {}", self.bottleneck())
    }
}
