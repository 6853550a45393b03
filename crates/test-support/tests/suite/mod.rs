mod crate_rules;
