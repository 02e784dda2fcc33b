-- strata schema, version 5: summaries the quality gate refused, counted per summarizer and
-- reason, so `strata stats` shows them across processes (a compaction in `strata chat`, another
-- in `strata compact`). Counts only: the refused text is not kept.
CREATE TABLE summary_rejections (
    summarizer TEXT NOT NULL,
    reason     TEXT NOT NULL,
    count      INTEGER NOT NULL CHECK (count > 0),
    last_at    REAL NOT NULL,
    PRIMARY KEY (summarizer, reason)
) WITHOUT ROWID;
