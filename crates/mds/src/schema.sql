-- Counters: 'next_fid' (never reused), 'round_robin' (next starting OST,
-- modulo the OST count), 'ost_count' (only grows).
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value INTEGER NOT NULL CHECK (value >= 0)
) WITHOUT ROWID;

-- One row per OST: the next object id the MDS hands out on it (ids start at
-- 1 and are never reused, even after the object is destroyed), and the
-- highest id the OST has created in advance, as it last reported (its
-- LAST_ID). Ids next_object..=precreated are the OST's pool: objects that
-- exist, empty, and belong to no file yet.
CREATE TABLE ost_counters (
    ost         INTEGER PRIMARY KEY CHECK (ost >= 0),
    next_object INTEGER NOT NULL CHECK (next_object >= 1),
    precreated  INTEGER NOT NULL,
    CHECK (precreated >= next_object - 1)
);

-- Files, directories and symbolic links, with owner, group and permissions
-- (mode & 07777) and three times (nanoseconds since the epoch: last
-- modification, last access as set by utimensat, last change of the inode).
-- Files have a stripe size and rows in `objects`; symbolic links their
-- target; devices their number (`rdev`, 0 for every other kind); named
-- pipes and sockets nothing more; directories may have a default striping for new files below
-- them, each field NULL when inherited (count -1 = all OSTs, start -1 = MDS
-- chooses). A file's `pool` is the OST pool it was created in, as named
-- then (the pool may since have gone); a directory's `default_pool` the
-- pool of its default striping.
CREATE TABLE inodes (
    fid           INTEGER PRIMARY KEY,
    -- 1 file, 2 directory, 3 symbolic link, 4 named pipe, 5 socket, 6 character device, 7 block device
    kind          INTEGER NOT NULL CHECK (kind BETWEEN 1 AND 7),
    mtime_ns      INTEGER NOT NULL,
    atime_ns      INTEGER NOT NULL,
    ctime_ns      INTEGER NOT NULL,
    uid           INTEGER NOT NULL CHECK (uid BETWEEN 0 AND 4294967295),
    gid           INTEGER NOT NULL CHECK (gid BETWEEN 0 AND 4294967295),
    permissions   INTEGER NOT NULL CHECK (permissions BETWEEN 0 AND 4095),
    stripe_size   INTEGER CHECK ((kind = 1) = (stripe_size IS NOT NULL)),
    target        TEXT CHECK ((kind = 3) = (target IS NOT NULL)),
    default_count INTEGER CHECK (default_count IS NULL OR (kind = 2 AND default_count != 0
                                 AND default_count >= (CASE default_overstripe WHEN 1 THEN -32 ELSE -1 END))),
    default_size  INTEGER CHECK (default_size IS NULL OR (kind = 2 AND default_size > 0)),
    default_start INTEGER CHECK (default_start IS NULL OR (kind = 2 AND default_start >= -1)),
    pool          TEXT CHECK (pool IS NULL OR (kind = 1 AND length(pool) BETWEEN 1 AND 15)),
    default_pool  TEXT CHECK (default_pool IS NULL OR (kind = 2 AND length(default_pool) BETWEEN 1 AND 15)),
    rdev          INTEGER NOT NULL DEFAULT 0 CHECK (rdev = 0 OR kind IN (6, 7)),
    -- 1: the default count overstripes (lfs setstripe -C, where -N is N stripes per OST)
    default_overstripe INTEGER NOT NULL DEFAULT 0
                  CHECK (default_overstripe = 0 OR (default_overstripe = 1 AND default_count IS NOT NULL))
);

-- The namespace: the root has no entry, a directory exactly one, a file or
-- a symbolic link one per hard link (its link count).
CREATE TABLE dentries (
    parent INTEGER NOT NULL REFERENCES inodes (fid),
    name   TEXT NOT NULL CHECK (length(name) > 0),
    fid    INTEGER NOT NULL REFERENCES inodes (fid),
    PRIMARY KEY (parent, name)
) WITHOUT ROWID;

CREATE INDEX dentries_by_fid ON dentries (fid);

-- A file's objects, one per stripe; an overstriped file has several on
-- one OST.
CREATE TABLE objects (
    fid    INTEGER NOT NULL REFERENCES inodes (fid),
    stripe INTEGER NOT NULL CHECK (stripe >= 0),
    ost    INTEGER NOT NULL REFERENCES ost_counters (ost),
    object INTEGER NOT NULL CHECK (object >= 1),
    PRIMARY KEY (fid, stripe),
    UNIQUE (ost, object)
) WITHOUT ROWID;

