mod contract;
mod crash;
mod files;
mod tamper;
