//! [concepts]: crate::guide::concepts
//! [pipelines]: crate::guide::pipelines
//! [checkpoints]: crate::guide::checkpoints
//! [data-parallel]: crate::guide::data_parallel
//! [damaged-data]: crate::guide::damaged_data
//! [tf-data]: crate::guide::tf_data
//! [python]: crate::guide::python
#![doc = include_str!("../docs/guide/README.md")]
// The chapters are the markdown files under docs/guide/, written to read on their own (on
// GitHub, say) as well as here: their links to one another are reference links whose targets
// there are the files (`[checkpoints]: checkpoints.md` at the end of a chapter). The
// definitions written above a chapter's text here come first, and the first definition of a
// label wins in Markdown, so here the same links go to the modules. Their Rust examples run as
// doc tests of these modules.

#[doc = include_str!("../docs/guide/concepts.md")]
pub mod concepts {}

/// [data-parallel]: crate::guide::data_parallel
// Its examples decode images, with the `image` feature (a default one); without it, the
// chapter is still documented, but its examples are not run.
#[cfg(any(feature = "image", not(doctest)))]
#[doc = include_str!("../docs/guide/pipelines.md")]
pub mod pipelines {}

#[doc = include_str!("../docs/guide/checkpoints.md")]
pub mod checkpoints {}

#[doc = include_str!("../docs/guide/data-parallel.md")]
pub mod data_parallel {}

#[doc = include_str!("../docs/guide/damaged-data.md")]
pub mod damaged_data {}

#[doc = include_str!("../docs/guide/tf-data.md")]
pub mod tf_data {}

#[doc = include_str!("../docs/guide/python.md")]
pub mod python {}
