//! strata's errors as the JavaScript errors of `errors.js`. The addon throws a plain `Error`
//! whose `code` names the class (`BadInput`, `NotFound`, ...) and whose message is the one line
//! the command line prints; `index.js` rethrows it as that class. The classification is the
//! Python binding's (`python/src/errors.rs`), so both languages raise the same kinds.

use napi::{Env, JsError};
use strata::compactor::Error as CompactorError;
use strata::recall::Error as RecallError;
use strata::seam::Error as StoreError;

/// What a call of the binding can fail with, before it is thrown.
#[derive(Debug)]
pub enum Failure {
    /// The engine refused or failed.
    Engine(strata::Error),
    /// An argument the binding reads itself is wrong.
    BadInput(String),
    /// The engine was closed.
    Closed,
    /// A bug: an answer that does not serialize, a call that panicked.
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

impl From<RecallError> for Failure {
    fn from(error: RecallError) -> Failure {
        Failure::Engine(strata::Error::Recall(error))
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

    /// The class `index.js` throws and the message it carries.
    fn class_and_message(self) -> (&'static str, String) {
        match self {
            Failure::Engine(error) => (engine_class(&error), error_line(&error)),
            Failure::BadInput(reason) => ("BadInput", reason),
            Failure::Closed => ("StrataError", "the engine is closed".to_owned()),
            Failure::Internal(reason) => ("StrataError", format!("internal error: {reason}")),
        }
    }

    /// The JavaScript error to throw (or to reject a promise with) in `env`.
    pub fn thrown(self, env: &Env) -> napi::Error {
        let (class, message) = self.class_and_message();
        let error = JsError::from(napi::Error::new(class, message)).into_unknown(*env);
        napi::Error::from(error)
    }
}

/// The error and its causes on one line, whitespace collapsed: what `strata` prints after
/// `error: `.
fn error_line(error: &strata::Error) -> String {
    strata::seam::fence::one_line(&strata::seam::error_chain(error))
}

fn engine_class(error: &strata::Error) -> &'static str {
    error.class().name().unwrap_or("StrataError")
}
