//! The report: [`Stats`]'s `Display`, one row per stage as the user wrote the pipeline,
//! then the buffers and the bottleneck.
//!
//! Every figure is per copy and per worker, clamped to what can hold (a stage is busy at
//! most all the time, the stages keep at most the machine's cores busy): sampled timings
//! overshoot a little, and a figure past its bound would only show the noise.

use std::fmt;

use super::diagnosis::{self, share};
use super::{Row, Stats, View};

impl fmt::Display for Stats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // One view for the rows and the verdict, so that they agree.
        let view = self.view();
        let timed = self.registry.timing;
        write_rows(f, &view, timed)?;
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
        if timed {
            writeln!(f, "bottleneck: {}", diagnosis::diagnose(&view))
        } else {
            writeln!(f, "bottleneck: {}", self.bottleneck())
        }
    }
}

/// The order rows are printed in: upstream first, each stage after its inputs and, for a
/// stage that builds inner datasets, after their stages (`rows` lists consumers before
/// their inputs).
pub(super) fn upstream_first(rows: &[Row]) -> Vec<usize> {
    fn visit(at: usize, rows: &[Row], out: &mut Vec<usize>, seen: &mut [bool]) {
        if std::mem::replace(&mut seen[at], true) {
            return;
        }
        // Inputs in the pipeline first, then the inner datasets' stages.
        let inputs = (0..rows.len()).filter(|&i| {
            rows[i].snap.consumer == Some(at) && rows[i].snap.nested == rows[at].snap.nested
        });
        let inner = (0..rows.len()).filter(|&i| {
            rows[i].snap.consumer == Some(at) && rows[i].snap.nested != rows[at].snap.nested
        });
        for i in inputs.chain(inner).collect::<Vec<_>>() {
            visit(i, rows, out, seen);
        }
        out.push(at);
    }
    let mut out = Vec::with_capacity(rows.len());
    let mut seen = vec![false; rows.len()];
    for root in (0..rows.len()).filter(|&i| rows[i].snap.consumer.is_none()) {
        visit(root, rows, &mut out, &mut seen);
    }
    // Any stage not reached from a root (none, unless the registry is inconsistent).
    for i in (0..rows.len()).rev() {
        if !seen[i] {
            out.push(i);
        }
    }
    out
}

/// The table: a header, then one line per stage, upstream first.
pub(super) fn write_rows(f: &mut impl fmt::Write, view: &View, timed: bool) -> fmt::Result {
    let wall = view.wall;
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
    for i in upstream_first(&view.rows) {
        let row = &view.rows[i];
        let s = &row.snap;
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
            let each = share(s.worker_busy, wall, row.copies * s.parallelism);
            format!("{}@{:.0}%{auto}", s.parallelism, 100.0 * each)
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
        // Busy time is measured only with stage timing.
        let busy = if timed {
            format!("{:.1}", 100.0 * share(s.busy, wall, row.copies))
        } else {
            "-".to_string()
        };
        // Errors skipped within a budget (`ignore_errors_within`) follow the errors yielded.
        let errors = match s.skipped {
            0 => s.errors.to_string(),
            n => format!("{} ({n} skipped)", s.errors),
        };
        writeln!(
            f,
            "{:<32} {:>12} {:>12.0} {:>9} {:>7} {:>7.1} {:>8.1} {:>14} {:>15} {:>6}",
            name,
            s.elements,
            s.elements as f64 / secs,
            mb,
            busy,
            100.0 * share(s.wait, wall, row.copies),
            100.0 * share(s.blocked, wall, row.copies * s.parallelism.max(1)),
            workers,
            buffer,
            errors
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::diagnosis::tests::{S, STAGE, view};

    fn table(v: &View) -> Vec<Vec<String>> {
        let mut out = String::new();
        write_rows(&mut out, v, true).expect("written");
        out.lines()
            .skip(1)
            .map(|l| l.split_whitespace().map(str::to_string).collect())
            .collect()
    }

    #[test]
    fn figures_stay_within_their_bounds() {
        // Sampled estimates past the wall time: a worker at 107%, a stage at 153%, inner
        // readers waiting 9 s in all over 1 s with 8 at once.
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
                S {
                    name: "tfrecord",
                    consumer: Some(1),
                    nested: true,
                    copies: 8,
                    wait: 9.0,
                    ..STAGE
                },
            ],
        );
        let rows = table(&v);
        // Upstream first: the inner reader, the map, the map_parallel.
        assert_eq!(rows[0][..2], ["inner", "tfrecord"]);
        assert_eq!(rows[1][0], "map");
        assert_eq!(rows[2][0], "map_parallel");
        for row in &rows {
            let n = row.len();
            // busy% and wait% (columns 4 and 5 counted from the end's errors, buffer,
            // workers, blocked%).
            let busy: f64 = row[n - 6].parse().expect("busy%");
            let wait: f64 = row[n - 5].parse().expect("wait%");
            assert!((0.0..=100.0).contains(&busy), "{row:?}");
            assert!((0.0..=100.0).contains(&wait), "{row:?}");
        }
        assert_eq!(rows[2][rows[2].len() - 3], "1@100%");
    }
}
