//! What can stop `lanefs top`, each with what to do about it.

use crate::record::RecordError;

#[derive(Debug, thiserror::Error)]
pub enum TopError {
    /// Recording or replaying (the message names the file, and the line).
    #[error(transparent)]
    Recording(#[from] RecordError),
    /// Writing the rows (a closed pipe among others: the caller may take
    /// a broken pipe for a reader that has gone).
    #[error("writing the rows")]
    Output(#[source] std::io::Error),
    /// Setting up, reading or drawing the terminal.
    #[error("the terminal")]
    Terminal(#[source] std::io::Error),
}
