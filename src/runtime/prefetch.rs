//! Cache hints for the element a worker takes next.
//!
//! Records come out of a shuffle buffer (or any buffer larger than the cache) cold: the first
//! reads of a parse stall on memory, one after the other, as each field's position depends on
//! the bytes before it. A worker that asks the memory system for the next record's bytes
//! before it runs the user's function on the current one overlaps those stalls with useful
//! work.

use std::any::Any;

use bytes::Bytes;

/// Cache lines asked for at each end of a byte string. Small fields cluster around a large
/// one (a `tf.train.Example`'s label and weights before or after its image bytes), so the
/// head and the tail of a record hold what a parse reads first.
const LINES_AT_EACH_END: usize = 3;
const LINE: usize = 64;

/// Hints the cache to fetch the ends of `element` when it is a byte string (`Bytes`,
/// `Vec<u8>`); other types are left alone (the check is resolved at compile time).
#[inline]
pub(crate) fn prefetch_element<T: 'static>(element: &T) {
    let any = element as &dyn Any;
    let bytes: &[u8] = if let Some(b) = any.downcast_ref::<Bytes>() {
        b
    } else if let Some(v) = any.downcast_ref::<Vec<u8>>() {
        v
    } else {
        return;
    };
    let ends = LINES_AT_EACH_END * LINE;
    if bytes.len() <= 2 * ends {
        for at in (0..bytes.len()).step_by(LINE) {
            hint(&bytes[at]);
        }
    } else {
        for line in 0..LINES_AT_EACH_END {
            hint(&bytes[line * LINE]);
            hint(&bytes[bytes.len() - 1 - line * LINE]);
        }
    }
}

/// Asks for the cache line holding `byte`; never faults, never waits.
#[inline(always)]
fn hint(byte: &u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `_mm_prefetch` only hints the cache; it reads nothing and cannot fault. SSE is
    // part of every x86_64 target.
    #[allow(unsafe_code)]
    unsafe {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        _mm_prefetch::<_MM_HINT_T0>(std::ptr::from_ref(byte).cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = byte;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hints_stay_inside_byte_strings_of_every_length() {
        // Every length around the head-and-tail boundary, as `Bytes` and as `Vec<u8>`: an
        // index past the end would panic.
        let backing = Bytes::from(vec![7u8; 4096]);
        for len in 0..=2 * LINES_AT_EACH_END * LINE + 2 * LINE {
            let bytes = backing.slice(100..100 + len);
            prefetch_element(&bytes);
            prefetch_element(&bytes.to_vec());
            assert_eq!(bytes.len(), len);
        }
    }
}
