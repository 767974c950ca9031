//! Attended steps: a human at the controlling terminal confirms them. The
//! answer is read from `/dev/tty`, never from stdin, so a pipe or a script
//! cannot confirm; under `CI` the step is refused outright.

use std::fs::OpenOptions;
use std::io::{BufRead, BufReader, Write};

#[derive(Debug, thiserror::Error)]
pub enum AttendedError {
    #[error(
        "refusing: {step} is an attended step and CI is set in the environment; \
         run it yourself from an interactive terminal without CI"
    )]
    UnderCi { step: String },
    #[error(
        "refusing: {step} is an attended step and needs a controlling terminal \
         (/dev/tty: {cause}); run it from an interactive terminal"
    )]
    NoTerminal { step: String, cause: String },
    #[error("{step} was not confirmed; nothing was done")]
    Declined { step: String },
}

/// Asks `prompt` at the terminal and accepts only `y` or `yes`.
pub fn confirm_yes(step: &str, prompt: &str) -> Result<(), AttendedError> {
    let answer = ask(step, prompt)?;
    match answer.trim().to_ascii_lowercase().as_str() {
        "y" | "yes" => Ok(()),
        _ => Err(AttendedError::Declined { step: step.to_owned() }),
    }
}

fn ask(step: &str, prompt: &str) -> Result<String, AttendedError> {
    if ci_is_set() {
        return Err(AttendedError::UnderCi { step: step.to_owned() });
    }
    let no_terminal = |e: std::io::Error| AttendedError::NoTerminal { step: step.to_owned(), cause: e.to_string() };
    let mut terminal = open_terminal().map_err(no_terminal)?;
    Ok(ask_terminal(&mut terminal, prompt).map_err(no_terminal)?.unwrap_or_default())
}

/// `CI` set to anything non-empty.
pub fn ci_is_set() -> bool {
    std::env::var_os("CI").is_some_and(|v| !v.is_empty())
}

/// The controlling terminal, read-write. Fails without one (setsid, cron, CI).
pub fn open_terminal() -> std::io::Result<std::fs::File> {
    OpenOptions::new().read(true).write(true).open("/dev/tty")
}

/// Writes `prompt` to the terminal and reads one line; `None` at end of input.
pub fn ask_terminal(terminal: &mut std::fs::File, prompt: &str) -> std::io::Result<Option<String>> {
    terminal.write_all(prompt.as_bytes())?;
    terminal.flush()?;
    let mut answer = String::new();
    let read = BufReader::new(terminal).read_line(&mut answer)?;
    Ok((read > 0).then_some(answer))
}
