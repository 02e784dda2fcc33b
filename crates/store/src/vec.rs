//! Registration of the sqlite-vec extension: the one place in strata with `unsafe`.

use std::sync::Once;

/// Makes `vec0` and the `vec_*` functions available on every connection opened afterwards.
///
/// SQLite keeps a process-wide list of auto extensions; registering twice would run the
/// initializer twice per connection, so this runs exactly once.
pub(crate) fn register() {
    static REGISTER: Once = Once::new();
    REGISTER.call_once(|| {
        // SAFETY: `sqlite3_vec_init` is the extension entry point with the signature SQLite
        // expects of an auto extension (db, error message out-pointer, API routines); the
        // transmute only erases that signature into the `void(*)(void)` type the registration
        // function takes, as the SQLite documentation prescribes. The function is `'static`.
        #[allow(unsafe_code)]
        unsafe {
            rusqlite::ffi::sqlite3_auto_extension(Some(std::mem::transmute::<
                *const (),
                unsafe extern "C" fn(
                    *mut rusqlite::ffi::sqlite3,
                    *mut *mut std::ffi::c_char,
                    *const rusqlite::ffi::sqlite3_api_routines,
                ) -> std::ffi::c_int,
            >(
                sqlite_vec::sqlite3_vec_init as *const ()
            )));
        }
    });
}

/// Encodes a vector in the little-endian f32 layout `vec0` reads.
pub(crate) fn to_blob(vector: &[f32]) -> Vec<u8> {
    vector.iter().flat_map(|x| x.to_le_bytes()).collect()
}
