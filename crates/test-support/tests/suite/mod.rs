mod chaos;
mod crate_rules;
mod doc_paths;
