//! A backend that models whole phases: its fixed per-rank times come out as IOR's
//! figures in every format, its reports appear in order, no rank handle is ever made,
//! and data checks are refused.

mod common;

use std::sync::Mutex;
use std::time::Instant;

use common::{args, run_line};
use lanefs_ior::{
    main_with, read_rank_offset, Backend, BackendReport, IorError, IorParams, NodeMapping, PhaseModel, RankIo,
    RankPhase, RankTimes,
};

const MIB: u64 = 1 << 20;

/// Per-rank timestamps of the write phase of repetition 0, for ranks `r % 4`.
const WRITE_S: [[f64; 6]; 4] = [
    [0.0, 0.5, 0.5, 2.5, 2.5, 3.0],
    [0.0, 0.25, 0.5, 3.5, 3.5, 4.0],
    [0.0, 0.5, 0.5, 1.5, 3.5, 3.75],
    [0.0, 0.5, 0.5, 3.0, 3.5, 3.5],
];
/// The read phase continues the modelled clock at 10 s.
const READ_S: [[f64; 6]; 4] = [
    [10.0, 10.5, 10.5, 12.5, 12.5, 13.0],
    [10.0, 10.5, 10.5, 12.5, 12.5, 13.0],
    [10.0, 10.5, 10.5, 12.5, 12.5, 13.0],
    [10.0, 10.5, 10.5, 17.5, 17.5, 18.0],
];
/// Each repetition starts 100 modelled seconds after the previous one.
const REPETITION_S: f64 = 100.0;

/// A model with fixed answers that records what it was asked.
#[derive(Default)]
struct FixedModel {
    calls: Mutex<Vec<String>>,
}

impl FixedModel {
    fn phase(p: &IorParams, rep: u32, table: &[[f64; 6]; 4]) -> Vec<RankPhase> {
        let shift_s = f64::from(rep) * REPETITION_S;
        let transfers = p.transfers_per_block() * p.segment_count;
        (0..p.num_tasks as usize)
            .map(|rank| {
                let t = table[rank % 4].map(|s| s + shift_s);
                RankPhase {
                    times: RankTimes {
                        open_start_s: t[0],
                        open_stop_s: t[1],
                        xfer_start_s: t[2],
                        xfer_stop_s: t[3],
                        close_start_s: t[4],
                        close_stop_s: t[5],
                    },
                    bytes: transfers * p.transfer_size_bytes,
                    transfers,
                }
            })
            .collect()
    }

    fn record(&self, call: String) {
        self.calls.lock().unwrap().push(call);
    }
}

impl PhaseModel for FixedModel {
    fn write_phase(&self, p: &IorParams, rep: u32) -> Result<Vec<RankPhase>, IorError> {
        self.record(format!("write {rep}"));
        Ok(Self::phase(p, rep, &WRITE_S))
    }

    fn read_phase(&self, p: &IorParams, rep: u32) -> Result<Vec<RankPhase>, IorError> {
        // Where -C sends each rank, as a model asks it.
        let shift = read_rank_offset(p, NodeMapping::from_params(p));
        self.record(format!("read {rep} shift {shift}"));
        Ok(Self::phase(p, rep, &READ_S))
    }

    fn remove(&self, _p: &IorParams, rep: u32) -> Result<f64, IorError> {
        self.record(format!("remove {rep}"));
        Ok(0.125)
    }
}

/// A backend with only a model: any per-rank call is a bug.
#[derive(Default)]
struct ModelBackend {
    model: FixedModel,
}

impl Backend for ModelBackend {
    fn name(&self) -> &'static str {
        "SIM"
    }

    fn rank<'a>(&'a self, rank: u32, _p: &IorParams) -> Result<Box<dyn RankIo + 'a>, IorError> {
        panic!("Backend::rank({rank}) was called although the backend has a phase model");
    }

    fn delete(&self, path: &str) -> Result<(), IorError> {
        panic!("Backend::delete({path}) was called although the backend has a phase model");
    }

    fn phase_model(&self) -> Option<&dyn PhaseModel> {
        Some(&self.model)
    }

    fn reports(&self) -> Vec<BackendReport> {
        let lanefs = serde_json::json!({"lock_grants": 12, "write_rpcs": 40});
        let sim = serde_json::json!({"events": 1234, "seed": 7});
        vec![
            BackendReport::from_json("lanefs", lanefs.as_object().unwrap().clone()),
            BackendReport::from_json("sim", sim.as_object().unwrap().clone()),
        ]
    }
}

