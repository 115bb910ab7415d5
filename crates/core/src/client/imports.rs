//! The client's session with each OST (Lustre's import): whether it may
//! send, and which life of the OST it holds state from.
//!
//! With recovery on ([`super::ClientConfig::recovery`]), a client speaks to
//! an OST only once the OST has answered its [`crate::msg::ToOst::Connect`]:
//!
//! ```text
//!  New --first send--> Connecting(fresh) --Connected--> Connected
//!                        ^                                  |  ^
//!                        | Evicted                 driver:  |  | Connected
//!                        |                    disconnected  v  |
//!                      Connecting(resume) <--reconnected-- Disconnected
//! ```
//!
//! While not connected, nothing but the session's own messages goes out:
//! requests stay in the client's tables and are sent again once the OST
//! answers (a fresh connect, or the same life of the OST), after the
//! replay of locks and uncommitted changes (a new life, recovering).
//! Without recovery (the simulator) every OST counts as connected and no
//! session message is sent.

use crate::units::{Epoch, OstIndex};
use std::collections::BTreeMap;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImportState {
    /// Never spoken to.
    New,
    /// `Connect` sent; `resume` if it named a life of the OST whose state
    /// the client still holds.
    Connecting {
        resume: bool,
    },
    Connected,
    /// The driver lost the connection; requests wait for it to come back.
    Disconnected,
    /// Unmounting: `Disconnect` sent, its answer awaited.
    Leaving,
}

#[derive(Clone, Copy, Debug)]
pub struct Import {
    pub state: ImportState,
    /// The life of the OST this client holds locks and changes from.
    pub epoch: Option<Epoch>,
    /// The last failure notice taken from this OST.
    pub failures_seen: u64,
}

impl Default for Import {
    fn default() -> Self {
        Import { state: ImportState::New, epoch: None, failures_seen: 0 }
    }
}

/// Every OST's import (see the module docs).
#[derive(Debug, Default)]
pub struct Imports {
    imports: BTreeMap<OstIndex, Import>,
}

impl Imports {
    pub fn get(&self, ost: OstIndex) -> Import {
        self.imports.get(&ost).copied().unwrap_or_default()
    }

    pub fn get_mut(&mut self, ost: OstIndex) -> &mut Import {
        self.imports.entry(ost).or_default()
    }

    pub fn is_connected(&self, ost: OstIndex) -> bool {
        self.get(ost).state == ImportState::Connected
    }

    /// OSTs this client has a session with (connected).
    pub fn connected(&self) -> impl Iterator<Item = OstIndex> + '_ {
        self.imports.iter().filter(|(_, i)| i.state == ImportState::Connected).map(|(o, _)| *o)
    }

    /// Whether every OST told of this client's unmount has answered.
    pub fn all_left(&self) -> bool {
        self.imports.values().all(|i| i.state != ImportState::Leaving)
    }

    pub fn check_invariants(&self) {
        for (ost, import) in &self.imports {
            if import.state == ImportState::Connected {
                assert!(import.epoch.is_some(), "{ost}: connected without knowing the OST's life");
            }
        }
    }
}
