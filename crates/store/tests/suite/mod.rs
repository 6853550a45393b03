mod contract;
mod crash;
mod disk_full;
mod files;
mod hold_columns;
mod postgres;
mod tamper;
mod written;
