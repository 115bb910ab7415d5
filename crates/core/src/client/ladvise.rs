//! Lock advice (`llapi_ladvise`): lockahead and lock-no-expand, validated as
//! Lustre's `ll_ladvise_sanity` does.
//!
//! The raw form ([`Advice`]) carries the numeric fields of Lustre's
//! `struct llapi_lu_ladvise` so that tools and scripts can pass what users
//! know; [`Advice::validate`] turns it into a typed [`Validated`] advice or an
//! error that says what is wrong (Lustre answers `-EINVAL` for all of these).

use crate::ldlm::LockMode;
use serde::{Deserialize, Serialize};

/// `LU_LADVISE_LOCKNOEXPAND`.
pub const LU_LADVISE_LOCKNOEXPAND: u32 = 3;
/// `LU_LADVISE_LOCKAHEAD`.
pub const LU_LADVISE_LOCKAHEAD: u32 = 4;
/// `LF_ASYNC`: do not wait for the lock.
pub const LF_ASYNC: u32 = 0x1;
/// `LF_UNSET`: clear lock-no-expand.
pub const LF_UNSET: u32 = 0x2;
/// `MODE_READ_USER`.
pub const MODE_READ_USER: u32 = 1;
/// `MODE_WRITE_USER`.
pub const MODE_WRITE_USER: u32 = 2;
/// `LAH_COUNT_MAX`: advices per call must be fewer than this.
pub const ADVICES_PER_CALL_MAX: usize = 1024;

/// One advice as `llapi_ladvise` takes it. `end` is inclusive, as the lock
/// extents it becomes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Advice {
    pub advice: u32,
    pub flags: u32,
    pub mode: u32,
    pub start: u64,
    pub end: u64,
}

impl Advice {
    pub fn lockahead(mode: AheadMode, start: u64, end: u64, asynchronous: bool) -> Self {
        let mode = match mode {
            AheadMode::Read => MODE_READ_USER,
            AheadMode::Write => MODE_WRITE_USER,
        };
        Advice { advice: LU_LADVISE_LOCKAHEAD, flags: if asynchronous { LF_ASYNC } else { 0 }, mode, start, end }
    }

    pub fn lock_no_expand(set: bool) -> Self {
        Advice { advice: LU_LADVISE_LOCKNOEXPAND, flags: if set { 0 } else { LF_UNSET }, mode: 0, start: 0, end: 0 }
    }

