//! lanefs-net (being written).
