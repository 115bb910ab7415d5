//! Listings in pages: bounded in entries and bytes, resumed after a cursor.

use crate::*;
use lanefs_proto::{DirPage, READDIR_BYTES_MAX, READDIR_ENTRIES_MAX};

fn page(mds: &Mds, path: &str, cursor: Option<&str>) -> DirPage {
    mds.readdir(&ROOT, path, cursor).unwrap_or_else(|e| panic!("readdir {path}: {e}"))
}

fn page_names(page: &DirPage) -> Vec<&str> {
    page.entries.iter().map(|entry| entry.name.as_str()).collect()
}

#[test]
fn pages_follow_the_cursor_in_name_order() {
    let mut mds = mds(1).with_readdir_page(2, READDIR_BYTES_MAX);
    for name in ["e", "a", "d", "b", "c"] {
        mkdir(&mut mds, &format!("/{name}"));
    }
    let first = page(&mds, "/", None);
    assert_eq!((page_names(&first), first.more), (vec!["a", "b"], true));
    let second = page(&mds, "/", Some("b"));
    assert_eq!((page_names(&second), second.more), (vec!["c", "d"], true));
    let last = page(&mds, "/", Some("d"));
    assert_eq!((page_names(&last), last.more), (vec!["e"], false));
    // A cursor need not be a name that exists: the page starts after it.
    assert_eq!(page_names(&page(&mds, "/", Some("bb"))), ["c", "d"]);
    assert!(page(&mds, "/", Some("e")).entries.is_empty());
    // Names added or removed between pages: each name that stays is listed once.
    let first = page(&mds, "/", None);
    mds.rmdir(&ROOT, "/a").unwrap();
    mkdir(&mut mds, "/aa");
    mkdir(&mut mds, "/f");
    let cursor = first.entries.last().unwrap().name.clone();
    let mut seen = page_names(&first).into_iter().map(String::from).collect::<Vec<_>>();
    seen.extend(names_after(&mds, "/", cursor));
    assert_eq!(seen, ["a", "b", "c", "d", "e", "f"]);
    assert_eq!(names(&mds, "/"), ["aa", "b", "c", "d", "e", "f"]);
}

fn names_after(mds: &Mds, path: &str, mut cursor: String) -> Vec<String> {
    let mut names = Vec::new();
    loop {
        let next = page(mds, path, Some(&cursor));
        names.extend(next.entries.iter().map(|entry| entry.name.clone()));
        match next.entries.last() {
            Some(last) if next.more => cursor = last.name.clone(),
            _ => return names,
        }
    }
}

#[test]
fn a_page_is_bounded_in_bytes_as_well_as_entries() {
    let bytes_max = 4 * (255 + lanefs_proto::DIR_ENTRY_OVERHEAD_BYTES);
    let mut mds = mds(1).with_readdir_page(READDIR_ENTRIES_MAX, bytes_max);
    let long = |i: usize| format!("{i:03}{}", "x".repeat(252));
    for i in 0..10 {
        mkdir(&mut mds, &format!("/{}", long(i)));
    }
    let first = page(&mds, "/", None);
    assert_eq!((first.entries.len(), first.more), (4, true), "four long names fill the bytes");
    let listed = names(&mds, "/");
    assert_eq!(listed, (0..10).map(long).collect::<Vec<_>>());
}

/// With the real bounds: a directory of one entry more than a page holds.
#[test]
fn a_directory_larger_than_a_page_lists_whole_in_bounded_pages() {
    let mut mds = mds(1);
    mkdir(&mut mds, "/big");
    for i in 0..=READDIR_ENTRIES_MAX {
        mkdir(&mut mds, &format!("/big/{i:06}"));
    }
    let first = page(&mds, "/big", None);
    assert_eq!((first.entries.len(), first.more), (READDIR_ENTRIES_MAX, true));
    let bytes: usize = first.entries.iter().map(|e| e.name.len() + lanefs_proto::DIR_ENTRY_OVERHEAD_BYTES).sum();
    assert!(bytes <= READDIR_BYTES_MAX);
    let listed = names(&mds, "/big");
    assert_eq!(listed.len(), READDIR_ENTRIES_MAX + 1);
    assert!(listed.windows(2).all(|pair| pair[0] < pair[1]), "in order, no repeats");
}
