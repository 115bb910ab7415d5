-- Schema version 6's inodes and objects tables (one object per file on each OST).
CREATE TABLE inodes (
    fid           INTEGER PRIMARY KEY,
    kind          INTEGER NOT NULL CHECK (kind BETWEEN 1 AND 7),
    mtime_ns      INTEGER NOT NULL,
    atime_ns      INTEGER NOT NULL,
    ctime_ns      INTEGER NOT NULL,
    uid           INTEGER NOT NULL CHECK (uid BETWEEN 0 AND 4294967295),
    gid           INTEGER NOT NULL CHECK (gid BETWEEN 0 AND 4294967295),
    permissions   INTEGER NOT NULL CHECK (permissions BETWEEN 0 AND 4095),
    stripe_size   INTEGER CHECK ((kind = 1) = (stripe_size IS NOT NULL)),
    target        TEXT CHECK ((kind = 3) = (target IS NOT NULL)),
    default_count INTEGER CHECK (default_count IS NULL OR (kind = 2 AND default_count >= -1 AND default_count != 0)),
    default_size  INTEGER CHECK (default_size IS NULL OR (kind = 2 AND default_size > 0)),
    default_start INTEGER CHECK (default_start IS NULL OR (kind = 2 AND default_start >= -1)),
    pool          TEXT CHECK (pool IS NULL OR (kind = 1 AND length(pool) BETWEEN 1 AND 15)),
    default_pool  TEXT CHECK (default_pool IS NULL OR (kind = 2 AND length(default_pool) BETWEEN 1 AND 15)),
    rdev          INTEGER NOT NULL DEFAULT 0 CHECK (rdev = 0 OR kind IN (6, 7))
);

CREATE TABLE objects (
    fid    INTEGER NOT NULL REFERENCES inodes (fid),
    stripe INTEGER NOT NULL CHECK (stripe >= 0),
    ost    INTEGER NOT NULL REFERENCES ost_counters (ost),
    object INTEGER NOT NULL CHECK (object >= 1),
    PRIMARY KEY (fid, stripe),
    UNIQUE (fid, ost),
    UNIQUE (ost, object)
) WITHOUT ROWID;
