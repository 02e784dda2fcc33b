#!/usr/bin/env bash
# Writes crates/store/tests/fixtures/schema/vN.sql for every earlier schema version N, from git
# history: the migration files of `schema/` as they stood at the last commit where
# `000N_*.sql` was the newest file, concatenated in order, then `PRAGMA user_version = N` (which
# the migration runner, not the files, has always set). A version that was never the newest
# (the first commit brought 0001 and 0002 together) takes its files from the first commit that
# holds it. Running a fixture in an empty database
# therefore builds exactly the file that version of strata created, its application id
# included (schema 3 set it). The store's test `every_earlier_schema_upgrades_to_schema_current_sql`
# upgrades each one with today's `Store::open`.
#
# Run it after adding a migration (the new previous version needs its fixture); it rewrites
# every fixture, so `git diff` shows whether history and the fixtures still agree. The version
# being added must be committed first: the newest version is the current schema
# (`schema/current.sql`), not a fixture.
set -euo pipefail

root=$(git rev-parse --show-toplevel)
cd "$root"
out=crates/store/tests/fixtures/schema
mkdir -p "$out"

current=$(git ls-tree --name-only HEAD schema/ | grep -c '^schema/[0-9]\{4\}_.*\.sql$')

migrations() { git ls-tree --name-only "$1" schema/ | grep '^schema/[0-9]\{4\}_.*\.sql$' | sort; }
number() { echo $((10#$(basename "$1" | cut -c1-4))); }

# Per version, the last commit (oldest first, so later ones overwrite) at which it was the
# newest, else the first commit that holds it.
declare -A last_commit first_commit
for commit in $(git log --reverse --format=%H HEAD -- schema/); do
    for file in $(migrations "$commit"); do
        version=$(number "$file")
        first_commit[$version]=${first_commit[$version]:-$commit}
    done
    last_commit[$(number "$(migrations "$commit" | tail -n 1)")]=$commit
done

rm -f "$out"/v*.sql
for ((version = 1; version < current; version++)); do
    commit=${last_commit[$version]:-${first_commit[$version]:?no commit holds schema version $version}}
    fixture="$out/v$version.sql"
    {
        echo "-- Schema version $version as strata $(git rev-parse --short=12 "$commit") created it:"
        echo "-- its own migration files, concatenated. Written by scripts/snapshot-schema-history.sh."
        for file in $(migrations "$commit"); do
            [ "$(number "$file")" -le "$version" ] || continue
            echo
            echo "-- $file"
            git show "$commit:$file"
        done
        echo
        echo "PRAGMA user_version = $version;"
    } >"$fixture"
    echo "$fixture <- $(git rev-parse --short=12 "$commit")"
done
