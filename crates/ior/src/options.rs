//! IOR's command line, parsed into [`IorParams`].
//!
//! What: `parse_args` reads the options HPC engineers already type for IOR 4.1
//! (`-a -b -t -s -F -c -w -r -W -R -e -Y -C -Q -X -i -o -k -K -E -g -G -u -v -N -d -A -O`),
//! their long forms (`--blockSize=4m`), `--tasks-per-node=N` (IOR learns that from MPI),
//! the MPI-IO hint options `--mpiio.showHints` and `--mpiio.hintsFileName=F` (and IOR 3's
//! `-H` and `-U F`), `-O key=val[,key=val]` directives (keys are
//! case-insensitive, as IOR's `DecodeDirective`), and module options
//! `--<api>.<name>[=value]` (`--posix.odirect`, `--lanefs.lock-mode=lockahead`), applies
//! IOR's defaults and runs IOR's validation (`ValidateTests`).
//!
//! Why strict: a pasted command line must either mean exactly what it meant to IOR or be
//! refused with a message that names the option and the fix. So IOR features lanefs-ior
//! does not implement (`-z -z`, `-m`, GPU buffers...) are errors, not silently ignored.
//!
//! Not here: whether module options make sense; the chosen backend decides that in
//! [`crate::Backend::check_params`].

use crate::error::IorError;
use crate::params::{IorParams, PacketType, SummaryFormat, ACCESS_UNIT_BYTES, NUM_TASKS_MAX, PROGRAM};

/// Parse IOR's command line (options only, no program name), apply IOR's defaults and
/// validate. `-h`/`--help` are handled by [`crate::main_with`], not here.
pub fn parse_args(args: &[String]) -> Result<IorParams, IorError> {
    let mut params = IorParams { command_line: command_line(args), ..IorParams::default() };
    let mut index = 0;
    while index < args.len() {
        index = parse_one(args, index, &mut params)?;
    }
    let Some(path) = params.script_file.clone() else {
        return finish_test(params);
    };
    let text = std::fs::read_to_string(&path)
        .map_err(|e| IorError::option(format!("-f {path}"), format!("cannot read the script: {e}")))?;
    let mut tests = script_tests(&params, &path, &text)?.into_iter().map(finish_test);
    let mut first = tests.next().expect("a script has at least one test")?;
    first.next_tests = tests.collect::<Result<_, _>>()?;
    Ok(first)
}

/// IOR's `CheckRunSettings` (no phase asked for: write and read) and the
/// checks of one test.
fn finish_test(mut params: IorParams) -> Result<IorParams, IorError> {
    if !(params.write_file || params.read_file || params.check_write || params.check_read) {
        params.write_file = true;
        params.read_file = true;
    }
    validate(&params)?;
    Ok(params)
}

/// The tests of an IOR script (`-f`, IOR's `ReadConfigScript`): lines up
/// to `IOR START` are skipped; then each line holds directives (`key=value`,
/// comma-separated, the names of `-O`), `RUN` ends a test, `IOR STOP` ends
/// the script; a `#` starts a comment. The first test starts from `base`
/// (the command line), each later one from the test before it, and a `RUN`
/// right after a `RUN` runs the same test again. Test numbers count from 0.
pub fn script_tests(base: &IorParams, path: &str, text: &str) -> Result<Vec<IorParams>, IorError> {
    let is = |line: &str, word: &str| line.split_whitespace().collect::<Vec<_>>().join(" ").eq_ignore_ascii_case(word);
    let mut lines = text.lines().enumerate();
    if !lines.any(|(_, line)| is(line, "ior start")) {
        return Err(IorError::option(
            format!("-f {path}"),
            "no `IOR START` line: a script is `IOR START`, lines of key=value directives and `RUN`, then `IOR STOP`",
        ));
    }
    let mut tests = Vec::new();
    let mut current = IorParams { script_file: None, next_tests: Vec::new(), ..base.clone() };
    let mut after_run = false;
    for (number, line) in lines {
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        if is(trimmed, "ior stop") {
            break;
        }
        if is(trimmed, "run") {
            if after_run {
                let again = IorParams { test_id: current.test_id + 1, ..current.clone() };
                tests.push(std::mem::replace(&mut current, again));
            }
            after_run = true;
            continue;
        }
        if after_run {
            let next = IorParams { test_id: current.test_id + 1, ..current.clone() };
            tests.push(std::mem::replace(&mut current, next));
            after_run = false;
        }
        apply_directives(&mut current, trimmed).map_err(|e| match e {
            IorError::Option { option, message } => {
                IorError::option(format!("{path}:{}: {option}", number + 1), message)
            }
            other => other,
        })?;
        if current.script_file.is_some() {
            return Err(IorError::option(format!("{path}:{}", number + 1), "a script cannot name another script"));
        }
    }
    tests.push(current);
    Ok(tests)
}

fn command_line(args: &[String]) -> String {
    std::iter::once(PROGRAM).chain(args.iter().map(String::as_str)).collect::<Vec<_>>().join(" ")
}

/// The options lanefs-ior implements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Key {
    Api,
    ScriptFile,
    MaxTimeDuration,
    DryRun,
    RandomOffset,
    RandomSeed,
    ReorderTasksRandom,
    RefNum,
    BlockSize,
    Collective,
    ReorderTasks,
    InterTestDelay,
    Fsync,
    UseExistingTestFile,
    FilePerProc,
    IntraTestBarriers,
    TimeStampSignature,
    Repetitions,
    KeepFile,
    KeepFileWithError,
    NumTasks,
    TestFile,
    Directive,
    TaskPerNodeOffset,
    ReadFile,
    CheckRead,
    SegmentCount,
    TransferSize,
    UniqueDir,
    Verbose,
    WriteFile,
    CheckWrite,
    ReorderTasksRandomSeed,
    FsyncPerWrite,
    SummaryFormat,
    SummaryFile,
    TasksPerNode,
    ShowHints,
    HintsFileName,
    Deadline,
    WearOut,
    WearOutIterations,
    StatusFile,
    RankDetailsCsv,
    DataPacketType,
}

