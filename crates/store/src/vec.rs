//! Registration of the SQLite extensions strata adds to every connection, sqlite-vec and one
//! FTS5 auxiliary function (`strata_terms`): the one place in strata with `unsafe`.

use std::ffi::{c_char, c_int, c_void};
use std::ptr;
use std::sync::Once;

use rusqlite::ffi;

/// Makes `vec0`, the `vec_*` functions and `strata_terms` available on every connection opened
/// afterwards.
///
/// SQLite keeps a process-wide list of auto extensions; registering twice would run the
/// initializers twice per connection, so this runs exactly once.
pub(crate) fn register() {
    static REGISTER: Once = Once::new();
    REGISTER.call_once(|| {
        // SAFETY: `sqlite3_vec_init` and `register_terms` are extension entry points with the
        // signature SQLite expects of an auto extension (db, error message out-pointer, API
        // routines); the transmutes only erase that signature into the `void(*)(void)` type the
        // registration function takes, as the SQLite documentation prescribes. Both functions
        // are `'static`.
        #[allow(unsafe_code)]
        unsafe {
            ffi::sqlite3_auto_extension(Some(std::mem::transmute::<*const (), EntryPoint>(
                sqlite_vec::sqlite3_vec_init as *const (),
            )));
            ffi::sqlite3_auto_extension(Some(std::mem::transmute::<*const (), EntryPoint>(
                register_terms as *const (),
            )));
        }
    });
}

type EntryPoint =
    unsafe extern "C" fn(*mut ffi::sqlite3, *mut *mut c_char, *const ffi::sqlite3_api_routines) -> c_int;

