mod chaos;
mod crate_rules;
