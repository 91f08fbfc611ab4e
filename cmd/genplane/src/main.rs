//! The `genplane` executable: collects the process context and hands it to the dispatcher.

use std::process::ExitCode;

use genplane_component_base::process::Process;
use genplane_component_base::version::BuildInfo;

/// jemalloc instead of the C library's allocator. An API server's heap is many long-lived
/// objects (the watch cache) beside short-lived request buffers on every thread; glibc's
/// per-thread arenas keep the freed buffers scattered between the cached objects, so memory
/// stays taken after the requests are gone. Measured side by side on 20,000 cached 1 KiB
/// ConfigMaps (`genplane-bench-apiserver --only memory`): 2,633 B per object with glibc,
/// 1,531 B with jemalloc (their JSON is 1,416 B). Without the `jemalloc` feature the C library's
/// allocator serves, for heap profilers that follow only it.
#[cfg(feature = "jemalloc")]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// Starts jemalloc's background thread, which returns freed pages to the system once they have
/// been unused for the decay time (10 s), also while the process is idle. Without it jemalloc
/// purges only when the program allocates again, so a server that went quiet after a burst
/// keeps the burst's memory: an API server after 20,000 objects came and went held 459 MiB
/// 90 s later, and 61–124 MiB with it in two runs (`hack/bench/controllers.sh --objects 20000`). A
/// failure only costs that, so it is reported and the process goes on.
#[cfg(feature = "jemalloc")]
fn return_freed_memory_when_idle() {
    let started = tikv_jemalloc_ctl::max_background_threads::write(1)
        .and_then(|()| tikv_jemalloc_ctl::background_thread::write(true));
    if let Err(error) = started {
        eprintln!("genplane: jemalloc's background thread did not start: {error}");
    }
}

/// The C library's allocator returns what it can by itself.
#[cfg(not(feature = "jemalloc"))]
fn return_freed_memory_when_idle() {}

fn main() -> ExitCode {
    return_freed_memory_when_idle();
    let process = Process::current(BuildInfo::new(
        env!("CARGO_PKG_VERSION"),
        Some(env!("GENPLANE_BUILD_GIT_COMMIT")),
    ));
    ExitCode::from(genplane::run(&process))
}
