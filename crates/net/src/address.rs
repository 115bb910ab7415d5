//! Where a lanefs server listens: `HOST:PORT` (TCP, with TLS) or
//! `unix:/PATH` (a Unix socket, where the server knows the user itself).

/// A server's address, as `lanefs up`, `lanefs mount` and `--mds` take it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Address {
    Tcp(String),
    Unix(std::path::PathBuf),
}

impl Address {
    /// `unix:/path` or `host:port`.
    pub fn parse(s: &str) -> Result<Address, String> {
        if let Some(path) = s.strip_prefix("unix:") {
            if path.is_empty() {
                return Err(format!("address {s:?}: a Unix socket address needs a path, e.g. unix:/tmp/lanefs.sock"));
            }
            return Ok(Address::Unix(path.into()));
        }
        match s.rsplit_once(':') {
            Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok() => Ok(Address::Tcp(s.to_string())),
            _ => Err(format!("address {s:?} is neither HOST:PORT (e.g. 127.0.0.1:9400) nor unix:/PATH")),
        }
    }
}

impl std::fmt::Display for Address {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Address::Tcp(a) => f.write_str(a),
            Address::Unix(p) => write!(f, "unix:{}", p.display()),
        }
    }
}