/// Encodes a vector in the little-endian f32 layout `vec0` reads.
pub(crate) fn to_blob(vector: &[f32]) -> Vec<u8> {
    vector.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// Registers `strata_terms` with the connection's FTS5 (an auto extension, run by SQLite on
/// every new connection after its built-in FTS5 is in place).
///
/// `strata_terms(table)` is the current row as bm25 sees it: its length in tokens and how
/// many times it holds each phrase of the query, as a blob of little-endian `u32`s (the length,
/// then one count per phrase). The score itself is computed by the store's one bm25
/// (`search::bm25`), from the statistics of the persona searched: FTS5's own `bm25()` would
/// weigh each word by every persona's rows and walk each phrase's whole doclist on every query
/// (at 1,000,000 messages and four common words about 45 ms of a 100 ms `memory_search`).
///
/// # Safety
///
/// Called by SQLite with a valid open connection.
#[allow(unsafe_code)]
unsafe extern "C" fn register_terms(
    db: *mut ffi::sqlite3,
    _error: *mut *mut c_char,
    _api: *const ffi::sqlite3_api_routines,
) -> c_int {
    // SAFETY: `db` is the connection being opened, valid for these calls.
    unsafe {
        if add_terms(db) != ffi::SQLITE_OK {
            // A file that is not a database fails here already (and a busy one might). The open
            // must go on, so that the pragmas judge the file and report it as such
            // (`not_a_database_is_reported`): the failure is cleared (an empty `sqlite3_exec`
            // resets the connection's error code), and a ranked search on this connection adds
            // the function when it finds it missing ([`ensure_terms`]).
            ffi::sqlite3_exec(db, c"".as_ptr(), None, ptr::null_mut(), ptr::null_mut());
        }
        ffi::SQLITE_OK
    }
}

/// Adds `strata_terms` to a connection that lacks it (its registration at open failed; see
/// [`register_terms`]).
pub(crate) fn ensure_terms(conn: &rusqlite::Connection) -> rusqlite::Result<()> {
    // SAFETY: the handle is the open connection `conn` owns, used on this thread only for
    // the duration of the call.
    #[allow(unsafe_code)]
    let rc = unsafe { add_terms(conn.handle()) };
    match rc {
        ffi::SQLITE_OK => Ok(()),
        rc => {
            Err(rusqlite::Error::SqliteFailure(ffi::Error::new(rc), Some("adding strata_terms".to_owned())))
        }
    }
}

/// Registers `strata_terms` with the FTS5 of `db`; an SQLite result code.
///
/// # Safety
///
/// `db` is a valid open connection.
#[allow(unsafe_code)]
unsafe fn add_terms(db: *mut ffi::sqlite3) -> c_int {
    // SAFETY: `db` is valid (the function's contract). The fts5_api pointer is obtained as
    // the FTS5 documentation prescribes (`SELECT fts5(?1)` with a pointer of type
    // "fts5_api_ptr" bound), the statement is finalized before the pointer is used, and the
    // pointer stays valid for the connection's lifetime. The function is registered with no
    // user data and no destructor.
    unsafe {
        let mut statement: *mut ffi::sqlite3_stmt = ptr::null_mut();
        let rc =
            ffi::sqlite3_prepare_v2(db, c"SELECT fts5(?1)".as_ptr(), -1, &mut statement, ptr::null_mut());
        if rc != ffi::SQLITE_OK {
            ffi::sqlite3_finalize(statement);
            return rc;
        }
        let mut fts5: *mut ffi::fts5_api = ptr::null_mut();
        ffi::sqlite3_bind_pointer(
            statement,
            1,
            (&raw mut fts5).cast::<c_void>(),
            c"fts5_api_ptr".as_ptr(),
            None,
        );
        ffi::sqlite3_step(statement);
        let rc = ffi::sqlite3_finalize(statement);
        if rc != ffi::SQLITE_OK {
            return rc;
        }
        let Some(create) = fts5.as_ref().and_then(|api| api.xCreateFunction) else {
            return ffi::SQLITE_ERROR;
        };
        create(fts5, c"strata_terms".as_ptr(), ptr::null_mut(), Some(strata_terms), None)
    }
}

/// The FTS5 auxiliary function `strata_terms` (see [`register_terms`]).
///
/// # Safety
///
/// Called by FTS5 with its API, the current query's context and the SQL function's context.
#[allow(unsafe_code)]
unsafe extern "C" fn strata_terms(
    api: *const ffi::Fts5ExtensionApi,
    fts: *mut ffi::Fts5Context,
    context: *mut ffi::sqlite3_context,
    _count: c_int,
    _values: *mut *mut ffi::sqlite3_value,
) {
    // SAFETY: the pointers are FTS5's and SQLite's for the duration of this call; the blob is
    // copied by SQLite (`SQLITE_TRANSIENT`) before `bytes` is dropped.
    unsafe {
        match terms(&*api, fts) {
            Ok(terms) => {
                let bytes: Vec<u8> = terms.iter().flat_map(|n| n.to_le_bytes()).collect();
                ffi::sqlite3_result_blob(
                    context,
                    bytes.as_ptr().cast::<c_void>(),
                    bytes.len() as c_int,
                    ffi::SQLITE_TRANSIENT(),
                );
            }
            Err(rc) => ffi::sqlite3_result_error_code(context, rc),
        }
    }
}

/// The current row's length in tokens, then how many times it holds each phrase of the query,
/// or an SQLite error code.
///
/// # Safety
///
/// As [`strata_terms`].
#[allow(unsafe_code)]
unsafe fn terms(api: &ffi::Fts5ExtensionApi, fts: *mut ffi::Fts5Context) -> Result<Vec<u32>, c_int> {
    let missing = ffi::SQLITE_MISUSE;
    let check = |rc: c_int| if rc == ffi::SQLITE_OK { Ok(()) } else { Err(rc) };
    // SAFETY: as the caller's contract; every FTS5 routine is called with the context it gave.
    unsafe {
        let phrases = api.xPhraseCount.ok_or(missing)?(fts).max(0) as usize;
        let mut terms = vec![0u32; 1 + phrases];
        let mut length = 0;
        check(api.xColumnSize.ok_or(missing)?(fts, -1, &mut length))?;
        terms[0] = length.max(0) as u32;
        let mut instances = 0;
        check(api.xInstCount.ok_or(missing)?(fts, &mut instances))?;
        let inst = api.xInst.ok_or(missing)?;
        for i in 0..instances {
            let (mut phrase, mut column, mut offset) = (0, 0, 0);
            check(inst(fts, i, &mut phrase, &mut column, &mut offset))?;
            if let Some(count) = usize::try_from(phrase).ok().and_then(|phrase| terms.get_mut(1 + phrase)) {
                *count += 1;
            }
        }
        Ok(terms)
    }
}

/// The hamming distance of each bit vector in `vectors` (one after another, `query.len()`
/// bytes each) to `query`, into `out` (cleared first): the first pass of a quantized scan, a
/// million of them per search at 1,000,000 vectors.
///
/// The build targets the x86-64 baseline, which has no popcount instruction: `count_ones`
/// there is a dozen instructions a word. Where the CPU has the instruction (every x86-64
/// server of the last decade), the same loop is compiled with it and chosen at run time.
pub(crate) fn hamming_each(vectors: &[u8], query: &[u8], out: &mut Vec<u32>) {
    out.clear();
    if query.is_empty() {
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("popcnt") {
        // SAFETY: the CPU has the popcnt instruction (checked just above), the one feature the
        // function is compiled for beyond the baseline.
        #[allow(unsafe_code)]
        unsafe {
            hamming_each_popcnt(vectors, query, out)
        };
        return;
    }
    hamming_each_portable(vectors, query, out);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "popcnt")]
fn hamming_each_popcnt(vectors: &[u8], query: &[u8], out: &mut Vec<u32>) {
    hamming_each_portable(vectors, query, out);
}

/// The loop of [`hamming_each`], written with plain indexing: iterator adapters are compiled
/// as functions of their own, outside the caller's target features, and would count bits
/// without the popcount instruction.
#[inline(always)]
fn hamming_each_portable(vectors: &[u8], query: &[u8], out: &mut Vec<u32>) {
    let bytes = query.len();
    let words = bytes / 8;
    let count = vectors.len() / bytes;
    out.reserve(count);
    for vector in 0..count {
        let bits = &vectors[vector * bytes..(vector + 1) * bytes];
        let mut differing = 0;
        let mut word = 0;
        while word < words {
            let at = word * 8;
            let mut a = [0u8; 8];
            let mut b = [0u8; 8];
            a.copy_from_slice(&bits[at..at + 8]);
            b.copy_from_slice(&query[at..at + 8]);
            differing += (u64::from_ne_bytes(a) ^ u64::from_ne_bytes(b)).count_ones();
            word += 1;
        }
        let mut byte = words * 8;
        while byte < bytes {
            differing += (bits[byte] ^ query[byte]).count_ones();
            byte += 1;
        }
        out.push(differing);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hamming_each_counts_the_differing_bits_of_every_vector() {
        let query = [0b1010_1010u8; 12];
        let mut vectors = Vec::new();
        for flipped in [0usize, 1, 7, 96] {
            let mut bits = query;
            for bit in 0..flipped {
                bits[bit / 8] ^= 1 << (bit % 8);
            }
            vectors.extend_from_slice(&bits);
        }
        let mut out = vec![99];
        hamming_each(&vectors, &query, &mut out);
        assert_eq!(out, [0, 1, 7, 96]);
        let mut portable = Vec::new();
        hamming_each_portable(&vectors, &query, &mut portable);
        assert_eq!(portable, out);
    }
}
