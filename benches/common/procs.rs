//! The processes a process started, from Linux's `/proc` (nothing elsewhere). Shared by the
//! benches (`common::children`) and the browser tests (`tests/it/browser`), which include this
//! file by path: neither is part of the library, and a crate of its own would be more than
//! these few lines are worth.

/// The processes `pid` started that still run (`/proc/PID/task/*/children`).
pub fn child_pids(pid: u32) -> Vec<u32> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).into_iter().flatten().flatten();
    tasks
        .filter_map(|task| std::fs::read_to_string(task.path().join("children")).ok())
        .flat_map(|list| {
            list.split_whitespace().filter_map(|c| c.parse().ok()).collect::<Vec<u32>>()
        })
        .collect()
}
