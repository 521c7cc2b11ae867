//! The report: [`Stats`]'s `Display`, one row per stage as the user wrote the pipeline,
//! then the buffers and the bottleneck.
//!
//! Every figure is per copy and per worker, clamped to what can hold (a stage is busy at
//! most all the time, the stages keep at most the machine's cores busy): sampled timings
//! overshoot a little, and a figure past its bound would only show the noise.

use std::fmt;

use super::Stats;
use super::diagnosis::{self, share};

impl fmt::Display for Stats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // One view for the rows and the verdict, so that they agree.
        let view = self.view();
        let wall = view.wall;
        let timed = self.registry.timing;
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
        for row in view.rows.iter().rev() {
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
        if timed {
            writeln!(f, "bottleneck: {}", diagnosis::diagnose(&view))
        } else {
            writeln!(f, "bottleneck: {}", self.bottleneck())
        }
    }
}
