//! Pure domain types.
