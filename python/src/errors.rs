//! strata's errors as the exceptions of `strata/_errors.py`, each carrying the one line the
//! command line prints. The classes live in Python so that they can also be `ValueError`,
//! `LookupError` or `PermissionError`, as Python code expects.

use pyo3::prelude::*;
use strata::compactor::Error as CompactorError;
use strata::seam::Error as StoreError;

/// What a call of the binding can fail with, before it is raised.
#[derive(Debug)]
pub enum Failure {
    /// The engine refused or failed.
    Engine(strata::Error),
    /// An argument the binding reads itself is wrong.
    BadInput(String),
    /// The engine was closed.
    Closed,
    /// Python raised while the binding read an argument (a `model_dump` that failed, say).
    Python(PyErr),
    /// A bug: an answer that does not serialize, a task that panicked.
    Internal(String),
}

impl From<strata::Error> for Failure {
    fn from(error: strata::Error) -> Failure {
        Failure::Engine(error)
    }
}

impl From<StoreError> for Failure {
    fn from(error: StoreError) -> Failure {
        Failure::Engine(error.into())
    }
}

impl From<CompactorError> for Failure {
    fn from(error: CompactorError) -> Failure {
        Failure::Engine(error.into())
    }
}

impl From<PyErr> for Failure {
    fn from(error: PyErr) -> Failure {
        Failure::Python(error)
    }
}

impl Failure {
    /// The same failure, said of the message at `index` of a batch.
    pub fn at(self, index: usize) -> Failure {
        match self {
            Failure::BadInput(reason) => Failure::BadInput(format!("message {index}: {reason}")),
            Failure::Engine(strata::Error::InvalidMessage(reason)) => {
                Failure::BadInput(format!("message {index}: invalid message: {reason}"))
            }
            other => other,
        }
    }
}

/// The error and its causes on one line, whitespace collapsed: what `strata` prints after
/// `error: `.
fn error_line(error: &strata::Error) -> String {
    strata::seam::fence::one_line(&strata::seam::error_chain(error))
}

fn engine_class(error: &strata::Error) -> &'static str {
    error.class().name().unwrap_or("Error")
}

/// The Python exception for `failure`, its `kind` the library's [`strata::ErrorKind`] (as
/// `strata serve`'s JSON errors name it), so a caller acts on one vocabulary in every language.
pub fn to_py(failure: Failure) -> PyErr {
    let (class, kind, message) = match failure {
        Failure::Python(error) => return error,
        Failure::Engine(error) => (engine_class(&error), error.kind(), error_line(&error)),
        Failure::BadInput(reason) => ("BadInput", strata::ErrorKind::InvalidInput, reason),
        Failure::Closed => ("Error", strata::ErrorKind::Unavailable, "the engine is closed".to_owned()),
        Failure::Internal(reason) => {
            ("Error", strata::ErrorKind::Internal, format!("internal error: {reason}"))
        }
    };
    Python::attach(|py| {
        let exception = py
            .import("strata._errors")
            .and_then(|module| module.getattr(class))
            .and_then(|class| class.call1((message.clone(),)))
            .and_then(|exception| exception.setattr("kind", kind.as_str()).map(|()| exception));
        match exception {
            Ok(exception) => PyErr::from_value(exception),
            // Only a broken installation lacks strata._errors: still say what went wrong.
            Err(_) => pyo3::exceptions::PyRuntimeError::new_err(message),
        }
    })
}
