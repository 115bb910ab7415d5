//! A run's time series (`--timeseries FILE`): what moved in each interval
//! of the run, per rank and, from the backend, per OST and per client. One
//! format for real and simulated runs, JSON Lines:
//!
//! - line 1, the header: `{"format":"lanefs-timeseries","version":1,
//!   "source":"real"|"simulated","interval_s":0.1,"bins":N,
//!   "truncated":false,"groups":[{"name":"rank_write_bytes",
//!   "unit":"bytes","per":"rank","members":8},...]}`;
//! - then one line per bin, from the first to the last, every bin:
//!   `{"bin":0,"start_s":0.0,"end_s":0.1,"rank_write_bytes":[...],...}`,
//!   each group an array with one number per member (rank, OST or
//!   client, by index), counted in that bin.
//!
//! Bins start at the run's start (the first phase's). Bytes are counted
//! when they are done (a rank's transfer when its call returns, an OST's
//! when its reply reaches the client), events when they happen; a group's
//! unit says which (`bytes`, or `events`). docs/timeseries.md lists the
//! groups.

use std::collections::BTreeMap;
use std::io::{BufRead, Write};

use serde::{Deserialize, Serialize};

/// The header's `format`.
pub const FORMAT: &str = "lanefs-timeseries";
/// The header's `version`.
pub const VERSION: u32 = 1;
/// The most bins a series holds (as a client's timeline keeps).
pub const BINS_MAX: u64 = 1 << 20;
/// The most members a group has (ranks, OSTs or clients).
pub const MEMBERS_MAX: u32 = 1 << 22;
/// The most groups a series has.
pub const GROUPS_MAX: usize = 64;

/// One group's description, as the header gives it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupHead {
    /// `rank_write_bytes`, `ost_read_bytes`, `client_enqueues`, ...
    pub name: String,
    /// `bytes` or `events`.
    pub unit: String,
    /// What its members are: `rank`, `ost` or `client`.
    pub per: String,
    pub members: u32,
}

/// One group: its counts by member and bin, sparse.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Group {
    pub head: GroupHead,
    /// `counts[member][bin]`, bins with nothing left out.
    pub counts: BTreeMap<u32, BTreeMap<u64, u64>>,
}

impl Group {
    pub fn new(name: &str, unit: &str, per: &str, members: u32) -> Group {
        Group {
            head: GroupHead { name: name.into(), unit: unit.into(), per: per.into(), members },
            counts: BTreeMap::new(),
        }
    }

    /// Add `count` to `member`'s bin `bin`; a member past the group's
    /// count widens it (up to [`MEMBERS_MAX`]), a bin past [`BINS_MAX`] is
    /// dropped. Returns whether it was kept.
    pub fn add(&mut self, member: u32, bin: u64, count: u64) -> bool {
        if member >= MEMBERS_MAX || bin >= BINS_MAX {
            return false;
        }
        if count > 0 {
            let c = self.counts.entry(member).or_default().entry(bin).or_default();
            *c = c.saturating_add(count);
        }
        self.head.members = self.head.members.max(member + 1);
        true
    }

    /// The sum over members and bins.
    pub fn total(&self) -> u64 {
        self.counts.values().flat_map(|bins| bins.values()).fold(0u64, |a, &c| a.saturating_add(c))
    }

    /// The bins after the last that counted something.
    fn bins(&self) -> u64 {
        self.counts.values().filter_map(|bins| bins.keys().next_back()).map(|&b| b + 1).max().unwrap_or(0)
    }

    /// Each bin's sum over members, `bins` of them.
    pub fn per_bin(&self, bins: u64) -> Vec<u64> {
        let mut out = vec![0u64; bins as usize];
        for by_bin in self.counts.values() {
            for (&bin, &c) in by_bin.range(..bins) {
                out[bin as usize] = out[bin as usize].saturating_add(c);
            }
        }
        out
    }

