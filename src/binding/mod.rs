//! The binding layer, one file per public concept: the only place besides
//! `lib.rs`, `errors` and `js_loop` where a napi type appears.

pub mod supervisor;
pub mod wait;
