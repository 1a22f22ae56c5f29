//! Attacks on the managed store's fewer-requests change.
#![cfg(feature = "managed")]

#[path = "../managed_support/mod.rs"]
mod managed_support;

#[test]
fn placeholder() {}
