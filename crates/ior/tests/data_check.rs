//! `-W` and `-R` catch a corrupted byte and report it as IOR does; the data on disk is
//! IOR's signature at IOR's offsets.

mod common;

use common::{args, run_line, MemBackend};
use lanefs_ior::{main_with, transfer_offset, Backend, PosixBackend};

/// `-b 64k -t 16k -N 2`: byte 70000 is in rank 1's block, its first transfer, word 558.
const BAD_OFFSET: u64 = 70_000;

#[test]
fn check_write_catches_a_corrupted_byte() {
    let backend = MemBackend::corrupting(BAD_OFFSET);
    let (summary, text) = run_line("-a MEM -w -W -b 64k -t 16k -N 2 -G 77", &backend);
    assert_eq!(summary.data_errors, 1);
    assert_eq!(summary.iterations[0].write_check_errors, 1);
    assert!(!summary.passed());
    let expected = "[1] FAILED comparison of buffer containing 8-byte ints:\n\
[1]   File name = testFile\n\
[1]   In transfer 1, 1 errors between buffer indices 558 and 558.\n\
[1]   File byte offset = 70000:\n";
    assert!(text.contains(expected), "{text}");
    assert!(
        text.contains(
            "WARNING: incorrect data on write (1 errors found).\nUsed Time Stamp 77 (0x4d) for Data Signature\n"
        ),
        "{text}"
    );
    // The warning comes before the next phase; the file is removed (no -K).
    assert!(backend.files.lock().unwrap().is_empty());
}

#[test]
fn check_read_catches_a_corrupted_byte() {
    let backend = MemBackend::corrupting(BAD_OFFSET);
    let (summary, text) = run_line("-a MEM -w -r -R -K -b 64k -t 16k -N 2 -i 2", &backend);
    assert_eq!(summary.data_errors, 2, "one bad word per repetition");
    assert_eq!(summary.iterations[1].read_check_errors, 1);
    let warning = text.find("WARNING: incorrect data on read (1 errors found).").expect("read warning");
    let read_row = text.find("\nread ").unwrap();
    assert!(warning < read_row, "the warning precedes the row, as in IOR: {text}");
    assert!(text.contains("[1]     Expected: 0x"));
    // -K keeps the file that failed the check.
    assert_eq!(backend.files.lock().unwrap().len(), 1);
}

#[test]
fn tasks_per_node_makes_reorder_read_another_nodes_data() {
    // Byte 70000 is rank 1's. -C with 2 tasks per node and -Q 1: the read shifts by one
    // node (2 ranks), so rank 3 reads rank 1's block; the write check shifts by two
    // nodes (4 ranks = no shift on 4 tasks), so rank 1 checks its own.
    let line = "-a MEM -w -W -r -R -C -b 64k -t 16k -N 4 --tasks-per-node 2";
    let (summary, text) = run_line(line, &MemBackend::corrupting(BAD_OFFSET));
    assert_eq!(summary.data_errors, 2);
    assert!(text.contains("[1] FAILED comparison") && text.contains("[3] FAILED comparison"), "{text}");
    let read_failure = text.find("[3] FAILED").unwrap();
    assert!(text[read_failure..].contains("incorrect data on read"), "{text}");
    // Without --tasks-per-node every task is on one node: -C shifts nothing.
    let (_, text) = run_line("-a MEM -w -r -R -C -b 64k -t 16k -N 4", &MemBackend::corrupting(BAD_OFFSET));
    assert!(text.contains("[1] FAILED comparison") && !text.contains("[3] FAILED"), "{text}");
}

#[test]
fn a_failed_check_makes_the_command_fail() {
    let backend = MemBackend::corrupting(BAD_OFFSET);
    let table: [&dyn Backend; 2] = [&PosixBackend, &backend];
    let mut out = Vec::new();
    let code = main_with(&args("-a mem -w -W -r -R -b 64k -t 16k -N 2"), &table, &mut out).unwrap();
    assert_eq!(code, 1);
    let text = String::from_utf8(out).unwrap();
    assert!(text.contains("incorrect data on write") && text.contains("incorrect data on read"));

    let clean = MemBackend::default();
    let table: [&dyn Backend; 2] = [&PosixBackend, &clean];
    let code = main_with(&args("-a MEM -w -W -r -R -b 64k -t 16k -N 2"), &table, &mut Vec::new()).unwrap();
    assert_eq!(code, 0);
}

#[test]
fn check_read_of_an_existing_file_uses_the_given_signature() {
    let backend = MemBackend::default();
    run_line("-a MEM -w -k -G 1234 -b 64k -t 16k -N 2", &backend);
    let (summary, _) = run_line("-a MEM -r -R -k -G 1234 -b 64k -t 16k -N 2", &backend);
    assert!(summary.passed());
    let (summary, text) = run_line(
        "-a MEM -r -R -k -G 99 -b 64k -t 16k -N 2",
        &MemBackend { files: backend.files.clone(), ..MemBackend::default() },
    );
    assert!(!summary.passed(), "{text}");
}