/// Short letter, IOR 4 long name, option, whether it takes a value.
const OPTIONS: &[(Option<char>, &str, Key, bool)] = &[
    (Some('a'), "api", Key::Api, true),
    (Some('A'), "refNum", Key::RefNum, true),
    (Some('b'), "blockSize", Key::BlockSize, true),
    (Some('c'), "collective", Key::Collective, false),
    (Some('C'), "reorderTasks", Key::ReorderTasks, false),
    (Some('d'), "interTestDelay", Key::InterTestDelay, true),
    (Some('D'), "deadlineForStonewalling", Key::Deadline, true),
    (Some('e'), "fsync", Key::Fsync, false),
    (Some('f'), "scriptFile", Key::ScriptFile, true),
    (Some('E'), "useExistingTestFile", Key::UseExistingTestFile, false),
    (Some('F'), "filePerProc", Key::FilePerProc, false),
    (Some('g'), "intraTestBarriers", Key::IntraTestBarriers, false),
    (Some('G'), "setTimeStampSignature", Key::TimeStampSignature, true),
    (Some('i'), "repetitions", Key::Repetitions, true),
    (Some('k'), "keepFile", Key::KeepFile, false),
    (Some('l'), "dataPacketType", Key::DataPacketType, true),
    (Some('K'), "keepFileWithError", Key::KeepFileWithError, false),
    (Some('N'), "numTasks", Key::NumTasks, true),
    (Some('o'), "testFile", Key::TestFile, true),
    (Some('O'), "", Key::Directive, true),
    (Some('Q'), "taskPerNodeOffset", Key::TaskPerNodeOffset, true),
    (Some('r'), "readFile", Key::ReadFile, false),
    (Some('R'), "checkRead", Key::CheckRead, false),
    (Some('s'), "segmentCount", Key::SegmentCount, true),
    (Some('t'), "transferSize", Key::TransferSize, true),
    (Some('T'), "maxTimeDuration", Key::MaxTimeDuration, true),
    (None, "dryRun", Key::DryRun, false),
    (Some('z'), "randomOffset", Key::RandomOffset, false),
    (Some('Z'), "reorderTasksRandom", Key::ReorderTasksRandom, false),
    (None, "random-offset-seed", Key::RandomSeed, true),
    (Some('u'), "uniqueDir", Key::UniqueDir, false),
    (Some('v'), "verbose", Key::Verbose, false),
    (Some('w'), "writeFile", Key::WriteFile, false),
    (Some('W'), "checkWrite", Key::CheckWrite, false),
    (Some('X'), "reorderTasksRandomSeed", Key::ReorderTasksRandomSeed, true),
    (Some('Y'), "fsyncPerWrite", Key::FsyncPerWrite, false),
    // IOR learns the placement from MPI; here ranks are threads or modelled, so it is given.
    (None, "tasks-per-node", Key::TasksPerNode, true),
    // IOR 4 spells these --mpiio.showHints and --mpiio.hintsFileName; -H and -U are IOR 3's.
    (Some('H'), "showHints", Key::ShowHints, false),
    (Some('U'), "hintsFileName", Key::HintsFileName, true),
];

/// Module options that are fields of [`IorParams`] rather than entries of
/// `module_options`, so that every backend sees them: module, name, option.
const FRONT_END_MODULE_OPTIONS: &[(&str, &str, Key)] =
    &[("mpiio", "showHints", Key::ShowHints), ("mpiio", "hintsFileName", Key::HintsFileName)];

/// `-O` keys that are not long option names (lower-case).
const DIRECTIVE_ALIASES: &[(&str, Key)] = &[
    ("summaryformat", Key::SummaryFormat),
    ("summaryfile", Key::SummaryFile),
    ("stonewallingwearout", Key::WearOut),
    ("stonewallingwearoutiterations", Key::WearOutIterations),
    ("stonewallingstatusfile", Key::StatusFile),
    ("saverankperformancedetailscsv", Key::RankDetailsCsv),
    ("reordertasksconstant", Key::ReorderTasks),
    ("refnum", Key::RefNum),
    ("testfile", Key::TestFile),
    ("taskspernode", Key::TasksPerNode),
];

/// IOR options lanefs-ior refuses: short letter, long name, takes a value, why and what to
/// do instead. A value option whose value is `0` means "off" in IOR and is accepted.
const REFUSED: &[(Option<char>, &str, bool, &str)] = &[
    (Some('j'), "outlierThreshold", true, "outlier detection is not implemented; drop -j"),
    (Some('J'), "setAlignment", true, "HDF5 alignment does not apply to lanefs-ior's backends; drop -J"),
    (Some('m'), "multiFile", false, "multiFile is not implemented; drop -m"),
    (Some('M'), "memoryPerNode", true, "memory hogging is not implemented; drop -M"),
    (Some('n'), "noFill", false, "HDF5 noFill does not apply; drop -n"),
    (Some('p'), "preallocate", false, "preallocation is an MPIIO option; drop -p"),
    (Some('P'), "useSharedFilePointer", false, "shared file pointers are not implemented (IOR: not working); drop -P"),
    (
        Some('q'),
        "quitOnError",
        false,
        "quitOnError is not implemented (data errors are counted and the run fails at the end); drop -q",
    ),
    (Some('S'), "useStridedDatatype", false, "strided datatypes are an MPIIO option; drop -S"),
    (Some('V'), "useFileView", false, "file views are an MPIIO option; drop -V"),
    (Some('x'), "singleXferAttempt", false, "singleXferAttempt is not implemented; drop -x"),
    (Some('y'), "dualMount", false, "dualMount is not implemented; drop -y"),
    (Some('I'), "individualDataSets", false, "individualDataSets is not implemented (IOR: not working); drop -I"),
    (None, "randomPrefill", true, "randomPrefill goes with -z, which is not implemented; drop it"),
    (None, "warningAsErrors", false, "warningAsErrors is not implemented; drop it"),
    (None, "allocateBufferOnGPU", true, "GPU buffers are not supported; drop it"),
    (None, "GPUid", true, "GPU buffers are not supported; drop it"),
    (None, "memoryPerTask", true, "memory hogging is not implemented; drop it"),
];

/// `-O` keys IOR knows that lanefs-ior refuses (lower-case), with the fix.
const REFUSED_DIRECTIVES: &[(&str, &str)] = &[
    ("stonewallingtime", "IOR has no stoneWallingTime directive; its time limit is -D / deadlineForStonewalling"),
    ("mintimeduration", "minTimeDuration is not implemented; drop it"),
    ("saveperopdatacsv", "per-operation CSV data is not implemented; drop it"),
    ("lustrestripecount", "Lustre striping directives do not apply; with -a LANEFS use --lanefs.stripe-count"),
    ("lustrestripesize", "Lustre striping directives do not apply; with -a LANEFS use --lanefs.stripe-size"),
    ("lustrestartost", "Lustre striping directives do not apply; drop it"),
    ("lustreignorelocks", "Lustre lock directives do not apply; with -a LANEFS use --lanefs.lock-mode"),
];