-- The components of a composite (PFL) file's layout, in file order: each
-- holds the bytes below its end (NULL: to the end of the file, the last)
-- on its own `stripes` stripes of `objects`, which follow the previous
-- component's, with its stripe size and the OST pool its objects came
-- from. A plain file has none: its stripe size is the inode's.
CREATE TABLE components (
    fid         INTEGER NOT NULL REFERENCES inodes (fid),
    component   INTEGER NOT NULL CHECK (component >= 0),
    end_offset  INTEGER CHECK (end_offset IS NULL OR end_offset > 0),
    stripe_size INTEGER NOT NULL CHECK (stripe_size > 0),
    stripes     INTEGER NOT NULL CHECK (stripes > 0),
    pool        TEXT CHECK (pool IS NULL OR length(pool) BETWEEN 1 AND 15),
    PRIMARY KEY (fid, component)
) WITHOUT ROWID;

-- A directory's default composite (PFL) layout for new files below it, in
-- file order: each component's end (NULL: to the end of the file, the
-- last) and striping, a field NULL when inherited as a plain default's
-- is. A directory has these or a plain default (`inodes.default_*`), not
-- both.
CREATE TABLE default_components (
    fid         INTEGER NOT NULL REFERENCES inodes (fid),
    component   INTEGER NOT NULL CHECK (component >= 0),
    end_offset  INTEGER CHECK (end_offset IS NULL OR end_offset > 0),
    count       INTEGER CHECK (count IS NULL OR count != 0),
    overstripe  INTEGER NOT NULL DEFAULT 0 CHECK (overstripe IN (0, 1)),
    stripe_size INTEGER CHECK (stripe_size IS NULL OR stripe_size > 0),
    start_ost   INTEGER CHECK (start_ost IS NULL OR start_ost >= -1),
    pool        TEXT CHECK (pool IS NULL OR length(pool) BETWEEN 1 AND 15),
    PRIMARY KEY (fid, component)
) WITHOUT ROWID;

-- Files being restriped (lanefs migrate): each file's volatile inode, a
-- file with no name holding the new layout's objects until the copy into
-- them is done and the layouts are swapped (see the migrate module).
CREATE TABLE migrations (
    fid      INTEGER PRIMARY KEY REFERENCES inodes (fid),
    volatile INTEGER NOT NULL UNIQUE REFERENCES inodes (fid),
    CHECK (volatile != fid)
);

-- Objects of removed files, to destroy on their OSTs (Lustre's unlink
-- llog): written in the transaction that removes the file, deleted when the
-- OST has acknowledged the destroy. `fid` is the removed file's (NULL for
-- objects queued by schema version 2): its objects wait while a client
-- keeps it open.
CREATE TABLE destroy_queue (
    ost    INTEGER NOT NULL REFERENCES ost_counters (ost),
    object INTEGER NOT NULL CHECK (object >= 1),
    fid    INTEGER,
    PRIMARY KEY (ost, object)
) WITHOUT ROWID;

-- OST pools (Lustre's, defined here rather than in an MGS's log): a name
-- of 1 to 15 characters, and the next round-robin position among its
-- members for files whose starting OST the MDS chooses.
CREATE TABLE ost_pools (
    name        TEXT PRIMARY KEY CHECK (length(name) BETWEEN 1 AND 15),
    round_robin INTEGER NOT NULL CHECK (round_robin >= 0)
) WITHOUT ROWID;

-- The OSTs of each pool.
CREATE TABLE ost_pool_members (
    pool TEXT NOT NULL REFERENCES ost_pools (name),
    ost  INTEGER NOT NULL REFERENCES ost_counters (ost),
    PRIMARY KEY (pool, ost)
) WITHOUT ROWID;

-- Extended attributes (see the xattr module for the namespaces and
-- bounds): removed with their inode.
CREATE TABLE xattrs (
    fid   INTEGER NOT NULL REFERENCES inodes (fid),
    name  TEXT NOT NULL CHECK (length(name) BETWEEN 1 AND 255),
    value BLOB NOT NULL CHECK (length(value) <= 65536),
    PRIMARY KEY (fid, name)
) WITHOUT ROWID;
