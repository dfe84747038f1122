use cairn_bench::cli::{Cli, Cmd};
use cairn_bench::{aof_seed, compare, replica_vs, report, scenario, tiering_vs, uffd_probe};
use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Some(files) = &cli.compare {
        return match report::compare(&files[0], &files[1], cli.run.as_deref(), &cli.out) {
            Ok(written) => {
                for f in written {
                    report::out(&format!("wrote {}", f.display()));
                }
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("cairn-bench: {e}");
                ExitCode::from(2)
            }
        };
    }
    let Some(cmd) = &cli.cmd else {
        eprintln!("cairn-bench: give a scenario (run, snapshot, snapshot-vs, replica-vs, aof, aof-seed, noise, tiering, tiering-vs, uffd-probe) or --compare A B; see --help");
        return ExitCode::from(2);
    };
    let result = match cmd {
        Cmd::Run(a) => scenario::run(a),
        Cmd::Snapshot(a) => scenario::snapshot(a),
        Cmd::SnapshotVs(a) => compare::snapshot_vs(a),
        Cmd::ReplicaVs(a) => replica_vs::replica_vs(a),
        Cmd::Aof(a) => scenario::aof(a),
        Cmd::AofSeed(a) => aof_seed::run(a),
        Cmd::Noise(a) => scenario::noise(a),
        Cmd::Tiering(a) => scenario::tiering(a),
        Cmd::TieringVs(a) => tiering_vs::tiering_vs(a),
        // No server and no report: the probe prints its own table.
        Cmd::UffdProbe(a) => return probe_exit(uffd_probe::run(a)),
        Cmd::UffdProbeChild(a) => return probe_exit(uffd_probe::child(a)),
    };
    match result {
        Ok(rep) => {
            rep.print();
            match rep.write(&cli.out) {
                Ok(files) => {
                    for f in files {
                        report::out(&format!("wrote {}", f.display()));
                    }
                }
                Err(e) => {
                    eprintln!("cairn-bench: {e}");
                    return ExitCode::from(2);
                }
            }
            // A partial result (the server went away, the rate was not reached...) is
            // written but the exit status says so.
            if rep.problems.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(3)
            }
        }
        Err(e) => {
            eprintln!("cairn-bench: {e}");
            ExitCode::from(2)
        }
    }
}

fn probe_exit(r: Result<(), String>) -> ExitCode {
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("cairn-bench: {e}");
            ExitCode::from(2)
        }
    }
}