/// Parse the argument at `index`; return the index of the next one.
fn parse_one(args: &[String], index: usize, params: &mut IorParams) -> Result<usize, IorError> {
    let arg = args[index].as_str();
    if let Some(body) = arg.strip_prefix("--") {
        return parse_long(args, index, body, params);
    }
    let mut chars = arg.chars();
    let (Some('-'), Some(letter)) = (chars.next(), chars.next()) else {
        return Err(positional_error(args, index));
    };
    let rest = chars.as_str();
    if let Some(&(_, _, key, takes_value)) = OPTIONS.iter().find(|o| o.0 == Some(letter)) {
        if !takes_value {
            if !rest.is_empty() {
                return parse_group(args, index, params);
            }
            apply(params, key, None, arg)?;
            return Ok(index + 1);
        }
        let attached = rest.strip_prefix('=').unwrap_or(rest);
        let (value, next) = if attached.is_empty() { take_next(args, index, arg)? } else { (attached, index + 1) };
        apply(params, key, Some(value), &format!("-{letter} {value}"))?;
        return Ok(next);
    }
    if let Some(&(_, long, takes_value, why)) = REFUSED.iter().find(|r| r.0 == Some(letter)) {
        let name = format!("-{letter} ({long})");
        return refuse_or_accept_zero(args, index, rest, takes_value, &name, why);
    }
    Err(IorError::option(arg, "unknown option (run with -h for the supported options)"))
}

/// A group of flags after one dash, as IOR 4 reads one (`-vvv`, `-wr`,
/// `-wWe`): each letter is its own flag, and the last may be an option that
/// takes a value, which is then the next argument (`-wb 4m`). IOR also
/// reads the letters of a value written on to its first letter (`-b4m`
/// sets `-m` too); lanefs reads `-b4m` as `-b 4m` alone.
fn parse_group(args: &[String], index: usize, params: &mut IorParams) -> Result<usize, IorError> {
    let arg = args[index].as_str();
    let letters: Vec<char> = arg[1..].chars().collect();
    for (at, &letter) in letters.iter().enumerate() {
        let last = at + 1 == letters.len();
        if let Some(&(_, long, key, takes_value)) = OPTIONS.iter().find(|o| o.0 == Some(letter)) {
            if !takes_value {
                apply(params, key, None, &format!("-{letter}"))?;
                continue;
            }
            if !last {
                return Err(IorError::option(
                    arg,
                    format!(
                        "-{letter} ({long}) takes a value: put it last in the group, its value next (-{letter} VALUE)"
                    ),
                ));
            }
            let (value, next) = take_next(args, index, arg)?;
            apply(params, key, Some(value), &format!("-{letter} {value}"))?;
            return Ok(next);
        }
        if let Some(&(_, long, _, why)) = REFUSED.iter().find(|r| r.0 == Some(letter)) {
            return Err(IorError::option(format!("-{letter} ({long}) in {arg}"), why));
        }
        let reason = if letter == '=' {
            "a group of flags takes no value; write the flag alone (-v=2 sets -v to 2)".to_string()
        } else {
            format!("unknown option -{letter} in a group of flags (run with -h for the supported options)")
        };
        return Err(IorError::option(arg, reason));
    }
    Ok(index + 1)
}

fn parse_long(args: &[String], index: usize, body: &str, params: &mut IorParams) -> Result<usize, IorError> {
    let arg = &args[index];
    let (name, inline) = match body.split_once('=') {
        Some((name, value)) => (name, Some(value)),
        None => (body, None),
    };
    if name.is_empty() {
        return Err(IorError::option(arg, "IOR 3's `--` separator is gone; write module options as --<api>.<name>"));
    }
    if let Some((module, option)) = name.split_once('.') {
        if module.is_empty() || option.is_empty() {
            return Err(IorError::option(
                arg,
                "module options are written --<api>.<name>[=value], e.g. --posix.odirect",
            ));
        }
        if let Some(key) = front_end_module_option(module, option) {
            let (value, next) = match (key, inline) {
                (Key::HintsFileName, None) => {
                    let (value, next) = take_next(args, index, arg)?;
                    (Some(value), next)
                }
                (_, inline) => (inline, index + 1),
            };
            apply(params, key, value, arg)?;
            return Ok(next);
        }
        params.module_options.insert(format!("{}.{option}", module.to_ascii_lowercase()), inline.map(str::to_string));
        return Ok(index + 1);
    }
    if let Some(&(_, long, key, takes_value)) =
        OPTIONS.iter().find(|o| !o.1.is_empty() && o.1.eq_ignore_ascii_case(name))
    {
        if !takes_value {
            if inline.is_some() {
                return Err(IorError::option(arg, format!("--{long} is a flag and takes no value; write --{long}")));
            }
            apply(params, key, None, arg)?;
            return Ok(index + 1);
        }
        let (value, next) = match inline {
            Some(value) => (value, index + 1),
            None => take_next(args, index, arg)?,
        };
        apply(params, key, Some(value), &format!("--{long}={value}"))?;
        return Ok(next);
    }
    if let Some(&(_, long, takes_value, why)) = REFUSED.iter().find(|r| r.1.eq_ignore_ascii_case(name)) {
        let rest = inline.map(|v| format!("={v}")).unwrap_or_default();
        return refuse_or_accept_zero(args, index, &rest, takes_value, &format!("--{long}"), why);
    }
    Err(IorError::option(arg, "unknown option (run with -h for the supported options)"))
}

/// A refused IOR option: accepted only as `<option> 0` (IOR's "off") when it takes a value.
fn refuse_or_accept_zero(
    args: &[String],
    index: usize,
    attached: &str,
    takes_value: bool,
    name: &str,
    why: &str,
) -> Result<usize, IorError> {
    if takes_value {
        let attached = attached.strip_prefix('=').unwrap_or(attached);
        let (value, next) = if attached.is_empty() { take_next(args, index, name)? } else { (attached, index + 1) };
        if parse_int(value).ok() == Some(0) {
            return Ok(next);
        }
        return Err(IorError::option(format!("{name} {value}"), why));
    }
    Err(IorError::option(name, why))
}

