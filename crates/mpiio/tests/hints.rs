//! Collective MPI-IO hints: defaults, parsing and errors, precedence, the
//! `MPICH_MPIIO_HINTS` syntax and the hints display, each checked against
//! the rules and samples of `mpiio.md`.

use lanefs_core::client::ladvise::ADVICES_PER_CALL_MAX;
use lanefs_mpiio::hints::{CB_BUFFER_SIZE_DEFAULT, LOCK_AHEAD_NUM_EXTENTS_MAX};
use lanefs_mpiio::*;

const MIB: u64 = 1 << 20;

fn hints(pairs: &[(&str, &str)]) -> MpiioHints {
    MpiioHints::from_pairs(pairs).unwrap()
}

// ----- hints ---------------------------------------------------------------

#[test]
fn defaults_follow_romio_and_cray() {
    let h = MpiioHints::default();
    assert_eq!((h.striping_factor, h.striping_unit, h.cb_nodes), (None, None, None));
    assert_eq!(h.cb_buffer_size, 16 * MIB);
    assert_eq!(CB_BUFFER_SIZE_DEFAULT, 16 * MIB);
    assert_eq!((h.romio_cb_write, h.romio_cb_read), (CbMode::Automatic, CbMode::Automatic));
    assert_eq!((h.cray_cb_nodes_multiplier, h.cray_cb_write_lock_mode), (1, CrayLockMode::Default));
    assert_eq!(h.romio_lustre_cb_lock_ahead_num_extents, 500);
    assert_eq!((h.romio_lustre_cb_lock_ahead_flags, h.romio_lustre_co_ratio), (0, 1));
    assert!(!h.romio_lustre_cb_lock_ahead_write && !h.romio_lustre_cb_lock_ahead_read);
    assert!(!h.romio_no_indep_rw && !h.direct_io);
    assert_eq!(h.write_lock_mode(), CbLockMode::Default);
    assert!(!h.lockahead_at_open());
}

#[test]
fn every_hint_parses_to_its_typed_value() {
    let h = hints(&[
        ("striping_factor", "24"),
        ("striping_unit", "2097152"),
        ("cb_nodes", " 40 "),
        ("cb_buffer_size", "4194304"),
        ("romio_cb_write", "ENABLE"),
        ("romio_cb_read", "disable"),
        ("cray_cb_nodes_multiplier", "8"),
        ("cray_cb_write_lock_mode", "1"),
        ("romio_lustre_cb_lock_ahead_write", "1"),
        ("romio_lustre_cb_lock_ahead_read", "1"),
        ("romio_lustre_cb_lock_ahead_num_extents", "1023"),
        ("romio_lustre_cb_lock_ahead_flags", "1"),
        ("romio_lustre_co_ratio", "3"),
        ("romio_no_indep_rw", "TRUE"),
        ("direct_io", "true"),
    ]);
    assert_eq!((h.striping_factor, h.striping_unit, h.cb_nodes), (Some(24), Some(2 * MIB), Some(40)));
    assert_eq!(h.cb_buffer_size, 4 * MIB);
    assert_eq!((h.romio_cb_write, h.romio_cb_read), (CbMode::Enable, CbMode::Disable));
    assert_eq!((h.cray_cb_nodes_multiplier, h.cray_cb_write_lock_mode), (8, CrayLockMode::Group));
    assert!(h.romio_lustre_cb_lock_ahead_write && h.romio_lustre_cb_lock_ahead_read);
    assert_eq!((h.romio_lustre_cb_lock_ahead_num_extents, h.romio_lustre_cb_lock_ahead_flags), (1023, 1));
    assert_eq!(h.romio_lustre_co_ratio, 3);
    assert!(h.romio_no_indep_rw && h.direct_io);
}

fn bad_value(key: &str, value: &str) -> String {
    let err = MpiioHints::default().set(key, value).unwrap_err();
    assert!(matches!(&err, HintError::BadValue { key: k, value: v, .. } if k == key && v == value), "{err:?}");
    let message = err.to_string();
    assert!(message.contains(key) && message.contains(&format!("`{value}`")), "{message}");
    message
}

