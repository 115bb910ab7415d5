//! Proof that an OST granted a lock to a client, so that after a restart
//! it takes back only the locks each client really held.
//!
//! An OST keeps its locks in memory: after a restart, the clients it knew
//! replay theirs ([`crate::msg::ToOst::ReplayLock`]), and the first replay
//! of some bytes wins. Were a replay taken on the client's word, a client
//! the OST knew could replay a handle and extent it never held, before
//! their holder did, and take them (the holder would lose its lock and
//! what its cache held under it). So every grant comes with a
//! [`LockProof`]: SipHash-2-4, under a key only the OST knows
//! ([`LockKey`], kept in its record across restarts), of the client, the
//! handle, the object, the mode and the granted extent. A replay is taken
//! only with the proof of exactly that lock for that client.
//!
//! The same key proves the changes an OST acknowledges but has not yet
//! committed ([`ChangeProof`], of the client, the transaction number, the
//! object, and the place and length of a write or the size of a punch):
//! a client replays them after a restart with their transaction numbers,
//! and the first replay of a number wins, so a number taken on a client's
//! word would let a client the OST knew replay another's number before its
//! holder did (the holder's acknowledged write then lost without a word),
//! or replay changes the OST never acknowledged.
//!
//! A handle names the life of the OST that granted it (its high bits),
//! so one key serves every life. Lustre trusts its clients' replays (it
//! authenticates the node, with Kerberos or SSK where set up); lanefs
//! checks each lock, as its MDS checks each replayed file lock's seal.

use super::{LockMode, LockRequest};
use crate::extent::Extent;
use crate::units::{ClientId, LockHandle, ObjectId, Transno};
use serde::{Deserialize, Serialize};
use siphasher::sip::SipHasher24;
use std::hash::Hasher;

/// The OST's key for its proofs: 128 random bits, private to the OST.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockKey(pub [u64; 2]);

/// What a grant carries and a replay must give back.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct LockProof(pub u64);

/// What the answer to a write or a punch carries with its transaction
/// number, and the change's replay must give back.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ChangeProof(pub u64);

/// An acknowledged change, as its proof names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Changed {
    /// `len` bytes written at `offset`.
    Write { offset: u64, len: u64 },
    /// The object truncated, a hole punched or space reserved.
    Punch { cut: crate::cut::Cut },
}

impl LockKey {
    /// The proof that `client` holds lock `handle` of `object` in `mode`
    /// over `extent`.
    pub fn prove(
        &self,
        client: ClientId,
        handle: LockHandle,
        object: ObjectId,
        mode: LockMode,
        extent: Extent,
    ) -> LockProof {
        let mut h = SipHasher24::new_with_keys(self.0[0], self.0[1]);
        let (tag, group) = match mode {
            LockMode::ProtectedRead => (1, 0),
            LockMode::ProtectedWrite => (2, 0),
            LockMode::Group(gid) => (3, gid.0),
        };
        for word in [u64::from(client.0), handle.0, object.0, tag, group, extent.start, extent.end] {
            h.write_u64(word);
        }
        LockProof(h.finish())
    }

    /// Whether `proof` is this key's for the lock a replay names.
    pub fn proves(
        &self,
        proof: LockProof,
        client: ClientId,
        handle: LockHandle,
        object: ObjectId,
        request: &LockRequest,
        extent: Extent,
    ) -> bool {
        self.prove(client, handle, object, request.mode, extent) == proof
    }

    /// The proof that this OST acknowledged `change` of `object` to
    /// `client` as transaction `transno`.
    pub fn prove_change(&self, client: ClientId, transno: Transno, object: ObjectId, change: Changed) -> ChangeProof {
        let mut h = SipHasher24::new_with_keys(self.0[0], self.0[1]);
        use crate::cut::Cut;
        let (tag, a, b) = match change {
            Changed::Write { offset, len } => (4, offset, len),
            Changed::Punch { cut: Cut::Size(size) } => (5, size, 0),
            Changed::Punch { cut: Cut::Hole { offset, len } } => (6, offset, len),
            Changed::Punch { cut: Cut::Reserve { offset, len, keep_size } } => (7 + u64::from(keep_size), offset, len),
        };
        for word in [tag, u64::from(client.0), transno.0, object.0, a, b] {
            h.write_u64(word);
        }
        ChangeProof(h.finish())
    }