    pub fn validate(&self) -> Result<Validated, LadviseError> {
        match self.advice {
            LU_LADVISE_LOCKAHEAD => {
                if self.flags & !LF_ASYNC != 0 {
                    return Err(LadviseError::Flags {
                        advice: "lockahead",
                        flags: self.flags,
                        allowed: "LF_ASYNC (0x1)",
                    });
                }
                let mode = match self.mode {
                    MODE_READ_USER => AheadMode::Read,
                    MODE_WRITE_USER => AheadMode::Write,
                    m => return Err(LadviseError::Mode(m)),
                };
                if self.start >= self.end {
                    return Err(LadviseError::Range { start: self.start, end: self.end });
                }
                Ok(Validated::Lockahead {
                    mode,
                    start: self.start,
                    end: self.end,
                    asynchronous: self.flags & LF_ASYNC != 0,
                })
            }
            LU_LADVISE_LOCKNOEXPAND => {
                if self.flags & !LF_UNSET != 0 {
                    return Err(LadviseError::Flags {
                        advice: "locknoexpand",
                        flags: self.flags,
                        allowed: "LF_UNSET (0x2)",
                    });
                }
                Ok(Validated::LockNoExpand { set: self.flags & LF_UNSET == 0 })
            }
            other => Err(LadviseError::Advice(other)),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum AheadMode {
    Read,
    Write,
}

impl AheadMode {
    pub fn lock_mode(self) -> LockMode {
        match self {
            AheadMode::Read => LockMode::ProtectedRead,
            AheadMode::Write => LockMode::ProtectedWrite,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Validated {
    Lockahead { mode: AheadMode, start: u64, end: u64, asynchronous: bool },
    LockNoExpand { set: bool },
}

/// Per-advice result of an asynchronous lockahead (`lla_lockahead_result`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum LockaheadResult {
    /// `LLA_RESULT_SENT` (0): an enqueue went to the server.
    Sent,
    /// `LLA_RESULT_DIFFERENT` (1): a cached lock covers it with another extent.
    Different,
    /// `LLA_RESULT_SAME` (2): a cached lock with exactly this extent exists.
    Same,
}

impl LockaheadResult {
    pub fn code(self) -> u32 {
        match self {
            LockaheadResult::Sent => 0,
            LockaheadResult::Different => 1,
            LockaheadResult::Same => 2,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            LockaheadResult::Sent => "SENT",
            LockaheadResult::Different => "DIFFERENT",
            LockaheadResult::Same => "SAME",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LadviseError {
    #[error("ladvise: {0} advices given; between 1 and {max} are allowed per call", max = ADVICES_PER_CALL_MAX - 1)]
    Count(usize),
    #[error("ladvise: unknown advice type {0}; use lockahead ({LU_LADVISE_LOCKAHEAD}) or locknoexpand ({LU_LADVISE_LOCKNOEXPAND})")]
    Advice(u32),
    #[error("ladvise {advice}: flags {flags:#x} not allowed; only {allowed} is")]
    Flags { advice: &'static str, flags: u32, allowed: &'static str },
    #[error("ladvise lockahead: mode {0} is invalid; use READ (1) or WRITE (2)")]
    Mode(u32),
    #[error("ladvise lockahead: start {start} must be below end {end}")]
    Range { start: u64, end: u64 },
    #[error("ladvise: no such open file")]
    BadFile,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_advice_is_refused_with_a_reason() {
        let mut a = Advice::lockahead(AheadMode::Write, 0, 4095, true);
        assert!(a.validate().is_ok());
        a.flags = LF_ASYNC | LF_UNSET;
        assert!(matches!(a.validate(), Err(LadviseError::Flags { .. })));
        a.flags = 0x3; // ROMIO's LF_NONBLOCK fallback, which Lustre rejects
        assert!(a.validate().is_err());
        let mut a = Advice::lockahead(AheadMode::Write, 4096, 4096, true);
        assert_eq!(a.validate(), Err(LadviseError::Range { start: 4096, end: 4096 }));
        a.start = 0;
        a.mode = 3;
        assert_eq!(a.validate(), Err(LadviseError::Mode(3)));
        let mut n = Advice::lock_no_expand(true);
        assert_eq!(n.validate(), Ok(Validated::LockNoExpand { set: true }));
        n.flags = LF_ASYNC;
        assert!(n.validate().is_err());
        let bogus = Advice { advice: 9, ..n };
        assert_eq!(bogus.validate(), Err(LadviseError::Advice(9)));
    }
}

/// How a writer of a shared file locks, as a benchmark or application picks
/// it: Lustre's default (expanding locks), lock-no-expand advice, lockahead
/// of the extents it will write (with lock-no-expand), or one group lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum IoLockMode {
    Default,
    NoExpand,
    Lockahead,
    Group,
}

impl IoLockMode {
    pub const NAMES: &'static str = "default, noexpand, lockahead or group";

    pub fn parse(s: &str) -> Result<IoLockMode, String> {
        match s {
            "default" => Ok(IoLockMode::Default),
            "noexpand" => Ok(IoLockMode::NoExpand),
            "lockahead" => Ok(IoLockMode::Lockahead),
            "group" => Ok(IoLockMode::Group),
            other => Err(format!("{other:?} is not a lock mode; use {}", IoLockMode::NAMES)),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            IoLockMode::Default => "default",
            IoLockMode::NoExpand => "noexpand",
            IoLockMode::Lockahead => "lockahead",
            IoLockMode::Group => "group",
        }
    }
}
