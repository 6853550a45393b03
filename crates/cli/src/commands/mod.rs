pub mod audit;
pub mod policy;
pub mod serve;
