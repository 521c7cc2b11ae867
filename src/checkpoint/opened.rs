//! The files an epoch opened, by what they were then: saved with its checkpoints, so a
//! resume refuses a file that changed whatever state it reopens the file from.
//!
//! A reader's own state names its file's identity once the file is open; but a state saved
//! before the file was open (a mark taken before its first element, an interleave between two
//! files) does not, and a resume from it would read a changed file from its start and skip
//! what the consumer had received as if nothing changed. The ledger closes that gap: every
//! file opened in the epoch is noted with its identity (the last [`KEEP`] of them), the
//! checkpoint carries them, and a resumed epoch checks every file it opens that is in the
//! list, however it came to open it.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};

use crate::storage::{Identity, Location};

/// Files kept in a checkpoint: the most recently opened (a few bytes each).
pub(crate) const KEEP: usize = 128;

/// The files an epoch opened; shared by all its stages.
#[derive(Debug, Clone, Default)]
pub(crate) struct Ledger(Arc<Mutex<Inner>>);

#[derive(Debug, Default)]
struct Inner {
    /// The files opened last, oldest first: `(name's hash, identity)`.
    recent: VecDeque<(u64, Identity)>,
    /// What each file was at the checkpoint this epoch was restored from.
    expected: HashMap<u64, Identity>,
}

fn key(location: &Location) -> u64 {
    farmhash::fingerprint64(location.to_string().as_bytes())
}

impl Ledger {
    /// `location` was opened and is `identity`.
    pub(crate) fn opened(&self, location: &Location, identity: Option<Identity>) {
        let Some(identity) = identity else { return };
        let key = key(location);
        let mut inner = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        inner.recent.retain(|(k, _)| *k != key);
        inner.recent.push_back((key, identity));
        if inner.recent.len() > KEEP {
            inner.recent.pop_front();
        }
    }

    /// What `location` was when the checkpoint this epoch resumes from was taken, if it had
    /// been opened by then.
    pub(crate) fn expected(&self, location: &Location) -> Option<Identity> {
        let inner = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        inner.expected.get(&key(location)).copied()
    }

    /// The list a checkpoint saves: `(name's hash, size, version)`, oldest first.
    pub(crate) fn save(&self) -> Vec<(u64, u64, u64)> {
        let inner = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        inner
            .recent
            .iter()
            .map(|(k, i)| (*k, i.size, i.version))
            .collect()
    }

    /// Goes on from a checkpoint's list.
    pub(crate) fn restore(&self, files: &[(u64, u64, u64)]) {
        let mut inner = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        for &(key, size, version) in files {
            let identity = Identity { size, version };
            inner.expected.insert(key, identity);
            inner.recent.push_back((key, identity));
        }
    }
}