impl ModelBackend {
    fn calls(&self) -> Vec<String> {
        self.model.calls.lock().unwrap().clone()
    }
}

/// `-N 4 -b 64m -t 1m -s 2`: 128 MiB and 128 transfers per rank, 512 MiB in all.
const LINE: &str = "-a SIM -w -r -b 64m -t 1m -s 2 -N 4 --tasks-per-node 2 -i 2";

// By hand, from WRITE_S: total = max close stop 4.0 - min open start 0.0 = 4 s, so
// 512 MiB / 4 s = 128 MiB/s; access = max xfer stop 3.5 - min xfer start 0.5 = 3 s, so
// IOPS = 512 / 3 = 170.67; latency = rank 0's 2 s / 128 transfers = 0.015625 s;
// open = 0.5 - 0 = 0.5 s; close = 4.0 - min close start 2.5 = 1.5 s.
// From READ_S: total = 18 - 10 = 8 s, so 64 MiB/s; access = 17.5 - 10.5 = 7 s, IOPS =
// 512 / 7 = 73.14; latency = 2 / 128; open 0.5 s; close = 18 - 12.5 = 5.5 s.

#[test]
fn text_rows_carry_the_modelled_figures() {
    let backend = ModelBackend::default();
    let (summary, text) = run_line(LINE, &backend);
    let write_row =
        "write     128.00     170.67     0.015625    65536      1024.00    0.500000   3.00       1.50       4.00       ";
    let read_row =
        "read      64.00      73.14      0.015625    65536      1024.00    0.500000   7.00       5.50       8.00       ";
    for rep in 0..2 {
        assert!(text.contains(&format!("{write_row}{rep:<4}\n")), "write row of rep {rep}:\n{text}");
        assert!(text.contains(&format!("{read_row}{rep:<4}\n")), "read row of rep {rep}:\n{text}");
    }
    let write = summary.write.unwrap();
    assert_eq!((write.bw_mib.max, write.bw_mib.min, write.bw_mib.sd), (128.0, 128.0, 0.0));
    assert_eq!(write.agg_bytes_rep0, 512 * MIB);
    assert_eq!(summary.read.unwrap().mean_time_s, 8.0);
    assert_eq!(summary.iterations[1].remove_s, Some(0.125));

    // Placement: 4 tasks, 2 per node.
    let value = |key: &str| text.lines().find_map(|l| l.strip_prefix(&format!("{key:<20}: "))).unwrap();
    assert_eq!((value("nodes"), value("tasks"), value("clients per node")), ("2", "4", "2"));
    let summary_rows: Vec<Vec<&str>> = text
        .lines()
        .skip_while(|l| *l != "Summary of all tests:")
        .filter(|l| l.starts_with("write ") || l.starts_with("read "))
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(&summary_rows[0][..4], ["write", "128.00", "128.00", "128.00"]);
    assert_eq!(&summary_rows[1][..4], ["read", "64.00", "64.00", "64.00"]);
    assert_eq!((summary_rows[0][13], summary_rows[0][14]), ("4", "2"), "#Tasks and tPN");
    assert_eq!((summary_rows[0][25], summary_rows[0][26]), ("SIM", "0"), "API and RefNum");

    // The reports, in order, after the results table.
    let lines: Vec<&str> = text.lines().collect();
    let at = lines.iter().position(|l| l.starts_with("lanefs.lock_grants")).unwrap();
    assert_eq!(
        &lines[at - 1..at + 6],
        [
            "",
            "lanefs.lock_grants  : 12",
            "lanefs.write_rpcs   : 40",
            "",
            "sim.events          : 1234",
            "sim.seed            : 7",
            ""
        ]
    );
    assert_eq!(lines[at + 6], "Summary of all tests:");

    assert_eq!(
        backend.calls(),
        ["write 0", "read 0 shift 0", "remove 0", "write 1", "read 1 shift 0", "remove 1"],
        "no -C: no shift"
    );
}

