//! The `strata` command line (`strata::cli`, in the library so that the Python wheel ships
//! it too).

use std::process::ExitCode;

fn main() -> ExitCode {
    ExitCode::from(strata::cli::main_from(std::env::args_os()))
}
