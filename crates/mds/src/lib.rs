//! lanefs-mds (being written).
