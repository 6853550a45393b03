mod contract;
mod crash;
mod files;
mod postgres;
mod tamper;
