//! Threads of streamload's own, for work that holds a thread for a whole epoch:
//! `map_parallel`'s workers and `from_generator`'s producer.
//!
//! Such work once ran on tokio's blocking pool, and held its threads while it waited for the
//! next group of elements: many pipelines in one runtime (8 epochs of `map_parallel(64)` with
//! `max_blocking_threads(512)`) took every thread of the pool, and the readers' short blocking
//! jobs (positioned reads of local files, directory walks) waited behind them, forever. Now
//! tokio's blocking pool serves only short jobs, which always end, and long-running workers
//! take a thread of this pool:
//!
//! - A job takes an idle thread of the pool, or a new one: the pool has no limit of its own
//!   (a worker is a stage's parallelism, which the user chose), so a worker never waits for
//!   another pipeline's.
//! - A thread whose job ended waits [`KEEP_ALIVE`] for the next one (the next epoch's workers
//!   reuse it, as tokio's pool would), then exits: an idle process holds no threads of it.
//! - A job is handed over once, through a channel, when it starts: the work itself (groups of
//!   elements to the workers, results back) does not go through the pool, so it costs nothing
//!   per element that tokio's blocking pool did not.
//! - A job stops as before: when its epoch is dropped its queue disconnects and its
//!   `CancelToken` is set; a thread that cannot be started is an error, not a panic.
//! - An idle thread is listed with its process: a child made by `fork()` (a PyTorch
//!   `DataLoader` worker running the Python package) inherits the list but not the threads,
//!   and must not hand its jobs to threads that do not exist in it.

use std::sync::Mutex;
use std::sync::mpsc;
use std::time::Duration;

/// How long an idle thread waits for a job before it exits.
pub(crate) const KEEP_ALIVE: Duration = Duration::from_secs(1);

type Job = Box<dyn FnOnce() + Send>;

/// Idle threads, each by its id and the channel it waits on.
/// Idle threads: their process, their id, where to send them a job.
static IDLE: Mutex<Vec<(u32, u64, mpsc::Sender<Job>)>> = Mutex::new(Vec::new());
static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Runs `job` on a thread of streamload's own: an idle one, or a new one.
///
/// # Errors
///
/// When no thread can be started (the process's limit on threads).
pub(crate) fn spawn_thread(
    stage: &'static str,
    job: impl FnOnce() + Send + 'static,
) -> anyhow::Result<()> {
    let mut job: Job = Box::new(job);
    loop {
        let idle = IDLE.lock().unwrap_or_else(|e| e.into_inner()).pop();
        let Some((pid, _, thread)) = idle else { break };
        if pid != std::process::id() {
            continue; // the parent's, before a fork: no such thread here
        }
        match thread.send(job) {
            Ok(()) => return Ok(()),
            // It exited after all: try the next.
            Err(mpsc::SendError(back)) => job = back,
        }
    }
    std::thread::Builder::new()
        .name(format!("streamload-{stage}"))
        .spawn(move || run(job))
        .map_err(|e| anyhow::anyhow!("{stage}: cannot start a worker thread: {e}"))?;
    Ok(())
}

/// A pool thread: runs its job, then waits for the next for [`KEEP_ALIVE`].
fn run(mut job: Job) {
    loop {
        // A panic ends the job, not the thread (user code is caught before this).
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
        let id = NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let (tx, rx) = mpsc::channel();
        IDLE.lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((std::process::id(), id, tx));
        job = match rx.recv_timeout(KEEP_ALIVE) {
            Ok(next) => next,
            Err(_) => {
                let mut idle = IDLE.lock().unwrap_or_else(|e| e.into_inner());
                match idle.iter().position(|(_, i, _)| *i == id) {
                    Some(at) => {
                        idle.swap_remove(at);
                        return;
                    }
                    // Taken as the wait ended: its job is on the way.
                    None => {
                        drop(idle);
                        match rx.recv() {
                            Ok(next) => next,
                            Err(_) => return,
                        }
                    }
                }
            }
        };
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_job_runs() {
        let (tx, rx) = std::sync::mpsc::channel();
        for i in 0..4 {
            let tx = tx.clone();
            super::spawn_thread("test", move || {
                tx.send((i, std::thread::current().id())).expect("send");
            })
            .expect("a thread");
        }
        let mut seen: Vec<_> = (0..4).map(|_| rx.recv().expect("a job ran")).collect();
        seen.sort_by_key(|(i, _)| *i);
        assert_eq!(
            seen.iter().map(|(i, _)| *i).collect::<Vec<_>>(),
            [0, 1, 2, 3]
        );
    }
}