fn take_next<'a>(args: &'a [String], index: usize, option: &str) -> Result<(&'a str, usize), IorError> {
    match args.get(index + 1) {
        Some(value) => Ok((value.as_str(), index + 2)),
        None => Err(IorError::option(option, "needs a value")),
    }
}

fn positional_error(args: &[String], index: usize) -> IorError {
    let arg = &args[index];
    let after_module = index > 0 && args[index - 1].starts_with("--") && args[index - 1].contains('.');
    if after_module && !args[index - 1].contains('=') {
        let module = &args[index - 1];
        return IorError::option(
            format!("{module} {arg}"),
            format!("module options take their value after '=': write {module}={arg}"),
        );
    }
    IorError::option(arg, "unexpected argument; IOR takes no positional arguments (the file name goes after -o)")
}

/// Apply one option; `shown` is how the option reads in an error message.
fn apply(params: &mut IorParams, key: Key, value: Option<&str>, shown: &str) -> Result<(), IorError> {
    let text = || value.unwrap_or_default();
    let size = || size_option(text(), shown);
    let count = |min: u64, max: u64| parse_count(text(), shown, min, max);
    match key {
        Key::Api => params.api = non_empty(text(), shown)?.to_string(),
        Key::RefNum => params.reference_number = parse_int(text()).map_err(|m| IorError::option(shown, m))?,
        Key::BlockSize => params.block_size_bytes = size()?,
        Key::TransferSize => params.transfer_size_bytes = size()?,
        Key::SegmentCount => params.segment_count = count(1, u64::MAX)?,
        Key::NumTasks => params.num_tasks = count(1, u64::from(NUM_TASKS_MAX))? as u32,
        Key::Repetitions => params.repetitions = count(1, u64::from(u32::MAX))? as u32,
        Key::TaskPerNodeOffset => params.task_per_node_offset = count(0, u64::from(u32::MAX))? as u32,
        Key::InterTestDelay => params.inter_test_delay_s = count(0, 3600)? as u32,
        Key::MaxTimeDuration => params.max_time_duration_min = count(0, u64::from(u32::MAX))? as u32,
        Key::Deadline => params.deadline_for_stonewalling_s = count(0, u64::from(i32::MAX as u32))? as u32,
        Key::WearOut => params.stonewalling_wear_out = flag_value(value, shown, 1)? != 0,
        Key::WearOutIterations => params.stonewalling_wear_out_iterations = count(0, i64::MAX as u64)?,
        Key::StatusFile => params.stonewalling_status_file = Some(non_empty(text(), shown)?.to_string()),
        Key::DataPacketType => {
            params.data_packet_type = PacketType::from_name(text()).ok_or_else(|| {
                IorError::option(
                    shown,
                    "unknown packet type; give timestamp, offset, incompressible or random (t, o, i, r)",
                )
            })?
        }
        Key::RankDetailsCsv => params.save_rank_details_csv = Some(non_empty(text(), shown)?.to_string()),
        Key::TimeStampSignature => {
            params.time_stamp_signature = parse_int(text()).map_err(|m| IorError::option(shown, m))?
        }
        Key::ReorderTasksRandomSeed => {
            params.reorder_tasks_random_seed = parse_int(text()).map_err(|m| IorError::option(shown, m))?
        }
        Key::TestFile => params.test_file = non_empty(text(), shown)?.to_string(),
        Key::TasksPerNode => params.tasks_per_node = Some(count(1, u64::from(NUM_TASKS_MAX))? as u32),
        Key::HintsFileName => params.hints_file_name = Some(non_empty(text(), shown)?.to_string()),
        Key::ScriptFile => {
            if params.script_file.is_some() {
                return Err(IorError::option(shown, "one script per run; give -f once"));
            }
            params.script_file = Some(non_empty(text(), shown)?.to_string());
        }
        Key::Directive => return apply_directives(params, text()),
        Key::SummaryFormat => {
            params.summary_format = match text().to_ascii_lowercase().as_str() {
                "default" => SummaryFormat::Default,
                "json" => SummaryFormat::Json,
                "csv" => SummaryFormat::Csv,
                _ => return Err(IorError::option(shown, "unknown summaryFormat; use default, JSON or CSV")),
            }
        }
        Key::SummaryFile => params.summary_file = Some(non_empty(text(), shown)?.to_string()),
        Key::Verbose => params.verbose = flag_value(value, shown, params.verbose + 1)?,
        Key::RandomOffset => params.random_offset = flag_value(value, shown, params.random_offset + 1)?,
        Key::ReorderTasksRandom => {
            params.reorder_tasks_random = flag_value(value, shown, params.reorder_tasks_random + 1)?
        }
        Key::RandomSeed => {
            let seed = parse_int(text()).map_err(|m| IorError::option(shown, m))?;
            if !(-1..=i64::from(i32::MAX)).contains(&seed) {
                return Err(IorError::option(shown, "must be -1 (from the clock) or a seed from 0 to 2147483647"));
            }
            params.random_seed = seed;
        }
        _ => {
            let on = flag_value(value, shown, 1)? != 0;
            *flag_field(params, key) = on;
        }
    }
    Ok(())
}

/// The bool field of a flag option.
fn flag_field(params: &mut IorParams, key: Key) -> &mut bool {
    match key {
        Key::Collective => &mut params.collective,
        Key::ReorderTasks => &mut params.reorder_tasks,
        Key::Fsync => &mut params.fsync,
        Key::UseExistingTestFile => &mut params.use_existing_test_file,
        Key::FilePerProc => &mut params.file_per_proc,
        Key::IntraTestBarriers => &mut params.intra_test_barriers,
        Key::KeepFile => &mut params.keep_file,
        Key::KeepFileWithError => &mut params.keep_file_with_error,
        Key::ReadFile => &mut params.read_file,
        Key::CheckRead => &mut params.check_read,
        Key::UniqueDir => &mut params.unique_dir,
        Key::WriteFile => &mut params.write_file,
        Key::CheckWrite => &mut params.check_write,
        Key::FsyncPerWrite => &mut params.fsync_per_write,
        Key::ShowHints => &mut params.show_hints,
        Key::DryRun => &mut params.dry_run,
        other => unreachable!("{other:?} is not a flag"),
    }
}

