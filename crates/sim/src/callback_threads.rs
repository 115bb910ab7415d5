//! A client's blocking-callback threads (Lustre's `ldlm_bl` pool) as a
//! queue: a thread takes a blocking callback when it arrives and keeps it
//! until the lock's cancel leaves, as `osc_ldlm_blocking_ast` flushes the
//! lock's dirty pages and waits for them (`osc_lock_flush`) before
//! cancelling. With every thread busy, further callbacks wait, in order of
//! arrival.
//!
//! Lustre starts 2 threads (`LDLM_NTHRS_INIT`) and adds more while all are
//! busy, up to `LDLM_NTHRS_MAX` (128, or 64 on a one-CPU node), or a fixed
//! `ldlm_num_threads` (lustre/ldlm/ldlm_lockd.c, `ldlm_setup`); the model
//! has the maximum from the start.
//!
//! Invariants: at most `threads` callbacks are held; a callback is never
//! both held and waiting.

use lanefs_core::msg::ToClient;
use lanefs_core::units::{LockHandle, OstIndex};
use std::collections::VecDeque;

#[derive(Debug)]
pub struct CallbackThreads {
    threads: u32,
    /// The locks whose callbacks threads hold.
    held: Vec<(OstIndex, LockHandle)>,
    /// Callbacks waiting for a thread: (OST, the message). Bounded by the
    /// locks the OSTs granted the client: an OST sends one callback a lock.
    waiting: VecDeque<(u32, ToClient)>,
    /// Callbacks that had to wait, so far.
    waited: u64,
}

impl CallbackThreads {
    pub fn new(threads: u32) -> CallbackThreads {
        CallbackThreads { threads: threads.max(1), held: Vec::new(), waiting: VecDeque::new(), waited: 0 }
    }

    /// A thread takes the callback of `lock`, if one is free (or holds it
    /// already); `false`: it must wait.
    pub fn take(&mut self, ost: OstIndex, lock: LockHandle) -> bool {
        if self.held.contains(&(ost, lock)) {
            return true;
        }
        if self.held.len() >= self.threads as usize {
            return false;
        }
        self.held.push((ost, lock));
        true
    }

    /// Queues a callback no thread could take.
    pub fn wait(&mut self, ost: u32, msg: ToClient) {
        self.waited += 1;
        self.waiting.push_back((ost, msg));
    }

    /// Callbacks that waited for a thread so far.
    pub fn waited(&self) -> u64 {
        self.waited
    }

    /// The cancel of `lock` has left: its thread is free.
    pub fn release(&mut self, ost: OstIndex, lock: LockHandle) {
        self.held.retain(|&held| held != (ost, lock));
    }

    /// Frees the threads of the locks `gone` says the client no longer holds.
    pub fn release_where(&mut self, gone: impl Fn(OstIndex, LockHandle) -> bool) {
        self.held.retain(|&(ost, lock)| !gone(ost, lock));
    }

    /// The first waiting callback, taken by a thread now free, to deliver.
    pub fn next_waiting(&mut self) -> Option<(u32, ToClient)> {
        if self.held.len() >= self.threads as usize {
            return None;
        }
        let (ost, msg) = self.waiting.pop_front()?;
        if let ToClient::Blocking { lock } = &msg {
            self.held.push((OstIndex(ost), *lock));
        }
        Some((ost, msg))
    }

    pub fn check_invariants(&self) {
        assert!(
            self.held.len() <= self.threads as usize,
            "callback threads: {} held by {}",
            self.held.len(),
            self.threads
        );
        for (ost, msg) in &self.waiting {
            if let ToClient::Blocking { lock } = msg {
                assert!(!self.held.contains(&(OstIndex(*ost), *lock)), "callback threads: {lock:?} held and waiting");
            }
        }
    }
}
