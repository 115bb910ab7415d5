//! The calling process's identity, as the servers' checks see it: its
//! effective uid, gid and supplementary groups, and its umask. A client
//! sends them with each namespace call; a server compares a local peer's
//! with its own.

use lanefs_proto::Credentials;

/// The calling process's effective uid and gid and its supplementary
/// groups (at most `lanefs_proto::GROUPS_MAX`).
pub fn process_credentials() -> Credentials {
    // SAFETY: geteuid and getegid have no preconditions and cannot fail.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    // SAFETY: with a size of 0, getgroups only returns the count; then it
    // writes at most `count` ids into a buffer of that many.
    let groups = unsafe {
        let count = libc::getgroups(0, std::ptr::null_mut());
        let mut groups = vec![0 as libc::gid_t; count.max(0) as usize];
        let written = libc::getgroups(count.max(0), groups.as_mut_ptr());
        groups.truncate(written.max(0) as usize);
        groups
    };
    let mut groups: Vec<u32> = groups.into_iter().filter(|&group| group != gid).collect();
    groups.truncate(lanefs_proto::GROUPS_MAX);
    Credentials { uid, gid, groups }
}

/// The calling process's umask, to apply to the modes of new files and
/// directories (`mode & !umask`).
pub fn process_umask() -> u32 {
    // Linux shows it in /proc/self/status; reading it changes nothing.
    let shown = std::fs::read_to_string("/proc/self/status").ok().and_then(|status| {
        let line = status.lines().find(|line| line.starts_with("Umask:"))?;
        u32::from_str_radix(line.trim_start_matches("Umask:").trim(), 8).ok()
    });
    shown.unwrap_or_else(|| {
        // SAFETY: umask cannot fail; it is set back at once (a file another
        // thread creates in between would get the wrong mode, hence the
        // /proc reading first).
        unsafe {
            let umask = libc::umask(0o022);
            libc::umask(umask);
            umask as u32
        }
    })
}