#[test]
fn json_carries_the_modelled_figures_and_both_reports() {
    let backend = ModelBackend::default();
    let (_, json) = run_line(&format!("{LINE} -O summaryFormat=JSON"), &backend);
    let value: serde_json::Value = serde_json::from_str(&json).expect("valid JSON");
    let keys: Vec<&str> = value.as_object().unwrap().keys().map(String::as_str).collect();
    let at = |key: &str| json.find(&format!("\n\"{key}\": ")).unwrap_or_else(|| panic!("{key} in {json}"));
    assert!(at("summary") < at("lanefs") && at("lanefs") < at("sim") && at("sim") < at("Finished"), "{keys:?}");
    assert_eq!(value["lanefs"]["lock_grants"], 12);
    assert_eq!(value["sim"]["events"], 1234);

    let test = &value["tests"][0];
    assert_eq!(test["Parameters"]["nodes"], 2);
    assert_eq!(test["Parameters"]["tasksPerNode"], 2);
    assert_eq!(test["Options"]["nodes"], 2);
    assert_eq!(test["Options"]["clients per node"], 2);
    let results = test["Results"].as_array().unwrap();
    let figures = |i: usize, key: &str| results[i][key].as_f64().unwrap();
    assert_eq!(results[0]["access"], "write");
    assert_eq!(figures(0, "bwMiB"), 128.0);
    assert_eq!(figures(0, "iops"), 170.6667);
    assert_eq!(figures(0, "latency"), 0.0156);
    assert_eq!((figures(0, "openTime"), figures(0, "wrRdTime")), (0.5, 3.0));
    assert_eq!((figures(0, "closeTime"), figures(0, "totalTime")), (1.5, 4.0));
    assert_eq!(results[1]["access"], "read");
    assert_eq!((figures(1, "bwMiB"), figures(1, "iops"), figures(1, "totalTime")), (64.0, 73.1429, 8.0));
    assert_eq!(results.len(), 4, "two repetitions, no remove entries without -v");

    let summary = value["summary"].as_array().unwrap();
    assert_eq!(summary[0]["operation"], "write");
    assert_eq!(summary[0]["bwMeanMIB"].as_f64(), Some(128.0));
    assert_eq!(summary[0]["OPsMean"].as_f64(), Some(128.0), "512 transfers / 4 s");
    assert_eq!(summary[0]["tasksPerNode"], 2);
    assert_eq!(summary[0]["numTasks"], 4);
    assert_eq!(summary[0]["xsizeMiB"].as_f64(), Some(512.0));
    assert_eq!(summary[1]["bwMeanMIB"].as_f64(), Some(64.0));
    assert_eq!(summary[1]["MeanTime"].as_f64(), Some(8.0));
}

#[test]
fn collective_io_is_carried_to_the_report() {
    for (flag, collective, kind) in [("", 0, "independent"), ("-c", 1, "collective")] {
        let line = format!("-a SIM -w -b 1m -t 1m {flag} --mpiio.showHints -O summaryFormat=JSON");
        let (_, json) = run_line(&line, &ModelBackend::default());
        let value: serde_json::Value = serde_json::from_str(&json).expect("valid JSON");
        assert_eq!(value["tests"][0]["Parameters"]["collective"], collective, "{line}");
        assert_eq!(value["tests"][0]["Options"]["type"], kind, "{line}");
    }
}

#[test]
fn csv_rows_carry_the_modelled_figures() {
    let (_, csv) = run_line(&format!("{LINE} -O summaryFormat=CSV"), &ModelBackend::default());
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 5, "{csv}");
    assert_eq!(lines[1], "write,128.0000,170.6667,0.0156,65536.0000,1024.0000,0.5000,3.0000,1.5000,4.0000,4,0");
    assert_eq!(lines[2], "read,64.0000,73.1429,0.0156,65536.0000,1024.0000,0.5000,7.0000,5.5000,8.0000,4,0");
}

#[test]
fn reorder_tasks_is_the_models_business() {
    let backend = ModelBackend::default();
    run_line(&format!("{LINE} -C -k"), &backend);
    // -C with 2 tasks per node: read the data of the next node, 2 ranks on.
    assert_eq!(backend.calls(), ["write 0", "read 0 shift 2", "write 1", "read 1 shift 2"], "-k: no removal");
}

