//! lanefs-ior (being written).