fn word(bytes: &[u8], offset: u64) -> u64 {
    u64::from_le_bytes(bytes[offset as usize..offset as usize + 8].try_into().unwrap())
}

#[test]
fn shared_file_holds_each_ranks_signature_at_iors_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("shared");
    let line = format!("-w -k -G 5 -b 32k -t 8k -s 3 -N 3 -o {}", file.display());
    run_line(&line, &PosixBackend);
    let data = std::fs::read(&file).unwrap();
    assert_eq!(data.len(), 32 * 1024 * 3 * 3);
    let p = lanefs_ior::parse_args(&args(&line)).unwrap();
    for rank in 0..3u32 {
        for segment in 0..3 {
            for transfer in 0..4 {
                let offset = transfer_offset(&p, rank, segment, transfer);
                assert_eq!(offset, transfer * 8192 + segment * 3 * 32768 + u64::from(rank) * 32768);
                assert_eq!(word(&data, offset), (u64::from(rank) << 32) | 5, "rank/signature at {offset}");
                assert_eq!(word(&data, offset + 8), offset + 8, "offset stamp at {offset}");
            }
        }
    }
}

#[test]
fn file_per_process_writes_one_file_per_rank() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("fpp");
    let line = format!("-w -r -W -R -k -F -C -G 9 -b 16k -t 8k -s 2 -N 3 -o {}", root.display());
    let (summary, text) = run_line(&line, &PosixBackend);
    assert!(summary.passed(), "{text}");
    assert!(text.contains("access              : file-per-process"));
    assert!(text.contains("ordering inter file : constant task offset\ntask offset         : 1\n"));
    for rank in 0..3u64 {
        let data = std::fs::read(format!("{}.{rank:08}", root.display())).unwrap();
        assert_eq!(data.len(), 32 * 1024);
        assert_eq!(word(&data, 16 * 1024), (rank << 32) | 9, "segment 1 of rank {rank}");
        assert_eq!(word(&data, 16 * 1024 + 8), 16 * 1024 + 8);
    }
}

#[test]
fn unique_dir_puts_each_file_in_its_rank_directory() {
    let dir = tempfile::tempdir().unwrap();
    let line = format!("-w -r -k -F -u -b 16k -t 8k -N 2 -o {}/f", dir.path().display());
    let (summary, _) = run_line(&line, &PosixBackend);
    assert!(summary.passed());
    for rank in 0..2 {
        assert!(dir.path().join(format!("{rank}/f.{rank:08}")).is_file());
    }
}

/// Every packet of `-l` is written, read back and checked clean, and a bad
/// byte is caught in each.
#[test]
fn every_data_packet_type_checks_clean_and_catches_a_bad_byte() {
    for packet in ["timestamp", "offset", "incompressible", "random", "t", "o", "i", "r"] {
        let line = format!("-a MEM -w -W -r -R -b 64k -t 16k -N 2 -G 77 --dataPacketType={packet}");
        let (summary, out) = run_line(&line, &MemBackend::default());
        assert!(summary.passed(), "{line}: {out}");
        let (summary, _) = run_line(&line, &MemBackend::corrupting(BAD_OFFSET));
        assert_eq!(summary.iterations[0].write_check_errors, 1, "{line}");
        assert_eq!(summary.iterations[0].read_check_errors, 1, "{line}");
    }
    // IOR's JSON names the packet by IOR's number and, off by one, its letter.
    let (_, json) = run_line("-a MEM -w -b 64k -t 16k -l o -O summaryFormat=JSON", &MemBackend::default());
    assert!(json.contains("\"dataPacketType\": 1,") && json.contains("\"data packet type\": \"t\","), "{json}");
}

/// `-l t` writes IOR 4's timestamp packet: word i of a rank's transfer is
/// `rank << 32 | signature + i`, the same at every offset.
#[test]
fn the_timestamp_packet_is_iors_bytes() {
    let backend = MemBackend::default();
    run_line("-a MEM -w -k -b 32k -t 16k -N 2 -G 5 -l t", &backend);
    let files = backend.files.lock().unwrap();
    let data = &files["testFile"];
    let word = |at: usize| u64::from_le_bytes(data[at..at + 8].try_into().unwrap());
    assert_eq!(word(0), 5);
    assert_eq!(word(16 * 1024 + 8), 6, "the second transfer repeats the first");
    assert_eq!(word(32 * 1024 + 24), (1 << 32) | 8, "rank 1's block");
}

#[test]
fn an_unknown_packet_type_is_refused_by_name() {
    let e = lanefs_ior::parse_args(&args("-w -l x")).unwrap_err().to_string();
    assert!(e.contains("-l x") && e.contains("timestamp, offset, incompressible or random"), "{e}");
}
