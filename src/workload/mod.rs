//! `numasched workload`: a built-in test load, **not** part of the scheduling pipeline.
//!
//! Tests and users run it under the scheduler to see what a placement does: `stream` is
//! memory-bandwidth bound (its rate moves with where its pages live and who shares the
//! memory bus), `cpu` is compute only (its rate moves only with CPU sharing), so running
//! both side by side separates memory effects from CPU effects. It reports its own rate
//! every interval — as JSON Lines with `--json` — because this machine and the QEMU test
//! beds have no hardware counters to measure it from outside (docs/vm.md).
//!
//! Modules: [`rate`] holds the arithmetic and report records, [`stream`] and [`cpu`]
//! are the worker loops, [`membind`] places memory, [`stop`] turns SIGTERM/SIGINT into
//! a clean summary. `--size` is parsed by `numasched_model::size`, which the config
//! file shares.

pub mod cpu;
pub mod membind;
pub mod rate;
pub mod stop;
pub mod stream;

use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context};
use clap::{Args, ValueEnum};

use crate::topology::{sysfs, NodeId, Topology};
use rate::{Event, Unit};

/// Stream size when the machine's LLC size is unknown.
pub const FALLBACK_SIZE: u64 = 256 << 20;

/// Longest wait between checks for a stop signal, so SIGTERM ends a run promptly even
/// with a long report interval.
const POLL: Duration = Duration::from_millis(20);

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Kind {
    /// STREAM triad over arrays much larger than the LLC: memory-bandwidth bound.
    Stream,
    /// Integer hash loop in registers: compute only, no memory traffic.
    Cpu,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Stream => "stream",
            Kind::Cpu => "cpu",
        }
    }
}

#[derive(Debug, Args)]
pub struct WorkloadArgs {
    /// Which load to run.
    #[arg(value_enum)]
    pub kind: Kind,
    /// Stream only: total bytes of the three arrays, per thread (e.g. 512M, 2G, 1048576)
    /// [default: 4 × the largest LLC, or 256M if unknown].
    #[arg(long, allow_hyphen_values = true, value_name = "BYTES", value_parser = crate::model::size::parse_size)]
    pub size: Option<u64>,
    /// How long to run.
    #[arg(long, allow_hyphen_values = true, value_name = "S", default_value = "10", value_parser = parse_seconds)]
    pub seconds: f64,
    /// Bind all memory to this NUMA node (set_mempolicy MPOL_BIND) before allocating.
    #[arg(long, allow_hyphen_values = true, value_name = "NODE", conflicts_with = "touch_node",
          value_parser = crate::flags::node_id())]
    pub membind: Option<NodeId>,
    /// Allocate all memory on this NUMA node, then drop the policy: the pages sit there
    /// with nothing binding them, as if the program had first run on that node.
    #[arg(long, allow_hyphen_values = true, value_name = "NODE", value_parser = crate::flags::node_id())]
    pub touch_node: Option<NodeId>,
    /// Worker threads, each with its own arrays or loop; rates are summed.
    #[arg(long, allow_hyphen_values = true, value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub threads: u32,
    /// Seconds between progress lines.
    #[arg(long, allow_hyphen_values = true, value_name = "S", default_value = "1", value_parser = parse_seconds)]
    pub report_interval: f64,
    /// Start every thread but the first this many seconds late, as a program that
    /// starts its workers after a serial phase.
    #[arg(long, allow_hyphen_values = true, value_name = "S", value_parser = parse_seconds)]
    pub late: Option<f64>,
    /// Cpu only: alternate BUSY seconds of work with IDLE seconds of sleep (e.g. 1:1),
    /// a bursty load.
    #[arg(long, allow_hyphen_values = true, value_name = "BUSY:IDLE", value_parser = parse_duty)]
    pub duty: Option<(f64, f64)>,
    /// One JSON object per line (JSON Lines): start, progress…, summary.
    #[arg(long)]
    pub json: bool,
}

/// A positive, finite number of seconds that fits a `Duration`.
fn parse_seconds(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(s) if s > 0.0 && Duration::try_from_secs_f64(s).is_ok() => Ok(s),
        _ => Err("expected seconds greater than 0, e.g. 10 or 0.5".to_string()),
    }
}

/// `BUSY:IDLE`, both positive seconds.
fn parse_duty(text: &str) -> Result<(f64, f64), String> {
    let (b, i) = text
        .split_once(':')
        .ok_or_else(|| format!("expected BUSY:IDLE seconds such as 1:1, got {text:?}"))?;
    Ok((parse_seconds(b)?, parse_seconds(i)?))
}

/// 4 × the largest LLC, so the arrays cannot live in cache and the triad measures memory.
pub fn default_size(topo: Option<&Topology>) -> u64 {
    topo.and_then(|t| t.llcs().iter().map(|l| l.size_bytes).max())
        .filter(|&s| s > 0)
        .and_then(|s| s.checked_mul(4))
        .unwrap_or(FALLBACK_SIZE)
}

