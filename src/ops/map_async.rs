//! Stream for the [`map_async`](crate::Dataset::map_async) method: every call a spawned task,
//! `buffered` (input order) or `buffer_unordered` (completion order) over them.

use std::future::Future;
use std::sync::Arc;

use futures::stream::StreamExt;

use crate::checkpoint::Opaque;
use crate::dataset::BoxStream;
use crate::runtime::{self, catch_panic};

const STAGE: &str = "map_async";

pub(crate) fn map_async<T, U, F, Fut>(
    input: BoxStream<T>,
    f: Arc<F>,
    parallelism: usize,
    deterministic: bool,
) -> BoxStream<U>
where
    T: Send + 'static,
    U: Send + 'static,
    F: Fn(T) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = anyhow::Result<U>> + Send + 'static,
{
    let calls = input.map(move |item| {
        let f = Arc::clone(&f);
        async move {
            let fut = catch_panic(STAGE, || Ok(f(item?)))?;
            // The task is aborted if this future is dropped (the epoch was dropped).
            let task = runtime::spawn(STAGE, fut)?;
            task.await.map_err(|e| runtime::join_error(STAGE, e))?
        }
    });
    if deterministic {
        Box::pin(Opaque::new(calls.buffered(parallelism), "map_async"))
    } else {
        Box::pin(Opaque::new(
            calls.buffer_unordered(parallelism),
            "map_async",
        ))
    }
}