    /// Whether `proof` is this key's for the change a replay names.
    pub fn proves_change(
        &self,
        proof: ChangeProof,
        client: ClientId,
        transno: Transno,
        object: ObjectId,
        change: Changed,
    ) -> bool {
        self.prove_change(client, transno, object, change) == proof
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cut::Cut;
    use crate::ldlm::GroupId;

    #[test]
    fn a_proof_names_one_lock_of_one_client_under_one_key() {
        let key = LockKey([7, 9]);
        let extent = Extent::new(0, 4095);
        let proof = key.prove(ClientId(1), LockHandle(5), ObjectId(3), LockMode::ProtectedWrite, extent);
        let request = LockRequest::new(LockMode::ProtectedWrite, extent);
        assert!(key.proves(proof, ClientId(1), LockHandle(5), ObjectId(3), &request, extent));
        assert!(!key.proves(proof, ClientId(2), LockHandle(5), ObjectId(3), &request, extent), "another client");
        assert!(!key.proves(proof, ClientId(1), LockHandle(6), ObjectId(3), &request, extent), "another handle");
        assert!(!key.proves(proof, ClientId(1), LockHandle(5), ObjectId(4), &request, extent), "another object");
        assert!(!key.proves(proof, ClientId(1), LockHandle(5), ObjectId(3), &request, Extent::new(0, 8191)), "wider");
        let read = LockRequest::new(LockMode::ProtectedRead, extent);
        assert!(!key.proves(proof, ClientId(1), LockHandle(5), ObjectId(3), &read, extent), "another mode");
        let group = |g| LockRequest::new(LockMode::Group(GroupId(g)), extent);
        let g1 = key.prove(ClientId(1), LockHandle(5), ObjectId(3), LockMode::Group(GroupId(1)), extent);
        assert!(!key.proves(g1, ClientId(1), LockHandle(5), ObjectId(3), &group(2), extent), "another gid");
        assert!(!LockKey([7, 10]).proves(proof, ClientId(1), LockHandle(5), ObjectId(3), &request, extent), "key");
    }

    #[test]
    fn a_change_proof_names_one_change_of_one_client() {
        let key = LockKey([7, 9]);
        let write = Changed::Write { offset: 4096, len: 8192 };
        let proof = key.prove_change(ClientId(1), Transno(12), ObjectId(3), write);
        assert!(key.proves_change(proof, ClientId(1), Transno(12), ObjectId(3), write));
        assert!(!key.proves_change(proof, ClientId(2), Transno(12), ObjectId(3), write), "another client");
        assert!(!key.proves_change(proof, ClientId(1), Transno(13), ObjectId(3), write), "another number");
        assert!(!key.proves_change(proof, ClientId(1), Transno(12), ObjectId(4), write), "another object");
        let elsewhere = Changed::Write { offset: 0, len: 8192 };
        assert!(!key.proves_change(proof, ClientId(1), Transno(12), ObjectId(3), elsewhere), "another place");
        let longer = Changed::Write { offset: 4096, len: 16384 };
        assert!(!key.proves_change(proof, ClientId(1), Transno(12), ObjectId(3), longer), "longer");
        let punch = Changed::Punch { cut: Cut::Size(4096) };
        assert!(!key.proves_change(proof, ClientId(1), Transno(12), ObjectId(3), punch), "a punch");
        // Each kind of cut proves itself only.
        let cuts = [
            Cut::Size(4096),
            Cut::Hole { offset: 4096, len: 8192 },
            Cut::Reserve { offset: 4096, len: 8192, keep_size: false },
            Cut::Reserve { offset: 4096, len: 8192, keep_size: true },
        ];
        for (i, a) in cuts.iter().enumerate() {
            let proof = key.prove_change(ClientId(1), Transno(12), ObjectId(3), Changed::Punch { cut: *a });
            for (j, b) in cuts.iter().enumerate() {
                let proved =
                    key.proves_change(proof, ClientId(1), Transno(12), ObjectId(3), Changed::Punch { cut: *b });
                assert_eq!(proved, i == j, "{a:?} against {b:?}");
            }
        }
        assert!(!LockKey([7, 10]).proves_change(proof, ClientId(1), Transno(12), ObjectId(3), write), "key");
    }
}