    /// `member`'s count in each bin, `bins` of them.
    pub fn member(&self, member: u32, bins: u64) -> Vec<u64> {
        let mut out = vec![0u64; bins as usize];
        if let Some(by_bin) = self.counts.get(&member) {
            for (&bin, &c) in by_bin.range(..bins) {
                out[bin as usize] = c;
            }
        }
        out
    }

    /// Add every count of `other` (a group of the same name) to this one.
    pub fn merge(&mut self, other: &Group) {
        self.head.members = self.head.members.max(other.head.members);
        for (&member, by_bin) in &other.counts {
            for (&bin, &c) in by_bin {
                self.add(member, bin, c);
            }
        }
    }
}

/// A run's time series.
#[derive(Clone, Debug, PartialEq)]
pub struct TimeSeries {
    /// `real` or `simulated`.
    pub source: String,
    pub interval_s: f64,
    /// Whether some events came after the last bin kept.
    pub truncated: bool,
    pub groups: Vec<Group>,
}

/// The header line.
#[derive(Serialize, Deserialize)]
struct Header {
    format: String,
    version: u32,
    source: String,
    interval_s: f64,
    bins: u64,
    truncated: bool,
    groups: Vec<GroupHead>,
}

impl TimeSeries {
    pub fn new(source: &str, interval_s: f64) -> TimeSeries {
        TimeSeries { source: source.into(), interval_s, truncated: false, groups: Vec::new() }
    }

    /// The group `name`, made with `unit` and `per` if there is none yet.
    pub fn group(&mut self, name: &str, unit: &str, per: &str) -> &mut Group {
        let at = match self.groups.iter().position(|g| g.head.name == name) {
            Some(at) => at,
            None => {
                self.groups.push(Group::new(name, unit, per, 0));
                self.groups.len() - 1
            }
        };
        &mut self.groups[at]
    }

    pub fn get(&self, name: &str) -> Option<&Group> {
        self.groups.iter().find(|g| g.head.name == name)
    }

    /// Add every group of `other` to this series, by name.
    pub fn merge(&mut self, other: &TimeSeries) {
        self.truncated |= other.truncated;
        for g in &other.groups {
            self.group(&g.head.name, &g.head.unit, &g.head.per).merge(g);
        }
    }

    /// The bins from the first to the last that counted something.
    pub fn bins(&self) -> u64 {
        self.groups.iter().map(Group::bins).max().unwrap_or(0)
    }

    /// Write the series as JSON Lines (the module's format).
    pub fn write_jsonl(&self, out: &mut dyn Write) -> std::io::Result<()> {
        let bins = self.bins();
        let header = Header {
            format: FORMAT.into(),
            version: VERSION,
            source: self.source.clone(),
            interval_s: self.interval_s,
            bins,
            truncated: self.truncated,
            groups: self.groups.iter().map(|g| g.head.clone()).collect(),
        };
        serde_json::to_writer(&mut *out, &header)?;
        writeln!(out)?;
        // Each line's keys in the header's order: the bin and its times,
        // then the groups.
        for bin in 0..bins {
            let start = serde_json::to_string(&(bin as f64 * self.interval_s))?;
            let end = serde_json::to_string(&((bin + 1) as f64 * self.interval_s))?;
            write!(out, "{{\"bin\":{bin},\"start_s\":{start},\"end_s\":{end}")?;
            for g in &self.groups {
                let values: Vec<u64> = (0..g.head.members)
                    .map(|m| g.counts.get(&m).and_then(|b| b.get(&bin)).copied().unwrap_or(0))
                    .collect();
                write!(out, ",{}:{}", serde_json::to_string(&g.head.name)?, serde_json::to_string(&values)?)?;
            }
            writeln!(out, "}}")?;
        }
        Ok(())
    }

