//! Where elements come from: integer ranges, in-memory collections, async streams and
//! blocking generators. File readers live in `format`.

pub(crate) mod from_generator;
pub(crate) mod from_iter;
pub(crate) mod range;