/// A flag on the command line counts as `on_value`; as a directive (`-O keepFile=1`) its
/// value is an integer, as IOR's `atoi`.
fn flag_value(value: Option<&str>, shown: &str, on_value: u32) -> Result<u32, IorError> {
    match value {
        None => Ok(on_value),
        Some(text) => match parse_int(text) {
            Ok(n) if (0..=i64::from(u32::MAX)).contains(&n) => Ok(n as u32),
            _ => Err(IorError::option(shown, "expects 0 or 1 (a count for verbose)")),
        },
    }
}

/// `-O key=val[,key=val]...`; a `#` starts a comment, as in IOR's `ParseLine`.
fn apply_directives(params: &mut IorParams, line: &str) -> Result<(), IorError> {
    let line = line.split('#').next().unwrap_or_default();
    for directive in line.split(',') {
        let shown = format!("-O {}", directive.trim());
        let Some((key, value)) = directive.split_once('=') else {
            return Err(IorError::option(shown, "syntax error in configuration options; write -O key=value"));
        };
        let (key, value) = (key.trim(), value.trim());
        if key.is_empty() || value.is_empty() {
            return Err(IorError::option(shown, "syntax error in configuration options; write -O key=value"));
        }
        apply_directive(params, key, value, &shown)?;
    }
    Ok(())
}

fn apply_directive(params: &mut IorParams, key: &str, value: &str, shown: &str) -> Result<(), IorError> {
    let lower = key.to_ascii_lowercase();
    if lower == "useo_direct" {
        params.module_options.insert("posix.odirect".to_string(), Some(value.to_string()));
        return Ok(());
    }
    if let Some((module, option)) = key.split_once('.') {
        if let Some(key) = front_end_module_option(module, option) {
            return apply(params, key, Some(value), shown);
        }
        params.module_options.insert(format!("{}.{option}", module.to_ascii_lowercase()), Some(value.to_string()));
        return Ok(());
    }
    let found = DIRECTIVE_ALIASES
        .iter()
        .find(|(alias, _)| *alias == lower)
        .map(|&(_, key)| key)
        .or_else(|| OPTIONS.iter().find(|o| !o.1.is_empty() && o.1.eq_ignore_ascii_case(key)).map(|o| o.2));
    if let Some(found) = found {
        return apply(params, found, Some(value), shown);
    }
    let refused = REFUSED_DIRECTIVES
        .iter()
        .copied()
        .chain(REFUSED.iter().map(|r| (r.1, r.3)))
        .find(|(name, _)| name.eq_ignore_ascii_case(key));
    match refused {
        Some((name, _)) if name != "stonewallingtime" && parse_int(value).ok() == Some(0) => Ok(()),
        Some((_, why)) => Err(IorError::option(shown, why)),
        None => Err(IorError::option(shown, format!("unrecognized parameter \"{key}\""))),
    }
}

/// The option a front-end module option (`--mpiio.showHints`) sets, matched
/// case-insensitively as IOR's directives are.
fn front_end_module_option(module: &str, option: &str) -> Option<Key> {
    FRONT_END_MODULE_OPTIONS
        .iter()
        .find(|(m, name, _)| m.eq_ignore_ascii_case(module) && name.eq_ignore_ascii_case(option))
        .map(|&(_, _, key)| key)
}

fn non_empty<'a>(text: &'a str, shown: &str) -> Result<&'a str, IorError> {
    if text.is_empty() {
        return Err(IorError::option(shown, "needs a non-empty value"));
    }
    Ok(text)
}

/// An integer with an optional k/m/g/t/p suffix (base 2), as IOR's `string_to_bytes`.
pub fn parse_int(text: &str) -> Result<i64, String> {
    let text = text.trim();
    // IOR (`string_to_bytes`) reads a number and one unit letter, base 2
    // whatever the spelling, and ignores what follows the letter: `4m`,
    // `4M`, `4mb`, `4MB` and `4MiB` are all 4 MiB. lanefs takes the same
    // spellings and refuses anything else after the letter.
    let unit_at = text.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(text.len());
    let (digits, unit) = text.split_at(unit_at);
    let bad = || {
        format!(
            "'{text}' is not a size; use digits with an optional unit k, m, g, t or p (base 2, as IOR reads \
             them; 4m, 4M, 4mb and 4MiB are all 4 MiB)"
        )
    };
    let shift = match unit.as_bytes() {
        [] => 0,
        [letter] | [letter, b'b' | b'B'] | [letter, b'i' | b'I', b'b' | b'B'] => match letter.to_ascii_lowercase() {
            b'k' => 10,
            b'm' => 20,
            b'g' => 30,
            b't' => 40,
            b'p' => 50,
            _ => return Err(bad()),
        },
        _ => return Err(bad()),
    };
    let digits = digits.trim_end();
    let unsigned = digits.strip_prefix(['-', '+']).unwrap_or(digits);
    if unsigned.is_empty() || !unsigned.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let number: i64 = digits.parse().map_err(|_| bad())?;
    number.checked_mul(1i64 << shift).ok_or_else(|| format!("'{text}' is too large"))
}

/// A size in bytes as IOR reads one (`4m`, `64k`, `1g`, `2t`, `4mb`,
/// `4MiB`, or bytes; base 2): the size parser of every lanefs command, so that a size means
/// the same wherever it is typed.
pub fn parse_size(text: &str) -> Result<u64, String> {
    match parse_int(text) {
        Ok(n) if n >= 0 => Ok(n as u64),
        Ok(_) => Err(format!("'{}' must not be negative", text.trim())),
        Err(message) => Err(message),
    }
}

/// [`parse_size`] of option `shown`.
fn size_option(text: &str, shown: &str) -> Result<u64, IorError> {
    match parse_int(text) {
        Ok(n) if n >= 0 => Ok(n as u64),
        Ok(_) => Err(IorError::option(shown, "must not be negative")),
        Err(message) => Err(IorError::option(shown, message)),
    }
}

fn parse_count(text: &str, shown: &str, min: u64, max: u64) -> Result<u64, IorError> {
    let n = size_option(text, shown)?;
    if n < min || n > max {
        return Err(IorError::option(shown, format!("must be between {min} and {max}")));
    }
    Ok(n)
}

