//! Runs a target on input files, outside AFL, to reproduce a crash with a
//! backtrace: `cargo run --release --bin replay -- ost out/ost/default/crashes/id*`.

fn main() {
    let mut args = std::env::args().skip(1);
    let target = args.next().unwrap_or_default();
    let run: fn(&[u8]) = match target.as_str() {
        "codec" => lanefs_fuzz::codec,
        "ost" => lanefs_fuzz::ost,
        "client" => lanefs_fuzz::client,
        "mds" => lanefs_fuzz::mds,
        other => {
            eprintln!("unknown target {other:?}: use codec, ost, client or mds, then input files");
            std::process::exit(2);
        }
    };
    for path in args {
        let data = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        eprintln!("{path}");
        run(&data);
    }
}
