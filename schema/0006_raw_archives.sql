-- strata schema, version 6: raw archives found without reading the forest.
--
-- A compaction call with nothing to fold looks for a `raw-archive` node to summarize again.
-- Reading every node of the session for that made `prepare_context` grow with the history
-- (45 ms at 100,000 messages against 13 ms at 10,000); this index holds only raw archives,
-- which are rare, so the lookup reads nothing when there are none.
CREATE INDEX summary_nodes_raw_archive ON summary_nodes(session_id, level, first_seq)
    WHERE summarizer = 'raw-archive';
