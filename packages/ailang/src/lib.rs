//! AILANG interpreter (in progress).
