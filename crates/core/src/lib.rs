//! lanefs-core: the protocol of a striped parallel file system, with no I/O.
pub mod client;
pub mod extent;
pub mod harness;
pub mod layout;
pub mod ldlm;
pub mod msg;
pub mod ost;
pub mod store;
pub mod units;

pub use extent::{Extent, EOF};
pub use units::*;
