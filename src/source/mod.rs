//! Where elements come from: integer ranges, in-memory collections, async streams,
//! blocking generators and file listings. File readers live in `format`.

pub(crate) mod from_generator;
pub(crate) mod from_iter;
pub(crate) mod list_files;
pub(crate) mod random;
pub(crate) mod range;