/// IOR's `ValidateTests`, plus what lanefs-ior cannot do.
fn validate(p: &IorParams) -> Result<(), IorError> {
    if p.reorder_tasks && p.reorder_tasks_random > 0 {
        return Err(IorError::option("-C -Z", "both constant and random task reordering; choose one"));
    }
    if p.random_offset > 0 && p.reorder_tasks_random > 0 && !p.file_per_proc {
        return Err(IorError::option(
            "-z -Z",
            "random offsets and random task reordering on a single shared file; choose one",
        ));
    }
    if p.random_offset > 1 {
        return Err(IorError::option(
            "-z -z",
            "random, possibly overlapping offsets are not implemented; give -z once (shuffled offsets)",
        ));
    }
    if p.random_offset == 1 {
        // IOR's checks (ior.c ValidateTests).
        if p.block_size_bytes == p.transfer_size_bytes {
            return Err(IorError::option(
                "-z",
                "IOR shuffles the transfers within a block and repeats the order in every segment: \
                 choose a block size (-b) larger than the transfer size (-t)",
            ));
        }
        if p.reorder_tasks && !p.file_per_proc {
            return Err(IorError::option(
                "-z",
                "random offsets and constant task reordering (-C) on a single shared file: choose one",
            ));
        }
        if p.check_read && p.random_seed == -1 {
            return Err(IorError::option(
                "-z",
                "random offsets with the read check (-R) need a set seed: add --random-offset-seed=N",
            ));
        }
    }
    // IOR's checks of its stonewalling options (ior.c ValidateTests).
    if p.stonewalling_status_file.is_some() && !p.keep_file {
        return Err(IorError::option(
            "-O stoneWallingStatusFile",
            "a StoneWallingStatusFile is only sensible when splitting write/read into multiple executions of ior, please use -k",
        ));
    }
    if p.stonewalling_status_file.is_some() && !p.stonewalling_wear_out && p.write_file {
        return Err(IorError::option(
            "-O stoneWallingStatusFile",
            "the StoneWallingStatusFile is only sensible for a write test when using stoneWallingWearOut; add -O stoneWallingWearOut=1",
        ));
    }
    if p.deadline_for_stonewalling_s == 0 && p.stonewalling_wear_out {
        return Err(IorError::option(
            "-O stoneWallingWearOut",
            "the stoneWallingWearOut is only sensible when setting a stonewall deadline with -D",
        ));
    }
    if p.dry_run && (p.check_write || p.check_read) {
        return Err(IorError::option(
            "--dryRun",
            "a dry run moves no data, so there is nothing to check; drop -W and -R (or --dryRun)",
        ));
    }
    let block = p.block_size_bytes;
    let transfer = p.transfer_size_bytes;
    if !block.is_multiple_of(ACCESS_UNIT_BYTES) {
        return Err(IorError::option(
            format!("-b {block}"),
            format!(
                "block size must be a multiple of access size ({ACCESS_UNIT_BYTES} bytes); e.g. -b {}",
                round_up(block)
            ),
        ));
    }
    if transfer == 0 {
        return Err(IorError::option("-t 0", "test will not complete with zero transfer size"));
    }
    if !transfer.is_multiple_of(ACCESS_UNIT_BYTES) {
        return Err(IorError::option(
            format!("-t {transfer}"),
            format!(
                "transfer size must be a multiple of access size ({ACCESS_UNIT_BYTES} bytes); e.g. -t {}",
                round_up(transfer)
            ),
        ));
    }
    if block < transfer {
        return Err(IorError::option(
            format!("-b {block} -t {transfer}"),
            "block size must not be smaller than transfer size; raise -b or lower -t",
        ));
    }
    if !block.is_multiple_of(transfer) {
        return Err(IorError::option(
            format!("-b {block} -t {transfer}"),
            format!("block size must be a multiple of transfer size; e.g. -b {}", (block / transfer + 1) * transfer),
        ));
    }
    let total = block.checked_mul(p.segment_count).and_then(|n| n.checked_mul(u64::from(p.num_tasks)));
    if total.is_none_or(|n| n > i64::MAX as u64) {
        return Err(IorError::option(
            format!("-b {block} -s {} -N {}", p.segment_count, p.num_tasks),
            "the aggregate file size overflows a 64-bit offset",
        ));
    }
    let signature_missing = p.time_stamp_signature == 0 && !p.write_file;
    if signature_missing && p.check_read {
        return Err(IorError::option(
            "-R",
            "using readCheck only requires to write a timeStampSignature -- use -G (the -G the file was written with)",
        ));
    }
    if signature_missing && p.check_write {
        return Err(IorError::option(
            "-W",
            "checking a write without -w compares against this run's clock signature and always fails; add -w, or give the -G the file was written with",
        ));
    }
    if p.test_file.contains('@') {
        return Err(IorError::option(
            format!("-o {}", p.test_file),
            "several test files separated by '@' are not supported; give one name",
        ));
    }
    Ok(())
}