#[test]
fn bad_values_name_the_hint_the_value_and_what_is_accepted() {
    assert!(bad_value("cb_nodes", "abc").contains("a positive integer"));
    assert!(bad_value("cb_nodes", "0").contains("a positive integer"));
    assert!(bad_value("cb_nodes", "-4").contains("a positive integer"));
    assert!(bad_value("cb_nodes", "4294967296").contains("a positive integer"));
    assert!(bad_value("romio_cb_write", "enabel").contains("enable, disable or automatic"));
    assert!(bad_value("romio_cb_read", "").contains("enable, disable or automatic"));
    assert!(bad_value("romio_lustre_cb_lock_ahead_num_extents", "1024").contains("from 1 to 1023"));
    assert!(bad_value("romio_lustre_cb_lock_ahead_num_extents", "0").contains("from 1 to 1023"));
    assert!(bad_value("cray_cb_write_lock_mode", "3").contains("2 (lockahead)"));
    assert!(bad_value("striping_unit", "1000").contains("multiple of 65536"));
    assert!(bad_value("striping_unit", "0").contains("multiple of 65536"));
    assert!(bad_value("striping_factor", "2001").contains("from 1 to 2000"));
    assert!(bad_value("romio_lustre_cb_lock_ahead_flags", "3").contains("0 or 1"));
    assert!(bad_value("romio_lustre_cb_lock_ahead_write", "yes").contains("0 (off) or 1 (on)"));
    assert!(bad_value("romio_no_indep_rw", "yes").contains("true or false"));
    assert!(bad_value("cray_cb_nodes_multiplier", "1.5").contains("a positive integer"));
    assert_eq!(LOCK_AHEAD_NUM_EXTENTS_MAX as usize, ADVICES_PER_CALL_MAX - 1);
}

/// As MPICH: an unknown hint is ignored, here with one warning naming it; a
/// bad value of a known hint stays an error; standard hints pass quietly.
#[test]
fn unknown_keys_are_dropped_with_a_warning_and_bad_values_stay_errors() {
    let pairs = |list: &[(&str, &str)]| list.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<Vec<_>>();
    let (known, warnings) =
        known_hints(pairs(&[("cb_node", "8"), ("cb_config_list", "*:2"), ("striping_factor", "4")]));
    assert_eq!(known, pairs(&[("cb_config_list", "*:2"), ("striping_factor", "4")]));
    assert_eq!(warnings, vec!["ignoring unknown MPI-IO hint `cb_node` (did you mean `cb_nodes`?)".to_string()]);
    let (known, _) = known_hints(pairs(&[("striping_factor", "four")]));
    assert!(MpiioHints::from_pairs(&known).unwrap_err().to_string().contains("striping_factor"));
}

#[test]
fn unknown_keys_are_refused_by_set_with_a_suggestion_and_standard_ones_ignored() {
    let err = MpiioHints::default().set("cb_node", "8").unwrap_err();
    assert_eq!(err, HintError::UnknownKey { key: "cb_node".into(), suggestion: Some("cb_nodes") });
    let message = err.to_string();
    assert!(message.contains("did you mean `cb_nodes`?"), "{message}");
    assert!(message.contains("romio_lustre_cb_lock_ahead_num_extents"), "lists the known hints: {message}");
    let err = MpiioHints::default().set("cray_cb_write_lockmode", "2").unwrap_err();
    assert!(err.to_string().contains("did you mean `cray_cb_write_lock_mode`?"));
    let err = MpiioHints::default().set("frobnicate", "1").unwrap_err();
    assert_eq!(err, HintError::UnknownKey { key: "frobnicate".into(), suggestion: None });

    let mut h = MpiioHints::default();
    for (key, value) in [("cb_config_list", "*:2"), ("romio_ds_write", "disable"), ("access_style", "write_once")] {
        h.set(key, value).unwrap();
    }
    assert_eq!(h, MpiioHints::default(), "ignored hints change nothing");
}

