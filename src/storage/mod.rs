//! Where bytes come from: every file format reads through an async reader from here, so
//! formats do not care whether a file is local or remote.
//!
//! Local files are read in blocks by positioned reads on blocking threads, several blocks
//! ahead of the consumer ([`local::read_ahead`]), and handed to the formats as one
//! `AsyncBufRead` (`tokio_util::io::StreamReader`): one copy from the kernel into a block, one
//! into the decoder's frame buffer.

pub(crate) mod local;
