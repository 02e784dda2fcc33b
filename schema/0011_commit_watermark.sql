-- strata schema, version 11: a commit watermark, so a lost WAL tail is noticed.
--
-- SQLite discards a WAL from its first bad frame on (a flipped byte, a truncation) and opens
-- what is left without a word: the commits in those frames vanish. Every write transaction of
-- the store bumps `commits` here, and after its commit writes `file_id commits` to a file
-- beside the database (`<db>-commits`), which the WAL's recovery cannot reach. A counter here
-- behind the copy there means the newest commits were lost. `file_id` tells this database
-- from another one later created at the same path.
CREATE TABLE commit_watermark (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    file_id TEXT NOT NULL,
    commits INTEGER NOT NULL
);
INSERT INTO commit_watermark(id, file_id, commits) VALUES (1, lower(hex(randomblob(16))), 0);