    /// Write the series to the file at `path` (made or emptied); the error
    /// names the file.
    pub fn write_file(&self, path: &std::path::Path) -> Result<(), String> {
        let fail = |e: std::io::Error| format!("cannot write the time series to {}: {e}", path.display());
        let mut out = std::io::BufWriter::new(std::fs::File::create(path).map_err(fail)?);
        self.write_jsonl(&mut out).map_err(fail)?;
        out.flush().map_err(fail)
    }

    /// Read the series in the file at `path`; the error names the file and
    /// the line.
    pub fn read_file(path: &std::path::Path) -> Result<TimeSeries, String> {
        let file = std::fs::File::open(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        TimeSeries::read_jsonl(&mut std::io::BufReader::new(file)).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Read a series written by [`TimeSeries::write_jsonl`]; the error names
    /// the line and what is wrong with it.
    pub fn read_jsonl(input: &mut dyn BufRead) -> Result<TimeSeries, String> {
        let mut lines = input.lines().enumerate();
        let first = match lines.next() {
            Some((_, line)) => line.map_err(|e| format!("line 1: {e}"))?,
            None => return Err("the file is empty: a time series starts with its header line".into()),
        };
        let header = Header::parse(&first)?;
        let mut series = TimeSeries::new(&header.source, header.interval_s);
        series.truncated = header.truncated;
        series.groups = header.groups.iter().map(|h| Group { head: h.clone(), counts: BTreeMap::new() }).collect();
        let mut read = 0u64;
        for (i, line) in lines {
            let n = i + 1;
            let line = line.map_err(|e| format!("line {n}: {e}"))?;
            if line.trim().is_empty() {
                continue;
            }
            if read >= header.bins {
                return Err(format!("line {n}: a bin past the {} the header gives", header.bins));
            }
            series.read_bin(n, read, &line)?;
            read += 1;
        }
        if read != header.bins {
            return Err(format!("the header gives {} bins and the file has {read}: it was cut short", header.bins));
        }
        Ok(series)
    }

    /// Bin `bin`'s line, line `n` of the file, into the groups.
    fn read_bin(&mut self, n: usize, bin: u64, line: &str) -> Result<(), String> {
        let object: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(line).map_err(|e| format!("line {n}: not a JSON object ({e})"))?;
        let got = object.get("bin").and_then(|b| b.as_u64()).ok_or(format!("line {n}: no \"bin\" number"))?;
        if got != bin {
            return Err(format!("line {n}: bin {got} where bin {bin} was due: bins come in order, each once"));
        }
        for g in &mut self.groups {
            let name = &g.head.name;
            let values = object.get(name).and_then(|v| v.as_array()).ok_or(format!("line {n}: no array \"{name}\""))?;
            if values.len() != g.head.members as usize {
                let members = g.head.members;
                return Err(format!("line {n}: \"{name}\" has {} numbers for its {members} members", values.len()));
            }
            for (member, v) in (0u32..).zip(values) {
                let c = v.as_u64().ok_or(format!("line {n}: \"{name}\" holds {v}, not a count"))?;
                if c > 0 {
                    g.counts.entry(member).or_default().insert(bin, c);
                }
            }
        }
        Ok(())
    }
}

impl Header {
    /// The header line, checked.
    fn parse(line: &str) -> Result<Header, String> {
        let header: Header = serde_json::from_str(line)
            .map_err(|e| format!("line 1 is not a lanefs time series header ({e}); write one with --timeseries"))?;
        if header.format != FORMAT || header.version != VERSION {
            return Err(format!(
                "line 1: format {} version {}: this lanefs reads {FORMAT} version {VERSION}",
                header.format, header.version
            ));
        }
        if !(header.interval_s.is_finite() && header.interval_s > 0.0) {
            return Err(format!("line 1: interval_s {} is not a positive number of seconds", header.interval_s));
        }
        if header.bins > BINS_MAX || header.groups.len() > GROUPS_MAX {
            return Err(format!(
                "line 1: {} bins and {} groups; at most {BINS_MAX} and {GROUPS_MAX}",
                header.bins,
                header.groups.len()
            ));
        }
        if let Some(g) = header.groups.iter().find(|g| g.members > MEMBERS_MAX) {
            return Err(format!("line 1: group {} has {} members; at most {MEMBERS_MAX}", g.name, g.members));
        }
        Ok(header)
    }
}

/// Counts by bin.
type ByBin = BTreeMap<u64, u64>;

/// Bins of `interval_s` per rank, filled by the ranks of this process as
/// their transfers return (each rank its own, so threads never wait on
/// each other for long).
pub struct RankBins {
    origin: std::time::Instant,
    interval_s: f64,
    /// Per rank of this process: write and read bytes by bin.
    ranks: BTreeMap<u32, std::sync::Mutex<[ByBin; 2]>>,
    truncated: std::sync::atomic::AtomicBool,
}

impl RankBins {
    /// Bins from now on, for `ranks`.
    pub fn new(interval_s: f64, ranks: impl Iterator<Item = u32>) -> RankBins {
        RankBins {
            origin: std::time::Instant::now(),
            interval_s,
            ranks: ranks.map(|r| (r, Default::default())).collect(),
            truncated: Default::default(),
        }
    }

    pub fn origin(&self) -> std::time::Instant {
        self.origin
    }

    /// `rank` finished a transfer of `bytes` just now.
    pub fn note(&self, rank: u32, write: bool, bytes: u64) {
        let bin = (self.origin.elapsed().as_secs_f64() / self.interval_s) as u64;
        if bin >= BINS_MAX {
            self.truncated.store(true, std::sync::atomic::Ordering::Relaxed);
            return;
        }
        let Some(cell) = self.ranks.get(&rank) else { return };
        let mut bins = cell.lock().unwrap_or_else(|e| e.into_inner());
        let by_bin = &mut bins[usize::from(!write)];
        let c = by_bin.entry(bin).or_default();
        *c = c.saturating_add(bytes);
    }

    /// The ranks' groups, `rank_write_bytes` and `rank_read_bytes`, of
    /// `ranks` members.
    pub fn series(&self, source: &str, ranks: u32) -> TimeSeries {
        let mut s = TimeSeries::new(source, self.interval_s);
        s.truncated = self.truncated.load(std::sync::atomic::Ordering::Relaxed);
        s.group("rank_write_bytes", "bytes", "rank").head.members = ranks;
        s.group("rank_read_bytes", "bytes", "rank").head.members = ranks;
        for (&rank, cell) in &self.ranks {
            let bins = cell.lock().unwrap_or_else(|e| e.into_inner());
            for (name, by_bin) in [("rank_write_bytes", &bins[0]), ("rank_read_bytes", &bins[1])] {
                let g = s.group(name, "bytes", "rank");
                for (&bin, &c) in by_bin {
                    g.add(rank, bin, c);
                }
            }
        }
        s
    }
}

/// A series as a job's processes send it to each other: its counts that
/// are not zero only, as `[member, bin, count]` triples (a process's part
/// names few members: the file's dense lines would grow with the square
/// of the job).
#[derive(Serialize, Deserialize)]
struct Sparse {
    source: String,
    interval_s: f64,
    truncated: bool,
    groups: Vec<(GroupHead, Vec<[u64; 3]>)>,
}

/// A series as bytes, to gather a job's parts.
pub fn encode(series: &TimeSeries) -> Vec<u8> {
    let groups = series
        .groups
        .iter()
        .map(|g| {
            let counts =
                g.counts.iter().flat_map(|(&m, by_bin)| by_bin.iter().map(move |(&b, &c)| [u64::from(m), b, c]));
            (g.head.clone(), counts.collect())
        })
        .collect();
    let sparse =
        Sparse { source: series.source.clone(), interval_s: series.interval_s, truncated: series.truncated, groups };
    serde_json::to_vec(&sparse).expect("a series is plain data")
}

/// The inverse of [`encode`], checked as [`TimeSeries::read_jsonl`] checks a
/// file.
pub fn decode(bytes: &[u8]) -> Result<TimeSeries, String> {
    let sparse: Sparse = serde_json::from_slice(bytes).map_err(|e| format!("not a time series part ({e})"))?;
    if sparse.groups.len() > GROUPS_MAX || !(sparse.interval_s.is_finite() && sparse.interval_s > 0.0) {
        return Err(format!("{} groups at {} s a bin", sparse.groups.len(), sparse.interval_s));
    }
    let mut series = TimeSeries::new(&sparse.source, sparse.interval_s);
    series.truncated = sparse.truncated;
    for (head, counts) in sparse.groups {
        if head.members > MEMBERS_MAX {
            return Err(format!("group {} has {} members; at most {MEMBERS_MAX}", head.name, head.members));
        }
        let g = series.group(&head.name, &head.unit, &head.per);
        g.head.members = g.head.members.max(head.members);
        for [member, bin, count] in counts {
            let member = u32::try_from(member).map_err(|_| format!("member {member} of group {}", head.name))?;
            if !g.add(member, bin, count) {
                return Err(format!("member {member}, bin {bin} of group {} out of bounds", head.name));
            }
        }
    }
    Ok(series)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> TimeSeries {
        let mut s = TimeSeries::new("real", 0.5);
        let g = s.group("rank_write_bytes", "bytes", "rank");
        g.head.members = 3;
        g.add(0, 0, 100);
        g.add(2, 3, 7);
        s.group("client_enqueues", "events", "client").add(1, 1, 2);
        s
    }

    fn jsonl(s: &TimeSeries) -> Vec<u8> {
        let mut out = Vec::new();
        s.write_jsonl(&mut out).unwrap();
        out
    }

    fn read(bytes: &[u8]) -> Result<TimeSeries, String> {
        TimeSeries::read_jsonl(&mut std::io::BufReader::new(bytes))
    }

    #[test]
    fn a_series_reads_back_as_written() {
        let s = sample();
        let bytes = jsonl(&s);
        let text = String::from_utf8(bytes.clone()).unwrap();
        assert_eq!(text.lines().count(), 5, "the header and bins 0 to 3: {text}");
        assert!(text.lines().nth(2).unwrap().contains("\"rank_write_bytes\":[0,0,0]"), "{text}");
        let back = read(&bytes).unwrap();
        assert_eq!(back, s);
        assert_eq!(decode(&encode(&s)).unwrap(), s, "a job's parts travel sparse and come back whole");
        assert_eq!(back.get("rank_write_bytes").unwrap().total(), 107);
        assert_eq!(back.get("rank_write_bytes").unwrap().per_bin(4), vec![100, 0, 0, 7]);
    }

    #[test]
    fn a_damaged_file_names_its_line() {
        let text = String::from_utf8(jsonl(&sample())).unwrap();
        let cut: String = text.lines().take(3).map(|l| format!("{l}\n")).collect();
        let e = read(cut.as_bytes()).unwrap_err();
        assert!(e.contains("cut short"), "{e}");
        let wrong = text.replace("[0,0,0]", "[0,0]");
        let e = read(wrong.as_bytes()).unwrap_err();
        assert!(e.contains("line 3") && e.contains("members"), "{e}");
        let e = read(b"time_s,write_mib_s\n").unwrap_err();
        assert!(e.contains("line 1"), "{e}");
        assert!(decode(b"[1,2").is_err(), "a damaged part is an error");
    }

    #[test]
    fn parts_of_a_job_merge_by_name_and_member() {
        let mut a = sample();
        let mut b = TimeSeries::new("real", 0.5);
        b.group("rank_write_bytes", "bytes", "rank").add(1, 0, 5);
        a.merge(&b);
        assert_eq!(a.get("rank_write_bytes").unwrap().member(1, 4), vec![5, 0, 0, 0]);
        assert_eq!(a.get("rank_write_bytes").unwrap().head.members, 3);
    }
}