#[test]
fn lock_mode_precedence_cray_over_romio() {
    let lockahead = |num_extents, flags| CbLockMode::Lockahead { num_extents, flags };
    assert_eq!(hints(&[("romio_lustre_cb_lock_ahead_write", "1")]).write_lock_mode(), lockahead(500, 0));
    let romio = hints(&[
        ("romio_lustre_cb_lock_ahead_write", "1"),
        ("romio_lustre_cb_lock_ahead_num_extents", "100"),
        ("romio_lustre_cb_lock_ahead_flags", "1"),
    ]);
    assert_eq!(romio.write_lock_mode(), lockahead(100, 1));
    assert_eq!(romio.read_lock_mode(), CbLockMode::Default);
    assert!(romio.lockahead_at_open());
    assert_eq!(hints(&[("cray_cb_write_lock_mode", "2")]).write_lock_mode(), lockahead(500, 0));
    assert_eq!(hints(&[("cray_cb_write_lock_mode", "1")]).write_lock_mode(), CbLockMode::Group);
    let both = [("romio_lustre_cb_lock_ahead_write", "1"), ("cray_cb_write_lock_mode", "1")];
    assert_eq!(hints(&both).write_lock_mode(), CbLockMode::Group, "a non-default Cray mode wins");
    let cray_default = [("romio_lustre_cb_lock_ahead_write", "1"), ("cray_cb_write_lock_mode", "0")];
    assert_eq!(hints(&cray_default).write_lock_mode(), lockahead(500, 0), "Cray mode 0 is no opinion");
    let read = hints(&[("romio_lustre_cb_lock_ahead_read", "1")]);
    assert_eq!((read.write_lock_mode(), read.read_lock_mode()), (CbLockMode::Default, lockahead(500, 0)));
    assert!(read.lockahead_at_open());
    assert!(!hints(&[("cray_cb_write_lock_mode", "1")]).lockahead_at_open());
}

/// Every `MPICH_MPIIO_HINTS` example of `mpiio.md`.
#[test]
fn env_examples_parse_and_match() {
    let rules = parse_hint_env("*:romio_cb_read=disable").unwrap();
    assert_eq!(rules, vec![HintRule { pattern: "*".into(), hints: vec![("romio_cb_read".into(), "disable".into())] }]);
    let pairs = hints_for_file(&rules, "/any/file.nc");
    assert_eq!(MpiioHints::from_pairs(&pairs).unwrap().romio_cb_read, CbMode::Disable);

    let rules = parse_hint_env("*.cube:cb_nodes=8").unwrap();
    assert_eq!(hints_for_file(&rules, "large-cube-SPIN_DENSITY-1_0.cube"), vec![("cb_nodes".into(), "8".into())]);
    assert!(hints_for_file(&rules, "x.cube.bak").is_empty());

    let rules =
        parse_hint_env("*/mpsout.d01.*:cb_nodes=8:striping_factor=6,*/MPASPR*:cb_nodes=8:striping_factor=8").unwrap();
    assert_eq!(rules.len(), 2);
    let mps = MpiioHints::from_pairs(&hints_for_file(&rules, "/scratch/run/mpsout.d01.2020")).unwrap();
    assert_eq!((mps.cb_nodes, mps.striping_factor), (Some(8), Some(6)));
    let mpas = MpiioHints::from_pairs(&hints_for_file(&rules, "./MPASPR_0001")).unwrap();
    assert_eq!((mpas.cb_nodes, mpas.striping_factor), (Some(8), Some(8)));
    assert!(hints_for_file(&rules, "mpsout.d01.1").is_empty(), "`*/` needs a directory in the name");

    let rules = parse_hint_env("wrfrst*:cb_nodes=40:,wrfout*:cb_nodes=40:striping_unit=2097152").unwrap();
    assert_eq!(rules[0], HintRule { pattern: "wrfrst*".into(), hints: vec![("cb_nodes".into(), "40".into())] });
    assert_eq!(rules[1].pattern, "wrfout*");
    let out = MpiioHints::from_pairs(&hints_for_file(&rules, "/scratch/wrf/wrfout_d01_2020-01-01")).unwrap();
    assert_eq!((out.cb_nodes, out.striping_unit), (Some(40), Some(2 * MIB)));
    let rst = MpiioHints::from_pairs(&hints_for_file(&rules, "wrfrst_d01")).unwrap();
    assert_eq!((rst.cb_nodes, rst.striping_unit), (Some(40), None));
    assert!(hints_for_file(&rules, "/scratch/wrfout_dir/namelist").is_empty(), "directories do not match");

    let spec = "wrfout*:cray_cb_write_lock_mode=2:cray_cb_nodes_multiplier=8:striping_factor=24";
    let wrf = MpiioHints::from_pairs(&hints_for_file(&parse_hint_env(spec).unwrap(), "wrfout_d01")).unwrap();
    assert_eq!(wrf.write_lock_mode(), CbLockMode::Lockahead { num_extents: 500, flags: 0 });
    assert_eq!(aggregator_count(768, 192, wrf.striping_factor.unwrap(), &wrf), 192);
}

