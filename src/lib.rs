//! awf runs multi-agent workflows written in Rhai.
pub mod accounting;
pub mod agent;
pub mod cli;
pub mod config;
pub mod control;
pub mod harness;
pub mod record;
pub mod run;
pub mod script;
