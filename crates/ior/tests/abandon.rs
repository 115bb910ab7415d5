//! A rank that fails while the others wait for it in the backend's own
//! collective calls (MPI-IO's exchanges, with ranks as threads) releases
//! them: the run fails naming that rank and why, never hangs.

mod common;

use common::args;
use lanefs_ior::{Backend, IorError, IorParams, RankIo};
use lanefs_mpiio::{Communicator, ThreadComm};
use std::sync::Mutex;

/// Every transfer is a barrier of all ranks (a stand-in for a collective
/// write); rank 2 fails its create and never joins.
struct Collective {
    comms: Mutex<Vec<Option<ThreadComm>>>,
}

impl Backend for Collective {
    fn name(&self) -> &'static str {
        "COLL"
    }
    fn rank<'a>(&'a self, rank: u32, _p: &IorParams) -> Result<Box<dyn RankIo + 'a>, IorError> {
        let comm = self.comms.lock().unwrap()[rank as usize].take().unwrap();
        Ok(Box::new(CollRank { comm, rank }))
    }
    fn delete(&self, _path: &str) -> Result<(), IorError> {
        Ok(())
    }
}

struct CollRank {
    comm: ThreadComm,
    rank: u32,
}

impl RankIo for CollRank {
    fn create(&mut self, _path: &str, _p: &IorParams) -> Result<(), IorError> {
        if self.rank == 2 {
            return Err(IorError::Backend { backend: "COLL", message: "EACCES: the file cannot be created".into() });
        }
        Ok(())
    }
    fn open(&mut self, _path: &str, _p: &IorParams) -> Result<(), IorError> {
        Ok(())
    }
    fn write_at(&mut self, _offset: u64, _buf: &[u8]) -> Result<(), IorError> {
        self.comm.barrier().map_err(|e| IorError::Backend { backend: "COLL", message: e.to_string() })
    }
    fn read_at(&mut self, _offset: u64, _buf: &mut [u8]) -> Result<(), IorError> {
        Ok(())
    }
    fn fsync(&mut self) -> Result<(), IorError> {
        Ok(())
    }
    fn close(&mut self) -> Result<(), IorError> {
        Ok(())
    }
    fn abandon(&mut self, reason: &str) {
        self.comm.abort(reason);
    }
}

#[test]
fn a_rank_failing_outside_a_collective_releases_the_ranks_waiting_in_it() {
    let comms = ThreadComm::world(4, 4).into_iter().map(Some).collect();
    let backend = Collective { comms: Mutex::new(comms) };
    let params = lanefs_ior::parse_args(&args("-a COLL -w -b 64k -t 16k -N 4")).unwrap();
    let started = std::time::Instant::now();
    let e = lanefs_ior::run(&params, &backend, &mut Vec::new()).unwrap_err().to_string();
    // The lowest failing rank is reported; a rank released from the
    // collective says which rank left it and why.
    assert!(e.contains("rank 2: COLL: EACCES"), "{e}");
    assert!(started.elapsed() < std::time::Duration::from_secs(10), "an error, not a hang");
}