#[test]
fn data_checks_are_refused_before_anything_is_printed() {
    let backend = ModelBackend::default();
    let table: [&dyn Backend; 1] = [&backend];
    let mut out = Vec::new();
    let error = main_with(&args("-a SIM -w -W -b 1m -t 1m"), &table, &mut out).unwrap_err();
    assert_eq!(
        error.to_string(),
        "invalid option -W: the SIM backend models I/O in simulated time and moves no data bytes, so data checks are not available; drop -W"
    );
    assert!(out.is_empty(), "{}", String::from_utf8_lossy(&out));
    let error = main_with(&args("-a SIM -w -r -R -b 1m -t 1m"), &table, &mut out).unwrap_err().to_string();
    assert!(error.starts_with("invalid option -R: the SIM backend models I/O"), "{error}");
    assert!(error.ends_with("drop -R"), "{error}");
    assert!(backend.calls().is_empty());
}

#[test]
fn a_model_runs_more_tasks_than_threads_and_never_sleeps() {
    let backend = ModelBackend::default();
    let started = Instant::now();
    let (summary, text) = run_line("-a SIM -v -w -b 1m -t 1m -N 75000 --tasks-per-node 64 -d 5", &backend);
    assert!(started.elapsed().as_secs() < 5, "-d is modelled time, not a sleep");
    assert!(text.contains("delaying 5 seconds . . .\n"), "{text}");
    // 75000 MiB in 4 modelled seconds.
    assert_eq!(summary.iterations[0].write.unwrap().bw_mib_per_s(), 18750.0);
    assert!(text.contains("nodes               : 1172\n"), "ceil(75000 / 64)");
}

#[test]
fn a_broken_model_answer_is_an_error() {
    struct Short;
    impl PhaseModel for Short {
        fn write_phase(&self, p: &IorParams, rep: u32) -> Result<Vec<RankPhase>, IorError> {
            let mut ranks = FixedModel::phase(p, rep, &WRITE_S);
            ranks.pop();
            Ok(ranks)
        }
        fn read_phase(&self, p: &IorParams, rep: u32) -> Result<Vec<RankPhase>, IorError> {
            Ok(FixedModel::phase(p, rep, &READ_S))
        }
        fn remove(&self, _p: &IorParams, _rep: u32) -> Result<f64, IorError> {
            Ok(0.0)
        }
    }
    struct ShortBackend(Short);
    impl Backend for ShortBackend {
        fn name(&self) -> &'static str {
            "SHORT"
        }
        fn rank<'a>(&'a self, _rank: u32, _p: &IorParams) -> Result<Box<dyn RankIo + 'a>, IorError> {
            Err(IorError::backend("SHORT", "models whole phases only"))
        }
        fn delete(&self, _path: &str) -> Result<(), IorError> {
            Ok(())
        }
        fn phase_model(&self) -> Option<&dyn PhaseModel> {
            Some(&self.0)
        }
    }
    let p = lanefs_ior::parse_args(&args("-a SHORT -w -b 1m -t 1m -N 3")).unwrap();
    let error = lanefs_ior::run(&p, &ShortBackend(Short), &mut Vec::new()).unwrap_err();
    assert_eq!(error.to_string(), "SHORT: write phase model: returned 2 rank results for -N 3 tasks");
}

/// `-T 1`: no phase starts once a minute has passed since the test began; a
/// model's minute is modelled (each repetition here takes 4 s of write and 8
/// s of read, so five of them fill it and the sixth never starts).
#[test]
fn max_time_duration_stops_repetitions_in_modelled_time() {
    let backend = ModelBackend::default();
    let (summary, text) = run_line("-a SIM -w -r -b 64m -t 1m -s 2 -N 4 --tasks-per-node 2 -i 8 -T 1", &backend);
    assert_eq!(summary.iterations.len(), 5, "{text}");
    let writes = backend.calls().iter().filter(|c| c.starts_with("write")).count();
    assert_eq!(writes, 5);
    let (summary, _) =
        run_line("-a SIM -w -r -b 64m -t 1m -s 2 -N 4 --tasks-per-node 2 -i 8 -T 0", &ModelBackend::default());
    assert_eq!(summary.iterations.len(), 8, "-T 0 is no limit");
}