pub fn run(args: WorkloadArgs) -> anyhow::Result<()> {
    // First, so a signal sent as soon as the process exists still yields a summary.
    stop::install().context("installing SIGTERM/SIGINT handlers")?;
    // Flags that mean nothing for this kind are refused, not ignored: a `--size` that
    // does nothing would leave the user believing the cpu loop used that much memory.
    if args.size.is_some() && args.kind != Kind::Stream {
        anyhow::bail!("--size applies to the stream workload only");
    }
    if args.duty.is_some() && args.kind != Kind::Cpu {
        anyhow::bail!("--duty applies to the cpu workload only");
    }
    if let Some(late) = args.late {
        if args.threads < 2 {
            anyhow::bail!("--late delays every thread but the first: give --threads 2 or more");
        }
        if late >= args.seconds {
            anyhow::bail!(
                "--late {late}: the late threads would start after the run ends \
                 (--seconds {})",
                args.seconds
            );
        }
    }
    let topo = sysfs::read(Path::new("/sys"));
    let unbind_after_touch = args.touch_node.is_some();
    if let Some((flag, node)) = args
        .membind
        .map(|n| ("--membind", n))
        .or(args.touch_node.map(|n| ("--touch-node", n)))
    {
        let t = topo
            .as_ref()
            .map_err(|e| anyhow!("{flag} {node}: cannot read the machine's nodes: {e}"))?;
        membind::bind_to_node(t, node, flag)?;
    }
    let size = match args.kind {
        Kind::Stream => Some(
            args.size
                .unwrap_or_else(|| default_size(topo.as_ref().ok())),
        ),
        Kind::Cpu => None,
    };
    let late = args.late.map(Duration::from_secs_f64);
    let duty = args
        .duty
        .map(|(b, i)| (Duration::from_secs_f64(b), Duration::from_secs_f64(i)));
    let threads = args.threads as usize;
    let counters: Vec<AtomicU64> = (0..threads).map(|_| AtomicU64::new(0)).collect();
    let halt = AtomicBool::new(false);

    std::thread::scope(|scope| {
        let (ready_tx, ready_rx) = mpsc::channel::<anyhow::Result<()>>();
        for (i, counter) in counters.iter().enumerate() {
            let ready = ready_tx.clone();
            let halt = &halt;
            // Workers allocate on their own thread: first touch puts each one's pages
            // where it runs (or on the bound node), as a real program's would be.
            std::thread::Builder::new()
                .name(format!("workload-{i}"))
                .spawn_scoped(scope, move || match size {
                    Some(bytes) => match stream::Triad::new(bytes).and_then(|t| {
                        if unbind_after_touch {
                            membind::unbind()?;
                        }
                        Ok(t)
                    }) {
                        Ok(mut t) => {
                            let _ = ready.send(Ok(()));
                            if let Some(d) = late.filter(|_| i > 0) {
                                if !stop::pause(d, halt) {
                                    return;
                                }
                            }
                            t.run(counter, halt);
                        }
                        Err(e) => {
                            let _ = ready.send(Err(e));
                        }
                    },
                    None => {
                        let _ = ready.send(Ok(()));
                        if let Some(d) = late.filter(|_| i > 0) {
                            if !stop::pause(d, halt) {
                                return;
                            }
                        }
                        match duty {
                            Some((busy, idle)) => {
                                cpu::run_duty(i as u64 + 1, counter, halt, busy, idle)
                            }
                            None => cpu::run(i as u64 + 1, counter, halt),
                        }
                    }
                })
                .context("spawning a worker thread")?;
        }
        drop(ready_tx);
        for _ in 0..threads {
            let r = ready_rx
                .recv()
                .map_err(|_| anyhow!("a worker thread ended before it was ready"))
                .and_then(|r| r);
            if let Err(e) = r {
                halt.store(true, Ordering::Relaxed);
                return Err(e);
            }
        }
        if unbind_after_touch {
            if let Err(e) = membind::unbind() {
                halt.store(true, Ordering::Relaxed);
                return Err(e);
            }
        }
        let result = report(&args, size, &counters);
        halt.store(true, Ordering::Relaxed);
        result
    })
}

/// The timing loop: progress every interval, summary at the deadline or on a signal.
fn report(args: &WorkloadArgs, size: Option<u64>, counters: &[AtomicU64]) -> anyhow::Result<()> {
    let sum = || {
        counters
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .sum::<u64>()
    };
    let unit = if size.is_some() {
        Unit::Bytes
    } else {
        Unit::Iterations
    };
    let event = |event: &'static str, elapsed: f64, total: u64, rate: f64| Event {
        event,
        workload: args.kind.name(),
        pid: std::process::id(),
        threads: counters.len(),
        unit,
        elapsed_s: elapsed,
        total,
        rate,
        gb_per_s: size.map(|_| rate::gb_per_s(rate)),
        size_bytes: size,
        membind: args.membind.or(args.touch_node),
        stopped_by: None,
    };
    let mut out = std::io::stdout().lock();
    let mut emit = |e: &Event| -> anyhow::Result<()> {
        let line = if args.json {
            serde_json::to_string(e).context("encoding a report line")?
        } else {
            e.text()
        };
        writeln!(out, "{line}").context("writing to stdout")
    };

    let t0 = Instant::now();
    let base = sum();
    emit(&event("start", 0.0, 0, 0.0))?;
    // Both were validated by `parse_seconds`.
    let run_for = Duration::from_secs_f64(args.seconds);
    let interval = Duration::from_secs_f64(args.report_interval);
    let deadline = t0 + run_for;
    let mut next = t0 + interval;
    let (mut last_t, mut last_total) = (t0, 0u64);
    let stopped_by = loop {
        let now = Instant::now();
        if stop::requested() {
            break "signal";
        }
        if now >= next && next <= deadline {
            let total = sum() - base;
            let r = rate::rate(total - last_total, (now - last_t).as_secs_f64());
            emit(&event("progress", (now - t0).as_secs_f64(), total, r))?;
            (last_t, last_total) = (now, total);
            while next <= now {
                next += interval;
            }
        }
        if now >= deadline {
            break "deadline";
        }
        let wake = next.min(deadline).min(now + POLL);
        std::thread::sleep(wake.saturating_duration_since(now));
    };
    let elapsed = t0.elapsed().as_secs_f64();
    let total = sum() - base;
    let mut summary = event("summary", elapsed, total, rate::rate(total, elapsed));
    summary.stopped_by = Some(stopped_by);
    emit(&summary)
}
