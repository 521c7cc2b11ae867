//! The recipe's settings: `named`, `with_options`.

use std::sync::Arc;

use crate::engine::Dataset;
use crate::options::Options;

impl<T: Send + 'static> Dataset<T> {
    /// Names this stage in the statistics and the report (tf.data's `name=` argument of
    /// every transformation): `ds.map_parallel(AUTOTUNE, decode).named("decode")` shows as
    /// `map_parallel (decode)`. The pipeline is otherwise unchanged.
    ///
    /// ```
    /// use futures::StreamExt;
    /// use streamload::Dataset;
    /// # tokio_test::block_on(async {
    /// let mut epoch = Dataset::range(0, 4).map(|x| x * 2).named("double").iter();
    /// while let Some(x) = epoch.next().await { x?; }
    /// let stages = epoch.stats().snapshot();
    /// assert!(stages.iter().any(|s| s.display_name() == "map (double)" && s.elements == 4));
    /// assert!(epoch.stats().to_string().contains("map (double)"));
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    pub fn named(&self, label: &str) -> Dataset<T> {
        let inner = self.clone();
        let label: Arc<str> = label.into();
        // The stage's statistics take the label when they are registered.
        self.same_stage(self.options().clone(), move |ctx| {
            inner.build(&ctx.labelled(Arc::clone(&label)))
        })
    }

    /// Sets pipeline-wide [`Options`] (tf.data's `with_options`): they apply to every stage of
    /// the pipeline this dataset ends, upstream included.
    ///
    /// ```
    /// use streamload::{Dataset, Options};
    /// let ds = Dataset::range(0, 100).map_parallel(4, |x| x).with_options(Options::new().deterministic(false));
    /// ```
    pub fn with_options(&self, options: Options) -> Dataset<T> {
        let merged = self.options().merge(&options);
        let input = self.clone();
        // Not a stage of its own: it only changes the options, so it is not counted. The
        // options that decide the elements and their order (the global seed, determinism)
        // are part of the recipe; the budgets and statistics are not.
        // Every field named: one added later does not build until it is keyed or left out.
        let Options {
            deterministic,
            seed,
            stats_timing: _,
            cpu_budget: _,
            ram_budget: _,
        } = &merged;
        let key = crate::engine::params_key(&(seed, deterministic));
        let mut ds = self.same_stage(merged, move |ctx| input.build(ctx));
        if options.seed.is_some() || options.deterministic.is_some() {
            ds = ds.keyed(key);
        }
        ds
    }
}
