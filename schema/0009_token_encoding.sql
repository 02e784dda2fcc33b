-- strata schema, version 9: the token encoding every stored count was made with (one row).
-- The first command that counts tokens sets it (`strata init`, an engine, an import); a later
-- one configured with another encoding is refused, so the counts of a database never mix.
CREATE TABLE token_encoding (
    id       INTEGER PRIMARY KEY CHECK (id = 1),
    encoding TEXT NOT NULL
);