fn round_up(bytes: u64) -> u64 {
    bytes.div_ceil(ACCESS_UNIT_BYTES).max(1) * ACCESS_UNIT_BYTES
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(line: &str) -> Result<IorParams, IorError> {
        let args: Vec<String> = line.split_whitespace().map(str::to_string).collect();
        parse_args(&args)
    }

    fn error(line: &str) -> String {
        parse(line).expect_err(line).to_string()
    }

    #[test]
    fn stonewalling_options_parse_and_are_checked_as_ior_checks_them() {
        let p = parse("-w -D 300 -O stoneWallingWearOut=1 -O stoneWallingStatusFile=/tmp/sw -k").unwrap();
        assert_eq!(p.deadline_for_stonewalling_s, 300);
        assert!(p.stonewalling_wear_out);
        assert_eq!(p.stonewalling_status_file.as_deref(), Some("/tmp/sw"));
        let p = parse("-r -O stoneWallingWearOutIterations=12 -O deadlineForStonewalling=5").unwrap();
        assert_eq!((p.stonewalling_wear_out_iterations, p.deadline_for_stonewalling_s), (12, 5));
        assert_eq!(parse("--deadlineForStonewalling=10").unwrap().deadline_for_stonewalling_s, 10);
        assert!(
            error("-w -O stoneWallingWearOut=1").contains("only sensible when setting a stonewall deadline with -D")
        );
        assert!(error("-w -D 5 -O stoneWallingStatusFile=/tmp/sw").contains("please use -k"));
        assert!(error("-w -k -D 5 -O stoneWallingStatusFile=/tmp/sw").contains("stoneWallingWearOut"));
        // A read of an earlier run's stonewalled write needs neither -D nor wear-out.
        assert!(parse("-r -k -O stoneWallingStatusFile=/tmp/sw").is_ok());
        assert!(error("-D -1").contains("-D"));
    }

    #[test]
    fn defaults_are_iors() {
        let p = parse("").unwrap();
        assert_eq!((p.block_size_bytes, p.transfer_size_bytes, p.segment_count), (1 << 20, 256 << 10, 1));
        assert!(p.write_file && p.read_file && !p.check_write && !p.check_read);
        assert_eq!((p.test_file.as_str(), p.repetitions, p.num_tasks, p.api.as_str()), ("testFile", 1, 1, "POSIX"));
        assert_eq!(p.task_per_node_offset, 1);
        assert_eq!(p.command_line, "lanefs ior");
    }

    #[test]
    fn sizes_take_base_two_suffixes() {
        assert_eq!(parse_int("4k"), Ok(4096));
        assert_eq!(parse_int("2M"), Ok(2 << 20));
        assert_eq!(parse_int("1g"), Ok(1 << 30));
        assert_eq!(parse_int("1t"), Ok(1 << 40));
        assert_eq!(parse_int("47008"), Ok(47008));
        assert_eq!(parse_int("-3"), Ok(-3));
        assert!(parse_int("1.5m").is_err());
        assert!(parse_int("m").is_err());
        // IOR's spellings of a unit: one letter, then nothing, `b` or `ib`.
        for spelled in ["4m", "4M", "4mb", "4MB", "4mB", "4MiB", "4mib", "4 m"] {
            assert_eq!(parse_int(spelled), Ok(4 << 20), "{spelled}");
        }
        assert_eq!(parse_int("2KiB"), Ok(2048));
        assert_eq!(parse_int("1p"), Ok(1 << 50));
        for wrong in ["4mm", "4mbs", "4x", "4 MiBs", "4kk", "b", "4ib"] {
            assert!(parse_int(wrong).unwrap_err().contains("4MiB are all 4 MiB"), "{wrong}");
        }
        assert!(parse_int("99999999999t").unwrap_err().contains("too large"));
        // The commands' size parser: the same sizes, never negative.
        assert_eq!(parse_size(" 64K "), Ok(64 << 10));
        assert_eq!(parse_size("-1").unwrap_err(), "'-1' must not be negative");
        assert!(parse_size("12x").unwrap_err().contains("unit"));
    }

    #[test]
    fn one_test_per_short_option() {
        let p = parse("-a posix -b 4m -t 1m -s 3 -F -c -w -W -e -Y -C -Q 2 -X 7 -i 2 -o /tmp/x -k -K -E -g -G 42 -u -v -v -N 4 -d 0 -A 9")
            .unwrap();
        assert_eq!(p.api, "posix");
        assert_eq!((p.block_size_bytes, p.transfer_size_bytes, p.segment_count), (4 << 20, 1 << 20, 3));
        assert!(p.file_per_proc && p.collective && p.write_file && p.check_write && !p.read_file);
        assert!(p.fsync && p.fsync_per_write && p.reorder_tasks && p.keep_file && p.keep_file_with_error);
        assert!(p.use_existing_test_file && p.intra_test_barriers && p.unique_dir);
        assert_eq!((p.task_per_node_offset, p.reorder_tasks_random_seed, p.repetitions), (2, 7, 2));
        assert_eq!((p.test_file.as_str(), p.time_stamp_signature, p.verbose, p.num_tasks), ("/tmp/x", 42, 2, 4));
        assert_eq!(p.reference_number, 9);
    }

    #[test]
    fn attached_and_equals_values() {
        let p = parse("-b4m -t=1m -G=-12 -o/tmp/f").unwrap();
        assert_eq!((p.block_size_bytes, p.transfer_size_bytes), (4 << 20, 1 << 20));
        assert_eq!((p.time_stamp_signature, p.test_file.as_str()), (-12, "/tmp/f"));
    }

    #[test]
    fn long_options_and_directives() {
        let p = parse("--blockSize=8m --transferSize 2m --segmentCount=2 --filePerProc --numTasks=3 -r").unwrap();
        assert_eq!((p.block_size_bytes, p.transfer_size_bytes, p.segment_count), (8 << 20, 2 << 20, 2));
        assert!(p.file_per_proc && p.read_file && !p.write_file);
        assert_eq!(p.num_tasks, 3);

        let p = parse("-O summaryFormat=JSON,summaryFile=/tmp/s.json -O BLOCKSIZE=4m,transfersize=1m -O filePerProc=1")
            .unwrap();
        assert_eq!(p.summary_format, SummaryFormat::Json);
        assert_eq!(p.summary_file.as_deref(), Some("/tmp/s.json"));
        assert_eq!((p.block_size_bytes, p.transfer_size_bytes), (4 << 20, 1 << 20));
        assert!(p.file_per_proc);
        assert_eq!(parse("-O summaryFormat=csv").unwrap().summary_format, SummaryFormat::Csv);
        assert_eq!(parse("-O verbose=3").unwrap().verbose, 3);
        assert!(!parse("-F -O filePerProc=0").unwrap().file_per_proc);
        assert!(parse("-O reorderTasksConstant=1").unwrap().reorder_tasks);
        let commented = parse_args(&["-O".to_string(), "blockSize=4m # comment".to_string()]).unwrap();
        assert_eq!(commented.block_size_bytes, 4 << 20);
    }

    #[test]
    fn tasks_per_node_is_stored() {
        assert_eq!(parse("-N 8").unwrap().tasks_per_node, None);
        let p = parse("-N 8 --tasks-per-node 2").unwrap();
        assert_eq!((p.tasks_per_node, p.tasks_on_node0(), p.nodes()), (Some(2), 2, 4));
        assert_eq!(parse("--tasks-per-node=4 -N 10").unwrap().nodes(), 3);
        assert_eq!(parse("-O tasksPerNode=3").unwrap().tasks_per_node, Some(3));
    }

    #[test]
    fn mpiio_options_are_carried_for_every_backend() {
        let p = parse("-a MPIIO -c --mpiio.showHints --mpiio.hintsFileName=/etc/hints").unwrap();
        assert!(p.collective && p.show_hints);
        assert_eq!(p.hints_file_name.as_deref(), Some("/etc/hints"));
        assert!(p.module_options.is_empty(), "front-end fields, not module options: {:?}", p.module_options);
        let p = parse("--MPIIO.showhints=0 --mpiio.hintsFileName /h").unwrap();
        assert!(!p.show_hints);
        assert_eq!(p.hints_file_name.as_deref(), Some("/h"));
        // IOR 3's spellings.
        let p = parse("-H -U hints.txt").unwrap();
        assert!(p.show_hints);
        assert_eq!(p.hints_file_name.as_deref(), Some("hints.txt"));
        let p = parse("-O showHints=1,hintsFileName=f -O mpiio.hintsFileName=g").unwrap();
        assert!(p.show_hints);
        assert_eq!(p.hints_file_name.as_deref(), Some("g"));
        assert!(error("--mpiio.hintsFileName").contains("needs a value"));
        assert!(error("--mpiio.hintsFileName=").contains("needs a non-empty value"));
        assert!(error("--mpiio.showHints=yes").contains("expects 0 or 1"));
    }

    #[test]
    fn module_options_are_collected() {
        let p = parse("--posix.odirect --lanefs.lock-mode=lockahead --LANEFS.stripe-count=4 -O useO_DIRECT=1").unwrap();
        assert_eq!(p.module_options.get("posix.odirect"), Some(&Some("1".to_string())));
        assert_eq!(p.module_value("lanefs.lock-mode"), Some("lockahead"));
        assert_eq!(p.module_value("lanefs.stripe-count"), Some("4"));
        assert!(p.module_flag("posix.odirect"));
        assert!(parse("--posix.odirect").unwrap().module_flag("posix.odirect"));
        assert!(!parse("-O posix.odirect=0").unwrap().module_flag("posix.odirect"));
    }

    #[test]
    fn validation_messages_name_the_option_and_the_fix() {
        assert_eq!(
            error("-b 1001 -t 8"),
            "invalid option -b 1001: block size must be a multiple of access size (8 bytes); e.g. -b 1008"
        );
        assert!(error("-t 12").contains("transfer size must be a multiple of access size"));
        assert!(error("-t 0").contains("zero transfer size"));
        assert!(error("-b 1m -t 2m").contains("block size must not be smaller than transfer size"));
        assert!(error("-b 1m -t 768k").contains("block size must be a multiple of transfer size; e.g. -b 1572864"));
        assert!(error("-r -R").contains("use -G"));
        assert!(parse("-r -R -G 5").is_ok());
        assert!(error("-W").contains("add -w"));
        assert!(error("-s 0").contains("-s 0: must be between 1"));
        assert!(error("-i 0").contains("-i 0"));
        assert!(error("-N 0").contains("-N 0"));
        assert!(parse("-N 75000").is_ok(), "backends that model whole phases run many tasks");
        assert!(error("-N 2000000").contains("1048576"));
        assert!(error("--tasks-per-node=0").contains("--tasks-per-node=0: must be between 1"));
        assert!(error("--tasks-per-node").contains("needs a value"));
        assert!(error("-b 4x").contains("not a size"));
        assert!(error("-o a@b").contains("'@'"));
        assert!(error("-b 8e -t 8").contains("-b 8e"));
        assert!(error("-b 4p -s 1g -N 4096").contains("overflows"));
    }

    #[test]
    fn unsupported_features_are_refused_with_the_fix() {
        assert!(parse("-z -b 4m -t 1m").unwrap().random_offset == 1);
        assert!(error("-z -z -b 4m").contains("give -z once"));
        assert!(error("-z -b 1m -t 1m").contains("larger than the transfer size"));
        assert!(error("-z -C -b 4m -t 1m").contains("choose one"));
        assert!(error("-z -w -r -R -b 4m -t 1m").contains("--random-offset-seed"));
        assert_eq!(parse("-z -w -r -R -b 4m -t 1m --random-offset-seed=7").unwrap().random_seed, 7);
        assert_eq!(parse("-Z -Z -X 3").unwrap().reorder_tasks_random, 2);
        assert!(error("-Z -C").contains("choose one"));
        assert!(error("-O stoneWallingTime=10").contains("IOR has no stoneWallingTime directive"));
        assert!(error("-O lustreStripeCount=4").contains("--lanefs.stripe-count"));
        assert!(error("-f /no/such/script").contains("-f /no/such/script: cannot read the script"));
        assert!(parse("--dryRun -w").unwrap().dry_run);
        assert!(error("--dryRun -w -W").contains("a dry run moves no data"));
        assert!(error("-p").contains("preallocation is an MPIIO option"));
    }

    #[test]
    fn groups_of_flags_read_as_ior_4_reads_them() {
        let p = parse("-vvv -wr -b 1m -t 256k").unwrap();
        assert_eq!(p.verbose, 3);
        assert!(p.write_file && p.read_file);
        let p = parse("-wWeb 2m -t 1m").unwrap();
        assert!(p.write_file && p.check_write && p.fsync);
        assert_eq!(p.block_size_bytes, 2 << 20);
        // A value written on to the first letter stays that option's value.
        assert_eq!(parse("-b4m -t 1m").unwrap().block_size_bytes, 4 << 20);
    }

    #[test]
    fn malformed_command_lines() {
        assert!(error("-wbr 4m").contains("-b (blockSize) takes a value: put it last in the group"));
        assert!(error("-w8").contains("unknown option -8 in a group"), "{}", error("-w8"));
        assert!(error("-wq").contains("-q (quitOnError) in -wq"), "{}", error("-wq"));
        assert!(error("-wy").contains("-y (dualMount) in -wy"), "{}", error("-wy"));
        assert!(error("-wb").contains("needs a value"));
        assert_eq!(error("-b"), "invalid option -b: needs a value");
        assert_eq!(error("--blockSize"), "invalid option --blockSize: needs a value");
        assert!(error("--filePerProc=1").contains("takes no value"));
        assert!(error("-y9").contains("dualMount"));
        assert_eq!(error("-B 4"), "invalid option -B: unknown option (run with -h for the supported options)");
        assert!(error("--noSuchThing").contains("--noSuchThing: unknown option"));
        assert!(error("file.dat").contains("IOR takes no positional arguments"));
        assert!(error("--lanefs.stripe-count 4").contains("write --lanefs.stripe-count=4"));
        assert!(error("-O blockSize").contains("syntax error"));
        assert!(error("-O bogus=1").contains("unrecognized parameter \"bogus\""));
        assert!(error("-O summaryFormat=xml").contains("unknown summaryFormat"));
        assert!(error("-- -a").contains("--"));
        assert!(error("--.x").contains("--<api>.<name>"));
    }
}