#[test]
fn later_matching_rules_override_earlier_ones() {
    let rules = parse_hint_env("*:cb_nodes=4:striping_factor=2,wrfout*:cb_nodes=8").unwrap();
    let pairs = |file| hints_for_file(&rules, file);
    assert_eq!(pairs("wrfout_d01"), vec![("cb_nodes".into(), "8".into()), ("striping_factor".into(), "2".into())]);
    assert_eq!(pairs("other")[0], ("cb_nodes".to_string(), "4".to_string()));
    let reversed = parse_hint_env("wrfout*:cb_nodes=8,*:cb_nodes=4").unwrap();
    assert_eq!(hints_for_file(&reversed, "wrfout_d01"), vec![("cb_nodes".into(), "4".into())]);
}

#[test]
fn hint_spec_errors_say_what_is_wrong() {
    assert_eq!(parse_hint_env("").unwrap(), vec![]);
    assert_eq!(parse_hint_env(" , ").unwrap(), vec![]);
    let syntax = |spec: &str| match parse_hint_env(spec) {
        Err(HintError::Syntax { reason, .. }) => reason,
        other => panic!("{spec}: expected a syntax error, got {other:?}"),
    };
    assert!(syntax("cb_nodes=8").contains("missing file pattern"));
    assert!(syntax(":cb_nodes=8").contains("empty file pattern"));
    assert!(syntax("wrfout*").contains("no key=value hints"));
    assert!(syntax("wrfout*:").contains("no key=value hints"));
    assert!(syntax("wrfout*:cb_nodes").contains("expected key=value"));
    assert!(syntax("wrfout*:=8").contains("missing hint name"));
    assert!(matches!(parse_hint_env("wrfout*:cb_nodes=x"), Err(HintError::BadValue { .. })));
    // An unknown key is kept, to be warned of when it applies to a file.
    let rules = parse_hint_env("a:cb_nodes=1,b:cb_ndoes=2").unwrap();
    let (known, warnings) = known_hints(hints_for_file(&rules, "b"));
    assert!(known.is_empty());
    assert_eq!(warnings, vec!["ignoring unknown MPI-IO hint `cb_ndoes` (did you mean `cb_nodes`?)".to_string()]);
    let message = parse_hint_env("cb_nodes=8").unwrap_err().to_string();
    assert!(message.contains("`cb_nodes=8`") && message.contains("*:key=value"), "{message}");
}

#[test]
fn cli_hints_take_bare_pairs_or_patterns() {
    let every = parse_cli_hints("cb_nodes=8:striping_factor=4").unwrap();
    assert_eq!(every.len(), 1);
    assert_eq!(every[0].pattern, "*");
    assert_eq!(hints_for_file(&every, "/x/y").len(), 2);
    let pattern = parse_cli_hints("wrfout*:cb_nodes=8:").unwrap();
    assert_eq!(pattern, parse_hint_env("wrfout*:cb_nodes=8").unwrap());
    let mixed = parse_cli_hints("cb_nodes=2,wrfout*:cb_nodes=8").unwrap();
    assert_eq!(hints_for_file(&mixed, "wrfout_d01"), vec![("cb_nodes".into(), "8".into())]);
    assert_eq!(hints_for_file(&mixed, "restart"), vec![("cb_nodes".into(), "2".into())]);
    assert!(matches!(parse_cli_hints("cb_nodes=zero"), Err(HintError::BadValue { .. })));
}

/// The `MPICH_MPIIO_HINTS_DISPLAY=1` sample of `mpiio.md`.
#[test]
fn hints_display_matches_the_sample() {
    let sample = "PE 0: MPIIO hints for example.data:
          cb_buffer_size           = 16777216
          romio_cb_write           = automatic
          cb_nodes                 = 1
          striping_factor          = 4
";
    let shown = display_hints("example.data", &MpiioHints::default().resolved(4, MIB, 1));
    assert!(shown.starts_with(sample), "{shown}");
    assert!(shown.contains("          striping_unit            = 1048576\n"));
    assert!(
        shown.contains("          romio_lustre_cb_lock_ahead_num_extents = 500\n"),
        "long names overflow the column"
    );
    let unresolved = display_hints("f", &MpiioHints::default());
    assert!(!unresolved.contains("          cb_nodes ") && !unresolved.contains("          striping_factor "));
    assert!(unresolved.contains("          cb_buffer_size           = 16777216\n"));
}
