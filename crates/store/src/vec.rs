//! Registration of the SQLite extensions strata adds to every connection, sqlite-vec and one
//! FTS5 ranking function (`strata_bm25`): the one place in strata with `unsafe`.

use std::ffi::{c_char, c_int, c_void};
use std::ptr;
use std::sync::Once;

use rusqlite::ffi;

/// Makes `vec0`, the `vec_*` functions and `strata_bm25` available on every connection opened
/// afterwards.
///
/// SQLite keeps a process-wide list of auto extensions; registering twice would run the
/// initializers twice per connection, so this runs exactly once.
pub(crate) fn register() {
    static REGISTER: Once = Once::new();
    REGISTER.call_once(|| {
        // SAFETY: `sqlite3_vec_init` and `register_bm25` are extension entry points with the
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
                register_bm25 as *const (),
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

/// Registers `strata_bm25` with the connection's FTS5 (an auto extension, run by SQLite on
/// every new connection after its built-in FTS5 is in place).
///
/// `strata_bm25(table, n0, n1, ...)` is FTS5's `bm25(table)` (the same formula, k1 = 1.2,
/// b = 0.75, every column weighted 1, lower is better) except that the caller may give the
/// number of rows holding each phrase of the query (`n0` for the first phrase, and so on):
/// FTS5's own `bm25()` counts them by walking every phrase's whole doclist on each query, which
/// at 1,000,000 messages and four common words was about 45 ms of a 100 ms `memory_search`.
/// A phrase whose count is missing or NULL is counted as `bm25()` counts it, so with exact
/// counts the two functions return the same scores (a test checks this).
///
/// # Safety
///
/// Called by SQLite with a valid open connection.
#[allow(unsafe_code)]
unsafe extern "C" fn register_bm25(
    db: *mut ffi::sqlite3,
    _error: *mut *mut c_char,
    _api: *const ffi::sqlite3_api_routines,
) -> c_int {
    // SAFETY: `db` is the connection being opened, valid for these calls.
    unsafe {
        if add_bm25(db) != ffi::SQLITE_OK {
            // A file that is not a database fails here already (and a busy one might). The open
            // must go on, so that the pragmas judge the file and report it as such
            // (`not_a_database_is_reported`): the failure is cleared (an empty `sqlite3_exec`
            // resets the connection's error code), and a ranked search on this connection adds
            // the function when it finds it missing ([`ensure_bm25`]).
            ffi::sqlite3_exec(db, c"".as_ptr(), None, ptr::null_mut(), ptr::null_mut());
        }
        ffi::SQLITE_OK
    }
}

/// Adds `strata_bm25` to a connection that lacks it (its registration at open failed; see
/// [`register_bm25`]).
pub(crate) fn ensure_bm25(conn: &rusqlite::Connection) -> rusqlite::Result<()> {
    // SAFETY: the handle is the open connection `conn` owns, used on this thread only for
    // the duration of the call.
    #[allow(unsafe_code)]
    let rc = unsafe { add_bm25(conn.handle()) };
    match rc {
        ffi::SQLITE_OK => Ok(()),
        rc => Err(rusqlite::Error::SqliteFailure(ffi::Error::new(rc), Some("adding strata_bm25".to_owned()))),
    }
}

/// Registers `strata_bm25` with the FTS5 of `db`; an SQLite result code.
///
/// # Safety
///
/// `db` is a valid open connection.
#[allow(unsafe_code)]
unsafe fn add_bm25(db: *mut ffi::sqlite3) -> c_int {
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
        create(fts5, c"strata_bm25".as_ptr(), ptr::null_mut(), Some(strata_bm25), None)
    }
}

/// What `strata_bm25` computes once per query (FTS5 keeps it as the query's auxiliary data).
struct Bm25Query {
    average_length: f64,
    idf: Vec<f64>,
    frequencies: Vec<f64>,
}

/// Frees a [`Bm25Query`] handed to FTS5 as auxiliary data.
///
/// # Safety
///
/// `data` was made by `Box::into_raw` of a `Bm25Query`, and FTS5 calls this once.
#[allow(unsafe_code)]
unsafe extern "C" fn free_bm25_query(data: *mut c_void) {
    // SAFETY: see the function's contract.
    drop(unsafe { Box::from_raw(data.cast::<Bm25Query>()) });
}

/// Counts the rows of one phrase (FTS5's `xQueryPhrase` callback, as its `bm25()` counts).
///
/// # Safety
///
/// `count` points to the `i64` [`strata_bm25`] passed.
#[allow(unsafe_code)]
unsafe extern "C" fn count_row(
    _api: *const ffi::Fts5ExtensionApi,
    _fts: *mut ffi::Fts5Context,
    count: *mut c_void,
) -> c_int {
    // SAFETY: see the function's contract.
    unsafe { *count.cast::<i64>() += 1 };
    ffi::SQLITE_OK
}

/// The FTS5 auxiliary function `strata_bm25` (see [`register_bm25`]).
///
/// # Safety
///
/// Called by FTS5 with its API, the current query's context, the SQL function's context and
/// `values` pointing to `count` values.
#[allow(unsafe_code)]
unsafe extern "C" fn strata_bm25(
    api: *const ffi::Fts5ExtensionApi,
    fts: *mut ffi::Fts5Context,
    context: *mut ffi::sqlite3_context,
    count: c_int,
    values: *mut *mut ffi::sqlite3_value,
) {
    // SAFETY: the pointers are FTS5's and SQLite's for the duration of this call; `values`
    // holds `count` values; the auxiliary data is a `Bm25Query` this function made.
    unsafe {
        let given: &[*mut ffi::sqlite3_value] = match count {
            n if n > 0 && !values.is_null() => std::slice::from_raw_parts(values, n as usize),
            _ => &[],
        };
        match bm25(&*api, fts, given) {
            Ok(score) => ffi::sqlite3_result_double(context, score),
            Err(rc) => ffi::sqlite3_result_error_code(context, rc),
        }
    }
}

/// The score of the current row, lower is better (as FTS5's `bm25()`), or an SQLite error code.
///
/// # Safety
///
/// As [`strata_bm25`].
#[allow(unsafe_code)]
unsafe fn bm25(
    api: &ffi::Fts5ExtensionApi,
    fts: *mut ffi::Fts5Context,
    given: &[*mut ffi::sqlite3_value],
) -> Result<f64, c_int> {
    let missing = ffi::SQLITE_MISUSE;
    let check = |rc: c_int| if rc == ffi::SQLITE_OK { Ok(()) } else { Err(rc) };
    // SAFETY: as the caller's contract; every FTS5 routine is called with the context it gave.
    unsafe {
        let get_aux = api.xGetAuxdata.ok_or(missing)?;
        let mut query = get_aux(fts, 0).cast::<Bm25Query>();
        if query.is_null() {
            let phrases = api.xPhraseCount.ok_or(missing)?(fts).max(0) as usize;
            let (mut rows, mut tokens) = (0i64, 0i64);
            check(api.xRowCount.ok_or(missing)?(fts, &mut rows))?;
            check(api.xColumnTotalSize.ok_or(missing)?(fts, -1, &mut tokens))?;
            let mut idf = Vec::with_capacity(phrases);
            for phrase in 0..phrases {
                let hits = match given.get(phrase) {
                    Some(&value) if ffi::sqlite3_value_type(value) != ffi::SQLITE_NULL => {
                        ffi::sqlite3_value_double(value)
                    }
                    _ => {
                        let mut hits = 0i64;
                        check(api.xQueryPhrase.ok_or(missing)?(
                            fts,
                            phrase as c_int,
                            (&raw mut hits).cast::<c_void>(),
                            Some(count_row),
                        ))?;
                        hits as f64
                    }
                };
                // As FTS5: a phrase in more than half the rows would get a negative weight.
                let weight = ((rows as f64 - hits + 0.5) / (hits + 0.5)).ln();
                idf.push(if weight <= 0.0 { 1e-6 } else { weight });
            }
            let made = Box::into_raw(Box::new(Bm25Query {
                average_length: tokens as f64 / rows.max(1) as f64,
                idf,
                frequencies: vec![0.0; phrases],
            }));
            check(api.xSetAuxdata.ok_or(missing)?(fts, made.cast::<c_void>(), Some(free_bm25_query)))?;
            query = made;
        }
        let query = &mut *query;
        query.frequencies.iter_mut().for_each(|f| *f = 0.0);
        let mut instances = 0;
        check(api.xInstCount.ok_or(missing)?(fts, &mut instances))?;
        let inst = api.xInst.ok_or(missing)?;
        for i in 0..instances {
            let (mut phrase, mut column, mut offset) = (0, 0, 0);
            check(inst(fts, i, &mut phrase, &mut column, &mut offset))?;
            if let Some(f) = query.frequencies.get_mut(phrase as usize) {
                *f += 1.0;
            }
        }
        let mut length = 0;
        check(api.xColumnSize.ok_or(missing)?(fts, -1, &mut length))?;
        let (k1, b) = (1.2, 0.75);
        let norm = k1 * (1.0 - b + b * f64::from(length) / query.average_length);
        let score: f64 = query
            .idf
            .iter()
            .zip(&query.frequencies)
            .map(|(idf, f)| idf * ((f * (k1 + 1.0)) / (f + norm)))
            .sum();
        Ok(-score)
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
