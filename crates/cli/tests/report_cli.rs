//! `lanefs report` and `lanefs plot` of an IOR JSON summary: a simulated
//! collective run with Cray's MPI-IO timers becomes one HTML page, which a
//! real headless browser (Debian's `chromium`, which `make test` installs
//! as root; skipped with a message where it is not installed) loads
//! without errors, its pictures drawn.

use std::path::Path;
use std::process::Command;

fn lanefs() -> Command {
    Command::new(env!("CARGO_BIN_EXE_lanefs"))
}

/// A simulated collective run: its JSON summary (with the MPI-IO timers)
/// and its time series, in `dir`.
fn simulated_run(dir: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let series = dir.join("run.jsonl");
    let out = lanefs()
        .args(["sim", "ior", "--cluster", "laptop", "-a", "MPIIO", "-c", "-w", "-r", "-N", "8", "-b", "1m", "-t", "1m"])
        .args(["-s", "4"])
        .args(["-O", "summaryFormat=JSON", "--timeseries"])
        .arg(&series)
        .env("MPICH_MPIIO_TIMERS", "1")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let summary = dir.join("run.json");
    std::fs::write(&summary, &out.stdout).unwrap();
    (summary, series)
}

#[test]
fn a_runs_page_holds_its_tables_timers_and_pictures() {
    let dir = tempfile::tempdir().unwrap();
    let (summary, series) = simulated_run(dir.path());
    let json: serde_json::Value = serde_json::from_slice(&std::fs::read(&summary).unwrap()).unwrap();
    let writes = json["mpiio_timers"]["writes"].as_array().expect("the timers in the summary");
    assert_eq!(writes.len(), 1, "one collective write phase");
    assert!(writes[0]["phases"].as_array().unwrap().iter().any(|p| p["phase"] == "data send"));

    let page = dir.path().join("run.html");
    let out =
        lanefs().arg("report").arg(&summary).arg("--timeseries").arg(&series).arg("-o").arg(&page).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let html = std::fs::read_to_string(&page).unwrap();
    for wanted in ["lanefs sim ior", "bwMeanMIB", "lock_enqueues", "MPI-IO write phases", "Over time"] {
        assert!(html.contains(wanted), "the page shows {wanted}");
    }
    assert_eq!(html.matches("<svg").count(), 3, "bandwidth bars, timers and the time series, inline");
    assert!(!html.contains("src=") && !html.contains("<link"), "the page loads nothing else");
    in_a_browser(dir.path(), &html, 3);

    let bars = dir.path().join("bars.svg");
    let out = lanefs().arg("plot").arg(&summary).arg("-o").arg(&bars).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let svg = std::fs::read_to_string(&bars).unwrap();
    assert!(svg.contains("wait for coll") && svg.contains("Bandwidth by operation"), "both panels drawn");
}

#[test]
fn bad_inputs_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let not_ior = dir.path().join("x.json");
    std::fs::write(&not_ior, "{\"hello\": 1}").unwrap();
    let out = lanefs().arg("report").arg(&not_ior).args(["-o", "x.html"]).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("summaryFormat=JSON"));
    let out = lanefs().arg("report").arg(&not_ior).args(["-o", "x.pdf"]).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("name the report .html"));
}

/// Load `html` in headless Chromium, with a script put before the page's
/// own content that records errors and, once loaded, how many pictures
/// were drawn with room and marks; the DOM after loading holds the verdict.
fn in_a_browser(dir: &Path, html: &str, pictures: usize) {
    let Some(browser) = ["chromium", "chromium-browser"].into_iter().find(|b| which(b)) else {
        eprintln!("skipped the browser check: no chromium here (make test installs Debian's as root)");
        return;
    };
    const CHECK: &str = "<script>let errors=0;window.addEventListener('error',()=>{errors++},true);\
        window.addEventListener('load',()=>{const svgs=[...document.querySelectorAll('figure > svg')];\
        const drawn=svgs.filter(s=>{const b=s.getBBox();return b.width>400&&b.height>200&&s.querySelectorAll('*').length>50});\
        document.body.setAttribute('data-check','svgs='+svgs.length+' drawn='+drawn.length+' errors='+errors)});</script>";
    let checked = dir.join("check.html");
    std::fs::write(&checked, html.replacen("<head>", &format!("<head>{CHECK}"), 1)).unwrap();
    let out = Command::new(browser)
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--dump-dom"])
        .arg(format!("file://{}", checked.display()))
        .output()
        .unwrap();
    let dom = String::from_utf8_lossy(&out.stdout);
    let verdict = format!("data-check=\"svgs={pictures} drawn={pictures} errors=0\"");
    assert!(
        dom.contains(&verdict),
        "{browser} did not draw the page: {}",
        dom.lines().find(|l| l.contains("<body")).unwrap_or_default()
    );
}

fn which(program: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|paths| std::env::split_paths(&paths).any(|d| d.join(program).is_file()))
}
